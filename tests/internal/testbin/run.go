package testbin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Process is a process a test started and reads the output of: the
// launcher, a rank, or ssh.
type Process struct {
	Cmd            *exec.Cmd
	Stdout, Stderr bytes.Buffer
	Started        time.Time
	done           chan struct{}
	err            error
}

// Start starts cmd with its output captured. If it still runs when the
// test ends, t.Cleanup kills it and everything it started (KillTree).
func Start(t testing.TB, cmd *exec.Cmd) *Process {
	t.Helper()
	p := &Process{Cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = &p.Stdout, &p.Stderr
	cmd.WaitDelay = 5 * time.Second // bounds Wait should anything else hold the pipes
	p.Started = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %q: %v", cmd.Args, err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
			return
		default:
		}
		KillTree(cmd.Process.Pid)
		<-p.done
	})
	return p
}

// Done is closed when the process has ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// Stop kills the process alone (not what it started) and waits for it, so
// that its output can be read.
func (p *Process) Stop() {
	p.Cmd.Process.Kill()
	<-p.done
}

// Result is how a process ended.
type Result struct {
	Code           int
	Stdout, Stderr string
	Took           time.Duration
}

func (r Result) String() string {
	return fmt.Sprintf("exit status %d after %v\nstdout:\n%s\nstderr:\n%s", r.Code, r.Took.Round(time.Millisecond), r.Stdout, r.Stderr)
}

// Wait waits at most d for the process to end; if it does not, it kills
// it and everything it started and fails the test.
func (p *Process) Wait(t testing.TB, d time.Duration) Result {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		KillTree(p.Cmd.Process.Pid)
		<-p.done
		t.Fatalf("%q did not end within %v (killed)\nstdout:\n%s\nstderr:\n%s", p.Cmd.Args, d, &p.Stdout, &p.Stderr)
	}
	r := Result{Stdout: p.Stdout.String(), Stderr: p.Stderr.String(), Took: time.Since(p.Started)}
	var ee *exec.ExitError
	switch {
	case p.err == nil:
	case errors.As(p.err, &ee):
		r.Code = ee.ExitCode()
	default:
		t.Fatalf("%q: %v", p.Cmd.Args, p.err)
	}
	return r
}

// KillTree kills pid's children's process groups (every rank leads one),
// its children, and pid.
func KillTree(pid int) {
	for _, c := range Children(pid) {
		syscall.Kill(-c.PID, syscall.SIGKILL)
		syscall.Kill(c.PID, syscall.SIGKILL)
	}
	syscall.Kill(pid, syscall.SIGKILL)
}

// WithEnv returns env with kv ("K=V") set, replacing earlier values of the
// same keys.
func WithEnv(env []string, kv ...string) []string {
	out := slices.Clone(env)
	for _, e := range kv {
		k, _, _ := strings.Cut(e, "=")
		out = slices.DeleteFunc(out, func(o string) bool { return strings.HasPrefix(o, k+"=") })
		out = append(out, e)
	}
	return out
}

// WriteFile writes content to path with mode and returns path.
func WriteFile(t testing.TB, path, content string, mode os.FileMode) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	return path
}

// WaitPIDs waits until dir holds rank-R.pid for every rank R below n (the
// test programs write them once they reached the point the test waits
// for), each naming a running child of the launcher l, and returns them.
// Otherwise, when ctx ends first or a file names anything else, it kills
// l and everything it started and fails the test; what says what the
// ranks did not all do in time ("join", "stop at their checkpoint").
func WaitPIDs(t testing.TB, ctx context.Context, l *Process, dir string, n int, what string) []Proc {
	t.Helper()
	pids := make([]Proc, n)
	var bad string
	ok := Poll(ctx, 20*time.Millisecond, func() bool {
		for r := range pids {
			if pids[r].PID != 0 {
				continue
			}
			b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("rank-%d.pid", r)))
			if err != nil {
				return false
			}
			pid, err := strconv.Atoi(string(b))
			if err != nil {
				bad = fmt.Sprintf("rank-%d.pid holds %q", r, b)
				return true
			}
			pi, ok := ReadProc(pid)
			if !ok || pi.PPID != l.Cmd.Process.Pid || pi.State == "Z" {
				bad = fmt.Sprintf("rank %d (pid %d) is no running child of the launcher (pid %d): it ended early?", r, pid, l.Cmd.Process.Pid)
				return true
			}
			pids[r] = pi
		}
		return true
	})
	if !ok {
		bad = fmt.Sprintf("the ranks did not all %s in time", what)
	}
	if bad != "" {
		KillTree(l.Cmd.Process.Pid)
		<-l.done
		t.Fatalf("%s\nstdout:\n%s\nstderr:\n%s", bad, &l.Stdout, &l.Stderr)
	}
	return pids
}

// SyncBuffer is a buffer a test may read while a process writes it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
