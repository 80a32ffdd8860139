package launcher

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestZombieReplaced: a slot stopped (SIGSTOP) past the silence limit is
// replaced by a spare and the job finishes in generation 1; the launcher
// then ends the stopped process, which would keep it waiting for ever,
// says so, and exits 0.
func TestZombieReplaced(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "z.star"), `def main():
    if comm.generation == 0:
        for i in range(100000):
            comm.barrier()
    comm.barrier()
    if comm.rank == 0:
        print("done in generation", comm.generation)
`, 0o644)
	l := start(t, baseEnv, dir, "run", "-n", "2", "--spares", "1", "--silence", "500", "z.star")
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var stopped procInfo
	ok := poll(ctx, func() bool {
		kids := children(l.Cmd.Process.Pid)
		if len(kids) != 3 {
			return false
		}
		for _, k := range kids {
			if sockets(k.PID) < 2 {
				return false
			}
			env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", k.PID))
			if bytes.Contains(env, []byte("\x00SPERLI_RANK=1\x00")) {
				stopped = k
			}
		}
		return stopped.PID != 0
	})
	if !ok {
		l.Stop()
		t.Fatalf("no 3 joined slots with slot 1 among them within %v\n%s", timeout, &l.Stderr)
	}
	t.Cleanup(func() {
		if alive(stopped) {
			syscall.Kill(stopped.PID, syscall.SIGKILL)
			syscall.Kill(stopped.PID, syscall.SIGCONT)
		}
	})
	if err := syscall.Kill(stopped.PID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	r := l.Wait(t, timeout)
	if r.Code != 0 || r.Stdout != "[slot 0] done in generation 1\n" {
		t.Errorf("exit status %d, stdout %q; want 0 and generation 1's line\n%v", r.Code, r.Stdout, r)
	}
	wantSays(t, "a zombie", r, `generation 1: rank 1 \(slot 1 on 127\.0\.0\.1\) lost: .*; slot 2 on 127\.0\.0\.1 takes rank 1; back in \d+ ms`, `slot 1 was replaced and did not end; killed`)
	if alive(stopped) {
		t.Errorf("the stopped slot (pid %d) is still there", stopped.PID)
	}
}
