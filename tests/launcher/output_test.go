package launcher

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"sperli/tests/internal/testbin"
)

// counter counts what it is given and checks that every line begins with
// a rank prefix, without keeping the bytes.
type counter struct {
	mu      sync.Mutex
	bytes   int64
	lines   int64
	bad     string // the start of the first line without a prefix
	atStart bool
	head    []byte
	// at, once the counter has seen that many lines, is called before
	// Write returns: the writer is still blocked in its write then.
	at     int64
	onLine func()
}

var rankPrefix = regexp.MustCompile(`^\[rank \d+\] `)

func newCounter() *counter { return &counter{atStart: true} }

func (c *counter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bytes += int64(len(p))
	for _, b := range p {
		if c.atStart {
			c.head = append(c.head, b)
			if b == '\n' || bytes.HasSuffix(c.head, []byte("] ")) || len(c.head) >= 16 {
				if !rankPrefix.Match(c.head) && c.bad == "" {
					c.bad = string(c.head)
				}
				c.atStart, c.head = false, c.head[:0]
			}
		}
		if b == '\n' {
			c.lines++
			c.atStart = true
			if c.lines == c.at && c.onLine != nil {
				c.onLine()
			}
		}
	}
	return len(p), nil
}

// TestOutputMemory: ranks that write 500 MB of output (half on stdout,
// half on stderr) keep the launcher's peak resident memory under 100 MB,
// and every line is shown, prefixed. The same for --live.
func TestOutputMemory(t *testing.T) {
	const lineText = "a line of rank output that is seventy-nine bytes long, more or less, 0123456"
	lineLen := int64(len(lineText) + 1)
	for _, tc := range []struct {
		name  string
		flags []string
		mb    int64 // total output in MB
	}{
		{"spooled", nil, 500},
		{"live", []string{"--live"}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			each := tc.mb * 1_000_000 / 4 / lineLen // lines per rank and stream
			prog := writeFile(t, filepath.Join(dir, "loud.sh"), fmt.Sprintf(`#!/bin/sh
yes '%s' | head -n %d
yes '%s' | head -n %d >&2
`, lineText, each, lineText, each), 0o755)
			cmd := exec.Command(sperli, append(append([]string{"run", "-n", "2"}, tc.flags...), prog)...)
			cmd.Dir, cmd.Env = dir, baseEnv
			out, errs := newCounter(), newCounter()
			cmd.Stdout, cmd.Stderr = out, errs
			// The launcher's peak resident memory is its VmHWM, read while
			// it is blocked writing its last line of each stream (rusage's
			// maxrss would also hold this test process's size, recorded
			// when the launcher's exec replaced the memory it shared with
			// it).
			var peakMu sync.Mutex
			var peakKB int64
			var pid int
			sample := func() {
				peakMu.Lock()
				defer peakMu.Unlock()
				if kb := vmHWM(pid); kb > peakKB {
					peakKB = kb
				}
			}
			out.at, out.onLine = 2*each, sample
			errs.at, errs.onLine = 2*each, sample
			peakMu.Lock()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pid = cmd.Process.Pid
			peakMu.Unlock()
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("sperli run -n 2 loud.sh: %v", err)
				}
			case <-time.After(10 * time.Minute):
				testbin.KillTree(cmd.Process.Pid)
				<-done
				t.Fatal("sperli run -n 2 loud.sh did not end within 10 minutes")
			}
			peakMB := peakKB / 1024
			if peakKB == 0 {
				t.Errorf("the launcher's VmHWM was never read")
			}
			t.Logf("%d MB of output: launcher peak RSS %d MB (stdout %d bytes, stderr %d bytes)", tc.mb, peakMB, out.bytes, errs.bytes)
			if peakMB >= 100 {
				t.Errorf("launcher peak RSS %d MB for %d MB of output, want under 100 MB", peakMB, tc.mb)
			}
			wantLines := 2 * each
			if out.lines != wantLines || errs.lines < wantLines {
				t.Errorf("stdout %d lines, stderr %d lines; want %d each", out.lines, errs.lines, wantLines)
			}
			for name, c := range map[string]*counter{"stdout": out, "stderr": errs} {
				if c.bad != "" && !strings.HasPrefix(c.bad, "sperli: note: ") {
					t.Errorf("%s: a line begins %q, not [rank i]", name, c.bad)
				}
			}
			if left, _ := filepath.Glob(filepath.Join(os.TempDir(), "sperli-output-*")); len(left) > 0 {
				t.Errorf("spool files left behind: %q", left)
			}
		})
	}
}

