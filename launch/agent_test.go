package launch

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// testAgentRun is the host agent (Agent) in this process, over pipes: the
// test is its launcher.
type testAgentRun struct {
	t      *testing.T
	in     *io.PipeWriter
	frames chan muxFrame // what the agent sent, hello aside
	done   chan struct{} // Agent returned exit
	exit   int
	later  []muxFrame // read, and left for a later look (find)
	mu     sync.Mutex
	errs   bytes.Buffer
}

func (a *testAgentRun) Write(p []byte) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.errs.Write(p)
}

func (a *testAgentRun) said() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.errs.String()
}

// startTestAgent starts the agent and reads its hello; with hello it
// sends the launcher's.
func startTestAgent(t *testing.T, hello bool) *testAgentRun {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	a := &testAgentRun{t: t, in: inW, frames: make(chan muxFrame, 1024), done: make(chan struct{})}
	go func() {
		a.exit = Agent(inR, outW, a)
		outW.Close()
		close(a.done)
	}()
	go func() {
		defer close(a.frames)
		r := newMuxReader(outR, muxFromAgent)
		for {
			f, err := r.next()
			if err != nil {
				return
			}
			f.Payload = append([]byte(nil), f.Payload...)
			a.frames <- f
		}
	}()
	if f := a.next(); f.Type != muxHello {
		t.Fatalf("the agent's first frame is %v, want its hello", f.Type)
	}
	if hello {
		a.send(muxFrame{Type: muxHello, Payload: []byte(muxHelloText)})
	}
	t.Cleanup(func() {
		a.in.Close()
		a.wait()
	})
	return a
}

// wait waits for the agent to end and returns its exit status.
func (a *testAgentRun) wait() int {
	a.t.Helper()
	select {
	case <-a.done:
		return a.exit
	case <-time.After(10 * time.Second):
		a.t.Fatal("the agent did not end")
	}
	return -1
}

func (a *testAgentRun) send(f muxFrame) {
	a.in.Write(appendMuxFrame(nil, f))
}

func (a *testAgentRun) start(slot uint32, script string) {
	a.send(muxFrame{Type: muxStart, Slot: slot, Payload: appendMuxStart(nil, []string{"/bin/sh", "-c", script}, []string{"TEST_SLOT=x"})})
}

// next returns the agent's next frame.
func (a *testAgentRun) next() muxFrame {
	a.t.Helper()
	select {
	case f, ok := <-a.frames:
		if !ok {
			a.t.Fatalf("the agent's frames ended; it said %q", a.said())
		}
		return f
	case <-time.After(20 * time.Second):
		a.t.Fatalf("no frame from the agent within 20 s")
	}
	return muxFrame{}
}

// find returns the first frame the agent sent, read or left before, for
// which match is true; the others stay for later.
func (a *testAgentRun) find(match func(muxFrame) bool) muxFrame {
	a.t.Helper()
	for i, f := range a.later {
		if match(f) {
			a.later = append(a.later[:i], a.later[i+1:]...)
			return f
		}
	}
	for {
		f := a.next()
		if match(f) {
			return f
		}
		a.later = append(a.later, f)
	}
}

// untilExit returns slot's pid, output and error, and end.
func (a *testAgentRun) untilExit(slot uint32) (pid int, out, errs string, ws syscall.WaitStatus) {
	a.t.Helper()
	for {
		f := a.find(func(f muxFrame) bool { return f.Slot == slot })
		switch f.Type {
		case muxStarted:
			pid, _ = parseMuxStarted(f.Payload)
		case muxStdout:
			out += string(f.Payload)
		case muxStderr:
			errs += string(f.Payload)
		case muxExit:
			var err error
			if ws, err = parseMuxExit(f.Payload); err != nil {
				a.t.Fatal(err)
			}
			return
		}
	}
}

func (a *testAgentRun) started(slot uint32) int {
	a.t.Helper()
	f := a.find(func(f muxFrame) bool { return f.Slot == slot && f.Type == muxStarted })
	pid, _ := parseMuxStarted(f.Payload)
	return pid
}

// alive reports whether pid runs: a zombie (whose parent, init for an
// orphan, has not yet reaped it) does not.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// waitDead waits at most 5 s for pid to be gone.
func waitDead(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); alive(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("process %d still runs", pid)
		}
	}
}

