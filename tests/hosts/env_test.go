//go:build hosts

package hosts

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	sperlihosts "sperli/hosts"
)

// TestRemoteEnvironmentAndNote: over real ssh, -x NAME=VALUE and -x NAME
// reach the remote ranks, which get SPERLI_LOCAL_RANK/SIZE of their host
// and torchrun's variables; a host that runs more ranks than it has
// processors says so once, from its first rank, and a host that does not
// says nothing.
func TestRemoteEnvironmentAndNote(t *testing.T) {
	c := newCluster(t, options{})
	crowded := sperlihosts.CPUs() + 1 // the test hosts share the machine's processors
	var lines []string
	for i := 0; i < crowded; i++ {
		lines = append(lines, c.host(1))
	}
	lines = append(lines, c.host(2))
	n := len(lines)
	j := c.newJob(t, lines...)
	j.env = withEnv(j.env, "BAR=from the launcher")
	prog := writeFile(t, filepath.Join(j.aux, "env.star"), `print("|".join([str(sperli.getenv(v)) for v in
    ["FOO", "BAR", "SPERLI_RANK", "SPERLI_SIZE", "SPERLI_LOCAL_RANK", "SPERLI_LOCAL_SIZE", "RANK", "WORLD_SIZE", "LOCAL_RANK"]]))
`, 0o644)
	r := j.run("run", "-n", strconv.Itoa(n), "--hosts", j.hosts, "-x", "FOO=a b", "-x", "BAR", prog)
	if r.Code != 0 {
		t.Fatalf("%v", r)
	}
	for rank := 0; rank < n; rank++ {
		local, size := rank, crowded
		if rank == n-1 {
			local, size = 0, 1
		}
		want := fmt.Sprintf("a b|from the launcher|%d|%d|%d|%d|%d|%d|%d", rank, n, local, size, rank, n, local)
		if got := rankLines(r.Stdout, rank); len(got) != 1 || got[0] != want {
			t.Errorf("rank %d printed %q, want %q", rank, got, want)
		}
	}
	var notes []string
	for _, l := range strings.Split(r.Stderr, "\n") {
		if strings.Contains(l, "note: ") {
			notes = append(notes, l)
		}
	}
	want := fmt.Sprintf("note: %d ranks on host %s, which has %d processors", crowded, c.host(1), crowded-1)
	if len(notes) != 1 || !strings.HasPrefix(notes[0], "[rank 0] ") || !strings.Contains(notes[0], want) {
		t.Errorf("notes %q, want one, from rank 0, saying %q\n%v", notes, want, r)
	}
	j.checkClean(false)
}
