package launch

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sperli/hosts"
	"sperli/job"
	"sperli/runtime"
)

// TestMakeJobPlantedSymlinks: symlinks planted in a shared output
// directory, at every name `job make` writes or wrote (rank-i.job and its
// old temporary name rank-i.job.tmp), never receive a job description:
// their targets stay as they were (or absent), and every rank-i.job is a
// regular file of mode 0600 holding a valid description. Nothing else is
// left in the directory.
func TestMakeJobPlantedSymlinks(t *testing.T) {
	out := t.TempDir()
	elsewhere := t.TempDir()
	victim := filepath.Join(elsewhere, "victim")
	if err := os.WriteFile(victim, []byte("untouched\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	absent := filepath.Join(elsewhere, "absent")
	plants := map[string]string{
		"rank-0.job":     victim,
		"rank-0.job.tmp": victim,
		"rank-1.job":     absent,
		"rank-1.job.tmp": absent,
	}
	for name, target := range plants {
		if err := os.Symlink(target, filepath.Join(out, name)); err != nil {
			t.Fatal(err)
		}
	}
	files, err := MakeJob(MakeOptions{N: 2, Out: out})
	if err != nil {
		t.Fatalf("MakeJob: %v", err)
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "untouched\n" {
		t.Errorf("the planted symlinks' target holds %d bytes (%v), want it untouched", len(b), err)
	}
	if _, err := os.Lstat(absent); !os.IsNotExist(err) {
		t.Errorf("a dangling symlink's target was created (%v)", err)
	}
	if len(files) != 2 {
		t.Fatalf("MakeJob wrote %q, want 2 files", files)
	}
	for r, f := range files {
		if want := filepath.Join(out, []string{"rank-0.job", "rank-1.job"}[r]); f != want {
			t.Errorf("file %d is %s, want %s", r, f, want)
		}
		fi, err := os.Lstat(f)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v (%v), want a regular file of mode 0600", f, fi.Mode(), err)
			continue
		}
		b, _ := os.ReadFile(f)
		j, err := job.Parse(b)
		if err != nil || j.Rank != r {
			t.Errorf("%s does not hold rank %d's description: %v", f, r, err)
		}
	}
	ents, _ := os.ReadDir(out)
	for _, e := range ents {
		if n := e.Name(); n != "rank-0.job" && n != "rank-1.job" && plants[n] == "" {
			t.Errorf("%s left in the output directory", n)
		}
	}
}

// TestMakeJobExistingTmpDir: a planted directory or file at the private
// directory's prefix does not stop `job make`, and a name already holding a
// directory is an error, not a write into it.
func TestMakeJobDirectoryInTheWay(t *testing.T) {
	out := t.TempDir()
	if err := os.Mkdir(filepath.Join(out, "rank-1.job"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := MakeJob(MakeOptions{N: 2, Out: out}); err == nil || !strings.Contains(err.Error(), "rank-1.job") {
		t.Errorf("MakeJob with a directory at rank-1.job: %v, want an error naming it", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(out, "rank-1.job")); len(ents) != 0 {
		t.Errorf("the directory in the way got %v", ents)
	}
	ents, _ := os.ReadDir(out)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".sperli-job-") {
			t.Errorf("private directory %s left behind", e.Name())
		}
	}
}

// TestMakeJobDefaultPorts: without a port on its line, rank i listens at
// hosts.BasePort + i, and every such port of the largest job lies below
// Linux's ephemeral range (32768–60999), where a dialer's own port could
// take it; the line's own port wins.
func TestMakeJobDefaultPorts(t *testing.T) {
	if hosts.BasePort < 1024 || hosts.LastDefaultPort >= 32768 {
		t.Errorf("default ports %d..%d, want them within 1024..32767", hosts.BasePort, hosts.LastDefaultPort)
	}
	if last := hosts.LastDefaultPort - hosts.BasePort; last < 8192 {
		t.Errorf("default ports end at rank %d, want a job of 8192 ranks at least", last)
	}
	if _, err := MakeJob(MakeOptions{N: hosts.LastDefaultPort - hosts.BasePort + 2, Out: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "needs a port on its line") {
		t.Errorf("job make of more ranks than default ports: %v, want the rank past them named", err)
	}
	dir := t.TempDir()
	list := filepath.Join(dir, "hosts.txt")
	if err := os.WriteFile(list, []byte("127.0.0.1\n127.0.0.1 23456\n127.0.0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := MakeJob(MakeOptions{N: 3, HostsFile: list, Out: filepath.Join(dir, "out")})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(files[2])
	j, err := job.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	for r, want := range []int{hosts.BasePort, 23456, hosts.BasePort + 2} {
		if got := j.Hosts[r].Port; got != want {
			t.Errorf("rank %d's port is %d, want %d", r, got, want)
		}
	}
}

// TestMakeJobPortTaken: a rank whose port is taken fails the join with
// H1610 naming the port and the fix, not only the system's "address
// already in use".
func TestMakeJobPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	dir := t.TempDir()
	list := filepath.Join(dir, "hosts.txt")
	if err := os.WriteFile(list, []byte(fmt.Sprintf("127.0.0.1 %d\n", port)), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := MakeJob(MakeOptions{N: 1, HostsFile: list, Out: filepath.Join(dir, "out")})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(files[0])
	j, err := job.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := runtime.Init(ctx, j)
	if err == nil {
		c.Close()
		t.Fatal("Init with its port taken succeeded")
	}
	msg := err.Error()
	for _, want := range []string{"H1610", fmt.Sprintf("port %d is taken", port), "host line a free port"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Init: %q, want it to say %q", msg, want)
		}
	}
}