// TestAgentRank: a rank reads its standard input, writes on both its
// streams and exits 3: the agent says it started, carries its output, and
// says its end after its last output; the environment is the agent's with
// the rank's entries.
func TestAgentRank(t *testing.T) {
	a := startTestAgent(t, true)
	a.start(5, `IFS= read -r l; echo "got $l $TEST_SLOT"; echo oops >&2; exit 3`)
	a.send(muxFrame{Type: muxStdin, Slot: 5, Payload: []byte("hel")})
	a.send(muxFrame{Type: muxStdin, Slot: 5, Payload: []byte("lo\n")})
	pid, out, errs, ws := a.untilExit(5)
	if pid <= 0 || out != "got hello x\n" || errs != "oops\n" || ws.ExitStatus() != 3 || ws.Signaled() {
		t.Errorf("pid %d, stdout %q, stderr %q, end %#x; want a pid, \"got hello x\\n\", \"oops\\n\", exit status 3", pid, out, errs, ws)
	}
	a.in.Close()
	if code := a.wait(); code != 0 || a.said() != "" {
		t.Errorf("the agent ended with %d, saying %q; want 0 and nothing", code, a.said())
	}
}

// TestAgentKill: a kill frame SIGKILLs the rank's process group, its
// children too.
func TestAgentKill(t *testing.T) {
	a := startTestAgent(t, true)
	a.start(0, `sleep 100 & echo $!; wait`)
	pid := a.started(0)
	var child string
	for !strings.HasSuffix(child, "\n") {
		child += string(a.find(func(f muxFrame) bool { return f.Type == muxStdout }).Payload)
	}
	a.send(muxFrame{Type: muxKill, Slot: 0})
	_, _, _, ws := a.untilExit(0)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("end %#x, want SIGKILL", ws)
	}
	waitDead(t, pid)
	var cpid int
	if _, err := fmt.Sscan(child, &cpid); err == nil {
		waitDead(t, cpid)
	}
}

// TestAgentLauncherGone: when its standard input ends (the launcher, or
// its ssh, is gone) the agent kills every rank it runs and ends.
func TestAgentLauncherGone(t *testing.T) {
	a := startTestAgent(t, true)
	a.start(1, `exec sleep 100`)
	a.start(2, `exec sleep 100`)
	p1, p2 := a.started(1), a.started(2)
	a.in.Close()
	if code := a.wait(); code != 0 {
		t.Errorf("the agent ended with %d, want 0; it said %q", code, a.said())
	}
	waitDead(t, p1)
	waitDead(t, p2)
}

// TestAgentCannotStart: a program the agent cannot start is a rank that
// says so on its standard error and exits 127, as a shell would.
func TestAgentCannotStart(t *testing.T) {
	a := startTestAgent(t, true)
	a.send(muxFrame{Type: muxStart, Slot: 3, Payload: appendMuxStart(nil, []string{"/nonexistent/prog", "x"}, nil)})
	pid, _, errs, ws := a.untilExit(3)
	if pid != 0 || ws.ExitStatus() != 127 || errs != "sperli spawn: cannot start /nonexistent/prog: no such file or directory\n" {
		t.Errorf("pid %d, stderr %q, end %#x; want no pid, the reason, exit status 127", pid, errs, ws)
	}
}

// TestAgentRefuses: the agent trusts no frame of the launcher blindly: a
// frame it refuses ends it (exit status 1, the reason on its standard
// error) and kills what it started.
func TestAgentRefuses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hello bool
		bad   []byte
		want  string
	}{
		{"no hello", false, appendMuxFrame(nil, muxFrame{Type: muxStdin, Slot: 0, Payload: []byte("x")}), "mux: stdin frame before the launcher's hello"},
		{"oversized stdin", true, header(muxStdin, 0, muxMaxData+1), "mux: stdin frame of 65537 bytes, want 1 to 65536"},
		{"a slot it did not start", true, appendMuxFrame(nil, muxFrame{Type: muxKill, Slot: 9}), "mux: kill frame for slot 9, which this agent did not start"},
		{"a second start", true, appendMuxFrame(nil, muxFrame{Type: muxStart, Slot: 0, Payload: appendMuxStart(nil, []string{"/bin/true"}, nil)}), "mux: start frame for slot 0, which this agent started already"},
		{"a frame of the agent", true, header(muxExit, 0, 5), "mux: exit frame from the launcher"},
		{"a malformed start", true, appendMuxFrame(nil, muxFrame{Type: muxStart, Slot: 1, Payload: appendMuxStart(nil, []string{"/bin/true"}, []string{"=x"})}), `environment entry 0 "=x" is not NAME=VALUE`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := startTestAgent(t, tc.hello)
			pid := 0
			if tc.hello {
				a.start(0, `exec sleep 100`)
				pid = a.started(0)
			}
			a.in.Write(tc.bad)
			if code := a.wait(); code != 1 || !strings.HasPrefix(a.said(), "sperli spawn: ") || !strings.Contains(a.said(), tc.want) {
				t.Errorf("the agent ended with %d, saying %q; want 1 and %q", code, a.said(), tc.want)
			}
			if pid != 0 {
				waitDead(t, pid)
			}
		})
	}
}
