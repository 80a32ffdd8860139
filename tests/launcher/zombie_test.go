package launcher

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestZombieReplaced: a slot stopped (SIGSTOP) past the silence limit is
// replaced by a spare and the job finishes in generation 1; the launcher
// then ends the stopped process, which would keep it waiting for ever,
// says so, and exits 0.
func TestZombieReplaced(t *testing.T) {
	dir := t.TempDir()
	// Both ranks say "ready" once a barrier passed: every slot, the spare
	// too, has joined.
	writeFile(t, filepath.Join(dir, "z.star"), `def main():
    if comm.generation == 0:
        comm.barrier()
        print("ready", comm.rank)
        for i in range(100000):
            comm.barrier()
    comm.barrier()
    if comm.rank == 0:
        print("done in generation", comm.generation)
`, 0o644)
	cmd := exec.Command(sperli, "run", "--live", "-n", "2", "--spares", "1", "--silence", "500", "z.star")
	cmd.Dir, cmd.Env = dir, baseEnv
	out := &syncBuffer{}
	p := startInto(t, cmd, out)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var stopped procInfo
	ok := poll(ctx, func() bool {
		if s := out.String(); !strings.Contains(s, "[rank 0 · slot 0] ready 0\n") || !strings.Contains(s, "[rank 1 · slot 1] ready 1\n") {
			return false
		}
		for _, k := range children(cmd.Process.Pid) {
			env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", k.PID))
			if bytes.Contains(env, []byte("\x00SPERLI_RANK=1\x00")) {
				stopped = k
			}
		}
		return stopped.PID != 0
	})
	if !ok {
		t.Fatalf("both ranks not ready, or no slot 1, within %v\n%s", timeout, out.String())
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
	r := p.Wait(t, timeout)
	if r.Code != 0 || !strings.Contains(r.Stdout, "[rank 0 · slot 0] done in generation 1\n") {
		t.Errorf("exit status %d, output %q; want 0 and generation 1's line", r.Code, r.Stdout)
	}
	r.Stderr = r.Stdout // one stream: the launcher's lines are among the ranks'
	wantSays(t, "a zombie", r, `generation 1: rank 1 \(slot 1 on 127\.0\.0\.1\) lost: .*; slot 2 on 127\.0\.0\.1 takes rank 1; back in \d+ ms`, `slot 1 was replaced and did not end; killed`)
	if alive(stopped) {
		t.Errorf("the stopped slot (pid %d) is still there", stopped.PID)
	}
}
