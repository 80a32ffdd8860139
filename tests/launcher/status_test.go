package launcher

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// stuck is a program whose three ranks wait for ever: rank 0 for rank 1,
// rank 1 in a barrier (for rank 0), rank 2 for rank 0. Rank 0 is the one
// the others wait for. Rank 1 says a line first.
const stuck = `if comm.rank == 0:
    comm.send(1, 1, "x" * 1000)
    comm.recv(1, 9)
else:
    comm.recv(0, 1)
    if comm.rank == 1:
        print("rank 1 got it")
    comm.barrier()
`

// statusRE is a status line of the stuck job once every rank answered.
var statusRE = regexp.MustCompile(`sperli: (status: )?3/3 ranks running · slowest rank 0: recv\(source 1, tag 9\) \d+\.\d s · 1\.\d kB sent · \d+:\d\d`)

// TestStatusLine: --status-every on a pipe writes a plain status line each
// refresh, naming the rank the others wait for, its call and the bytes
// sent; on a terminal --live draws it in place (erased before every other
// line, which stays whole), and takes it away at the end.
func TestStatusLine(t *testing.T) {
	t.Run("plain", func(t *testing.T) {
		dir := t.TempDir()
		prog := writeFile(t, filepath.Join(dir, "stuck.star"), stuck, 0o644)
		cmd := exec.Command(sperli, "run", "-n", "3", "--status-every", "20ms", prog)
		cmd.Dir, cmd.Env = dir, baseEnv
		out := &syncBuffer{}
		p := startInto(t, cmd, out)
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if !poll(ctx, func() bool { return statusRE.MatchString(out.String()) }) {
			t.Fatalf("no status line naming rank 0 within %v:\n%s", timeout, out.String())
		}
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		r := p.Wait(t, timeout)
		if r.Code != 130 {
			t.Errorf("exit status %d after the interrupt, want 130\n%s", r.Code, r.Stdout)
		}
		if strings.Contains(r.Stdout, "\x1b") {
			t.Errorf("a status line not on a terminal has escapes: %q", r.Stdout)
		}
		for _, line := range lines(r.Stdout) {
			if strings.HasPrefix(line, "sperli: status: ") && !regexp.MustCompile(`^sperli: status: \d/3 ranks running · `).MatchString(line) {
				t.Errorf("status line %q: want it to begin with the ranks running", line)
			}
		}
	})
	t.Run("terminal", func(t *testing.T) {
		if _, err := exec.LookPath("script"); err != nil {
			t.Fatalf("script (bsdutils on Debian) is needed for the pseudo-terminal: %v", err)
		}
		dir := t.TempDir()
		prog := writeFile(t, filepath.Join(dir, "stuck.star"), stuck, 0o644)
		// exec: script runs the command with $SHELL -c, and a shell such
		// as dash forks for it, which would put the launcher one further
		// down (the search below walks the whole tree anyway).
		cmd := exec.Command("script", "-qfec", fmt.Sprintf("exec '%s' run -n 3 --live '%s'", sperli, prog), "/dev/null")
		cmd.Dir, cmd.Env = dir, withEnv("NO_COLOR=1")
		out := &syncBuffer{}
		p := startInto(t, cmd, out)
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if !poll(ctx, func() bool {
			return statusRE.MatchString(out.String()) && strings.Contains(out.String(), "rank 1 got it")
		}) {
			t.Fatalf("no status line naming rank 0 within %v:\n%q", timeout, out.String())
		}
		var launcher int
		for next := []int{cmd.Process.Pid}; launcher == 0 && len(next) > 0; {
			pid := next[0]
			next = next[1:]
			for _, k := range children(pid) {
				if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", k.PID)); exe == sperli {
					launcher = k.PID
					break
				}
				next = append(next, k.PID)
			}
		}
		if launcher == 0 {
			t.Fatalf("no sperli launcher under script (pid %d)", cmd.Process.Pid)
		}
		if err := syscall.Kill(launcher, syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		r := p.Wait(t, timeout)
		if r.Code != 130 {
			t.Errorf("exit status %d after the interrupt, want 130\n%q", r.Code, r.Stdout)
		}
		s := r.Stdout
		if !strings.Contains(s, "\r\x1b[2K") {
			t.Fatalf("the status line is never erased in place: %q", s)
		}
		if strings.Contains(s, "sperli: status: ") {
			t.Errorf("on a terminal the status line is drawn in place, not as lines: %q", s)
		}
		// Every other line starts at the start of a line: after a line end
		// or the status line's erasure.
		for _, want := range []string{"[rank 1] rank 1 got it\r\n", "sperli: interrupt: ending every rank\r\n"} {
			i := strings.Index(s, want)
			if i < 0 {
				t.Errorf("the terminal shows no %q: %q", want, s)
				continue
			}
			if before := s[:i]; !strings.HasSuffix(before, "\n") && !strings.HasSuffix(before, "\r\x1b[2K") && before != "" {
				t.Errorf("%q is written after %q, not at the start of a line", want, before[max(0, len(before)-80):])
			}
		}
		// Gone at the end: the last line is followed by nothing, or by
		// the status line and its erasure.
		if !strings.HasSuffix(s, "\n") && !strings.HasSuffix(s, "\r\x1b[2K") {
			t.Errorf("the terminal does not end with a line end (the status line left behind?): %q", s[max(0, len(s)-120):])
		}
	})
}
