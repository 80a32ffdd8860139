package launcher

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// deadlock is a program whose ranks 0 and 1 wait for each other and whose
// other ranks wait in a barrier.
const deadlock = `def main():
    if comm.rank < 2:
        comm.recv(1 - comm.rank, 7)
    else:
        comm.barrier()
`

// wantWaits checks the report of where each rank waits.
func wantWaits(t *testing.T, r result, head string, n int) {
	t.Helper()
	want := []string{
		`^sperli:   rank 0: recv\(source 1, tag 7\) for \d+\.\d s$`,
		`^sperli:   rank 1: recv\(source 0, tag 7\) for \d+\.\d s$`,
		`^sperli:   rank 2: barrier \(collective 1, waiting for rank [01]\) for \d+\.\d s$`,
	}[:n]
	var got []string
	for _, l := range lines(withoutNotes(r.Stderr)) {
		if strings.HasPrefix(l, "sperli: ") {
			got = append(got, l)
		}
	}
	i := 0
	for i < len(got) && got[i] != head {
		i++
	}
	if i+1+n > len(got) || got[i+1] != "sperli: where each rank waits:" {
		t.Fatalf("no %q then \"where each rank waits:\" in the launcher's lines\n%v", head, r)
	}
	for k, w := range want {
		if !regexp.MustCompile(w).MatchString(got[i+2+k]) {
			t.Errorf("line %q, want %s", got[i+2+k], w)
		}
	}
	// A rank that saw its peers killed as the launcher ended the job has
	// nothing to add (shown with -v only).
	for rank := 0; rank < n; rank++ {
		if l := rankLines(r.Stderr, rank); len(l) > 0 {
			t.Errorf("rank %d's errors after the launcher ended the job are shown: %q", rank, l)
		}
	}
}

// TestTimeout: --timeout on a deadlock ends the job with exit status 1
// and names both ranks' pending receives, and the third rank's barrier.
func TestTimeout(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "dl.star"), deadlock, 0o644)
	r := sperliRun(t, baseEnv, dir, "run", "-n", "3", "--timeout", "1s", "dl.star")
	if r.Code != 1 {
		t.Errorf("exit status %d, want 1\n%v", r.Code, r)
	}
	wantWaits(t, r, "sperli: --timeout 1s passed: ending every rank", 3)
	for _, l := range lines(r.Stderr) {
		if strings.Contains(l, "lost") {
			t.Errorf("launcher line %q: a rank ended by --timeout is not lost", l)
		}
	}
}

// TestInterruptReport: SIGINT to a job that has run longer than a second
// gives the same report before the ranks are ended.
func TestInterruptReport(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "dl.star"), deadlock, 0o644)
	l := start(t, baseEnv, dir, "run", "-n", "3", "dl.star")
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// Joined (each rank has its two peer connections) and past the
	// launcher's first second: the condition of the report, not an order.
	ok := poll(ctx, func() bool {
		kids := children(l.Cmd.Process.Pid)
		if len(kids) != 3 || time.Since(l.Started) < 2*time.Second {
			return false
		}
		for _, k := range kids {
			if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", k.PID)); exe != sperli || sockets(k.PID) < 2 {
				return false
			}
		}
		return true
	})
	if !ok {
		t.Fatalf("the ranks did not join\n%s", &l.Stderr)
	}
	if err := l.Cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	r := l.Wait(t, timeout)
	if r.Code != 130 {
		t.Errorf("exit status %d, want 130 (128 + SIGINT)\n%v", r.Code, r)
	}
	wantWaits(t, r, "sperli: interrupt: ending every rank", 3)
}