// vmHWM is the peak resident memory of process pid in kB (0 when gone).
func vmHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb
		}
	}
	return 0
}

// TestBigError: a rank that fails with a 20 MiB message is reported as
// failed with its cause (its status record found), not as "no status
// record".
func TestBigError(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "big.star"), `def main():
    if comm.rank == 1:
        fail("x" * (20 << 20) + " the end")
    comm.barrier()
`, 0o644)
	cmd := exec.Command(sperli, "run", "-n", "2", "big.star")
	cmd.Dir, cmd.Env = dir, baseEnv
	r := testbin.Start(t, cmd).Wait(t, timeout)
	if r.Code != 1 {
		t.Errorf("exit status %d, want 1", r.Code)
	}
	tail := r.Stderr[max(0, len(r.Stderr)-4096):]
	if strings.Contains(tail, "no status record") {
		t.Errorf("the launcher lost rank 1's status record: %q", tail)
	}
	last := lines(tail)
	if len(last) == 0 || !regexp.MustCompile(`^sperli: rank 1 failed: big\.star:3:\d+: fail: x+…; rank 0 ended by it \(H1612\)$`).MatchString(last[len(last)-1]) {
		t.Errorf("the launcher's last line does not name rank 1's failure: %q", tail)
	}
}

// TestLiveInTerminal: in a pseudo-terminal (script), --live shows a rank's
// line while the rank still runs; without --live nothing shows before the
// ranks end. The rank waits for a file the test creates only after it has
// seen (or not seen) the line.
func TestLiveInTerminal(t *testing.T) {
	if _, err := exec.LookPath("script"); err != nil {
		t.Fatalf("script (bsdutils on Debian, util-linux elsewhere; .ci/run installs it) is needed for the pseudo-terminal: %v", err)
	}
	for _, live := range []bool{true, false} {
		t.Run(fmt.Sprintf("live=%v", live), func(t *testing.T) {
			dir := t.TempDir()
			gate := filepath.Join(dir, "go")
			prog := writeFile(t, filepath.Join(dir, "waits.sh"), fmt.Sprintf(`#!/bin/sh
echo "first line of $SPERLI_RANK"
touch "printed-$SPERLI_RANK"
i=0
while [ ! -e '%s' ] && [ $i -lt 3000 ]; do sleep 0.02; i=$((i+1)); done
echo "second line of $SPERLI_RANK"
`, gate), 0o755)
			flags := "-n 2"
			if live {
				flags = "--live -n 2"
			}
			cmd := exec.Command("script", "-qfec", fmt.Sprintf("'%s' run %s '%s'", sperli, flags, prog), "/dev/null")
			cmd.Dir, cmd.Env = dir, withEnv("NO_COLOR=1")
			out := &syncBuffer{}
			p := startInto(t, cmd, out)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			seen := func() bool {
				s := out.String()
				return strings.Contains(s, "[rank 0] first line of 0") && strings.Contains(s, "[rank 1] first line of 1")
			}
			if live {
				if !poll(ctx, seen) {
					os.WriteFile(gate, nil, 0o644)
					r := p.Wait(t, timeout)
					t.Fatalf("--live: the first lines did not show while the ranks ran\n%v", r)
				}
				if s := out.String(); strings.Contains(s, "second line") {
					t.Errorf("a second line shows before the gate opened: %q", s)
				}
			} else {
				// Once both ranks have printed their first line (their
				// marker files), the terminal still shows nothing.
				printed := func() bool { return exists(filepath.Join(dir, "printed-0")) && exists(filepath.Join(dir, "printed-1")) }
				if !poll(ctx, printed) {
					os.WriteFile(gate, nil, 0o644)
					t.Fatalf("the ranks did not print their first line\n%v", p.Wait(t, timeout))
				}
				if seen() {
					t.Errorf("without --live a line showed before the ranks ended: %q", out.String())
				}
			}
			if err := os.WriteFile(gate, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			r := p.Wait(t, timeout)
			if r.Code != 0 {
				t.Errorf("exit status %d\n%v", r.Code, r)
			}
			for rank := 0; rank < 2; rank++ {
				for _, w := range []string{"first", "second"} {
					if want := fmt.Sprintf("[rank %d] %s line of %d\r\n", rank, w, rank); !strings.Contains(r.Stdout, want) {
						t.Errorf("the terminal shows no %q\n%q", want, r.Stdout)
					}
				}
			}
		})
	}
}

// TestOutputDir: --output-dir writes DIR/rank-i.out and rank-i.err
// (nothing on the terminal), each generation after a "--- generation g"
// line; a later job overwrites them, or appends with --output-mode append;
// after a restart, the abandoned generation is marked in the files. And
// without --output-dir the abandoned generation's output is marked.
func TestOutputDir(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "gens.star"), `def main():
    comm.use_checkpoints()
    state = comm.resume()
    print("out gen %d rank %d" % (comm.incarnation, comm.rank))
    comm.checkpoint("one")
    comm.barrier()
    print("done gen %d rank %d" % (comm.incarnation, comm.rank))
`, 0o644)
	hostsFile := writeFile(t, filepath.Join(dir, "hosts"), "127.0.0.1\n127.0.0.2\n127.0.0.3\n", 0o644)
	env := withEnv("SPERLI_TEST_FAILURE_SCHEDULE=0:1")
	r := sperliRun(t, env, dir, "run", "-n", "2", "--hosts", hostsFile, "--silence", "1000", "--checkpoint-dir", "ck", "--output-dir", "out", "gens.star")
	if r.Code != 0 {
		t.Fatalf("exit status %d, want 0 (one restart)\n%v", r.Code, r)
	}
	if r.Stdout != "" {
		t.Errorf("stdout %q, want nothing with --output-dir", r.Stdout)
	}
	for _, l := range lines(r.Stderr) {
		if !strings.HasPrefix(l, "sperli: ") {
			t.Errorf("stderr line %q with --output-dir: want only the launcher's lines", l)
		}
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, "out", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	want0 := "--- generation 0\nout gen 0 rank 0\n--- generation 0 abandoned\n--- generation 1\nout gen 1 rank 0\ndone gen 1 rank 0\n"
	if got := read("rank-0.out"); got != want0 {
		t.Errorf("rank-0.out:\n%s\nwant:\n%s", got, want0)
	}
	if got := read("rank-1.err"); !strings.HasPrefix(got, "--- generation 0\n") || !strings.Contains(got, "--- generation 0 abandoned\n--- generation 1\n") {
		t.Errorf("rank-1.err:\n%s\nwant generation 0, its abandonment, generation 1", got)
	}

	// A second job overwrites (as mpirun's --output-filename), a third
	// with --output-mode append appends.
	r = sperliRun(t, baseEnv, dir, "run", "-n", "2", "--checkpoint-dir", "ck2", "--output-dir", "out", "gens.star")
	if r.Code != 0 {
		t.Fatalf("second run: %v", r)
	}
	want2 := "--- generation 0\nout gen 0 rank 0\ndone gen 0 rank 0\n"
	if got := read("rank-0.out"); got != want2 {
		t.Errorf("rank-0.out after a second job:\n%s\nwant:\n%s", got, want2)
	}
	if got := read("rank-1.err"); got != "--- generation 0\n" {
		t.Errorf("rank-1.err after a second job: %q, want only its generation line", got)
	}
	r = sperliRun(t, baseEnv, dir, "run", "-n", "2", "--checkpoint-dir", "ck2b", "--output-dir", "out", "--output-mode", "append", "gens.star")
	if r.Code != 0 {
		t.Fatalf("third run: %v", r)
	}
	if got := read("rank-0.out"); got != want2+want2 {
		t.Errorf("rank-0.out after a third job, appending:\n%s\nwant:\n%s", got, want2+want2)
	}

	// A symlink planted in the directory receives nothing.
	target := filepath.Join(dir, "target")
	writeFile(t, target, "", 0o644)
	os.Remove(filepath.Join(dir, "out2"))
	os.Mkdir(filepath.Join(dir, "out2"), 0o755)
	if err := os.Symlink(target, filepath.Join(dir, "out2", "rank-0.out")); err != nil {
		t.Fatal(err)
	}
	r = sperliRun(t, baseEnv, dir, "run", "-n", "2", "--checkpoint-dir", "ck3", "--output-dir", "out2", "gens.star")
	if r.Code != 2 {
		t.Errorf("--output-dir with a planted symlink: exit status %d, want 2\n%v", r.Code, r)
	}
	if b, _ := os.ReadFile(target); len(b) != 0 {
		t.Errorf("the symlink's target received %q", b)
	}

	// Without --output-dir: the abandoned generation's lines come under
	// a mark, then the next generation's under its own.
	os.RemoveAll(filepath.Join(dir, "ck"))
	r = sperliRun(t, env, dir, "run", "-n", "2", "--hosts", hostsFile, "--silence", "1000", "--checkpoint-dir", "ck", "gens.star")
	if r.Code != 0 {
		t.Fatalf("exit status %d, want 0 (one restart)\n%v", r.Code, r)
	}
	want := regexp.MustCompile(`^--- generation 0 \(abandoned\) ---\n\[rank 0\] out gen 0 rank 0\n(\[rank 1\] out gen 0 rank 1\n)?--- generation 1 ---\n\[rank 0\] out gen 1 rank 0\n\[rank 0\] done gen 1 rank 0\n\[rank 1\] out gen 1 rank 1\n\[rank 1\] done gen 1 rank 1\n$`)
	if !want.MatchString(r.Stdout) {
		t.Errorf("stdout:\n%s\nwant it to match %v", r.Stdout, want)
	}
}

