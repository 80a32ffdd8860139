package launcher

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestHostSlots: a host line takes as many ranks as its slots=N (or
// HOST:N) says, filled in order, and --map-by node deals them round-robin
// over the lines instead (SPEC §3); a line's port is the first of its
// slots' ports. The hosts are remote, reached through an ssh stand-in that
// tells each rank the host it was started on.
func TestHostSlots(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(bin, "ssh"), "#!/bin/sh\nh=$5\nshift 5\nexec env -i PATH=/usr/bin:/bin SSH_HOST=\"$h\" sh -c \"$*\"\n", 0o755)
	prog := writeFile(t, filepath.Join(dir, "where.sh"), "#!/bin/sh\necho \"$SSH_HOST local=$SPERLI_LOCAL_RANK/$SPERLI_LOCAL_SIZE\"\n", 0o755)
	hostsFile := writeFile(t, filepath.Join(dir, "hosts.txt"), "node1.example slots=2\nnode2.example:3 # three\n", 0o644)
	for _, tc := range []struct {
		mapBy string
		where []string // what ranks 0..4 print
	}{
		{"", []string{"node1.example local=0/2", "node1.example local=1/2", "node2.example local=0/3", "node2.example local=1/3", "node2.example local=2/3"}},
		{"slot", []string{"node1.example local=0/2", "node1.example local=1/2", "node2.example local=0/3", "node2.example local=1/3", "node2.example local=2/3"}},
		{"node", []string{"node1.example local=0/2", "node2.example local=0/3", "node1.example local=1/2", "node2.example local=1/3", "node2.example local=2/3"}},
	} {
		t.Run("map-by "+tc.mapBy, func(t *testing.T) {
			args := []string{"run", "-n", "5", "--hosts", hostsFile}
			if tc.mapBy != "" {
				args = append(args, "--map-by", tc.mapBy)
			}
			r := sperliRun(t, withEnv("PATH="+bin+":"+os.Getenv("PATH")), dir, append(args, prog)...)
			if r.Code != 0 {
				t.Fatalf("%v", r)
			}
			for rank, want := range tc.where {
				if got := rankLines(r.Stdout, rank); len(got) != 1 || got[0] != want {
					t.Errorf("rank %d printed %q, want %q", rank, got, want)
				}
			}
		})
	}
}

// TestHostSlotsJob: `sperli job make` gives the slots of a line with a
// port the ports P, P+1, …, and the ranks of a line without one the base
// port + rank.
func TestHostSlotsJob(t *testing.T) {
	dir := t.TempDir()
	hostsFile := writeFile(t, filepath.Join(dir, "hosts.txt"), "node1.example 47100 slots=2\nnode2.example:2\n", 0o644)
	r := sperliRun(t, withEnv(), dir, "job", "make", "-n", "4", "--hosts", hostsFile, "--out", "job")
	if r.Code != 0 {
		t.Fatalf("%v", r)
	}
	b, err := os.ReadFile(filepath.Join(dir, "job", "rank-0.job"))
	if err != nil {
		t.Fatal(err)
	}
	var job struct {
		Hosts []struct {
			Host string
			Port int
		}
	}
	if err := json.Unmarshal(b, &job); err != nil {
		t.Fatalf("rank-0.job: %v", err)
	}
	got := fmt.Sprint(job.Hosts)
	if want := "[{node1.example 47100} {node1.example 47101} {node2.example 21402} {node2.example 21403}]"; got != want {
		t.Errorf("rank-0.job hosts = %s, want %s", got, want)
	}
}

// TestHostSlotsJoin: three ranks of a .star program on one host line of
// three slots join and reduce.
func TestHostSlotsJoin(t *testing.T) {
	dir := t.TempDir()
	hostsFile := writeFile(t, filepath.Join(dir, "hosts.txt"), "localhost slots=3\n", 0o644)
	r := sperliRun(t, withEnv(), "", "run", "-n", "3", "--hosts", hostsFile, "scripts/examples/sum.star", "30")
	if r.Code != 0 {
		t.Fatalf("%v", r)
	}
	if got, want := rankLines(r.Stdout, 0), "rows=30 total=465 expected=465 ok"; len(got) != 1 || got[0] != want {
		t.Errorf("rank 0 printed %q, want %q", got, want)
	}
}