// TestHandStartedNoRecord: a rank started by hand whose job description
// cannot be read prints its error (H1615) and never the launcher's status
// record or error markers on its terminal; started by the launcher (its
// environment says so) it writes both for the launcher.
func TestHandStartedNoRecord(t *testing.T) {
	dir := t.TempDir()
	prog := writeFile(t, filepath.Join(dir, "p.star"), "print('ran')\n", 0o644)
	for _, tc := range []struct {
		name   string
		args   []string
		env    []string
		record bool
	}{
		{"sperli rank by hand", []string{sperli, "rank", prog}, baseEnv, false},
		{"go rank by hand", []string{echo}, baseEnv, false},
		{"sperli rank by the launcher", []string{sperli, "rank", prog}, withEnv("SPERLI_LAUNCHED=1"), true},
		{"go rank by the launcher", []string{echo}, withEnv("SPERLI_LAUNCHED=1"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(tc.args[0], tc.args[1:]...)
			cmd.Dir, cmd.Env = dir, tc.env
			cmd.Stdin = strings.NewReader("{not a job description\n")
			r := testbin.Start(t, cmd).Wait(t, timeout)
			if r.Code != 1 {
				t.Errorf("exit status %d, want 1\n%v", r.Code, r)
			}
			if !strings.Contains(r.Stderr, "H1615") {
				t.Errorf("stderr %q does not say H1615", r.Stderr)
			}
			if got := strings.Contains(r.Stderr, "\x1esperli-status "); got != tc.record {
				t.Errorf("status record written: %v, want %v\n%q", got, tc.record, r.Stderr)
			}
			if !tc.record && strings.Contains(r.Stderr, "\x1e") {
				t.Errorf("a hand-started rank wrote a launcher marker: %q", r.Stderr)
			}
		})
	}
}

// syncBuffer is a buffer a test may read while a process writes it.
type syncBuffer = testbin.SyncBuffer

// syncProc is a process whose standard output goes to a syncBuffer.
type syncProc struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

// startInto starts cmd with its standard output (and error) in out; the
// process and everything it started are killed when the test ends, if
// still running.
func startInto(t *testing.T, cmd *exec.Cmd, out *syncBuffer) *syncProc {
	t.Helper()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &syncProc{cmd: cmd, out: out, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			testbin.KillTree(cmd.Process.Pid)
			<-p.done
		}
	})
	return p
}

// Wait waits at most d for the process to end, else kills it and fails.
func (p *syncProc) Wait(t *testing.T, d time.Duration) result {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		testbin.KillTree(p.cmd.Process.Pid)
		<-p.done
		t.Fatalf("%q did not end within %v\n%s", p.cmd.Args, d, p.out.String())
	}
	return result{Code: p.cmd.ProcessState.ExitCode(), Stdout: p.out.String()}
}
