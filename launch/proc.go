package launch

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"sperli/job"
	"sperli/record"
)

// rankProc is one started rank: a process of this machine, or a rank that
// its host's agent runs (remote, sess set). The rest of the launcher sees
// both alike: streams, a control channel (stdin), an end (ended, state).
type rankProc struct {
	rank   int
	host   string
	remote bool     // on another host, through its session
	sess   *session // remote: its host's ssh session
	cmd    *exec.Cmd
	pid    atomic.Int64   // its process id (on its host), 0 until known
	stdin  io.WriteCloser // its control channel
	stdout *stream
	stderr *stream
	ended  chan struct{}
	state  *exitState
	status *record.Status
	// gone is, for a remote rank whose session ended before the rank's own
	// end was heard, why (ssh's words): the rank is lost.
	gone   string
	killed bool       // by stopAll: its end is no loss
	trace  *traceProc // --trace: its track

	endOnce sync.Once
}

// exitState is how a rank's process ended: its wait status, from this
// machine's wait or from its host agent's exit frame.
type exitState struct{ ws syscall.WaitStatus }

// Success reports whether the process exited with status 0.
func (e *exitState) Success() bool { return e.ws.Exited() && e.ws.ExitStatus() == 0 }

// ExitCode returns the exit status, or -1 for a process ended by a signal.
func (e *exitState) ExitCode() int {
	if !e.ws.Exited() {
		return -1
	}
	return e.ws.ExitStatus()
}

// Sys returns the syscall.WaitStatus, as os.ProcessState's Sys does.
func (e *exitState) Sys() any { return e.ws }

func exitOf(st *os.ProcessState) *exitState {
	ws, _ := st.Sys().(syscall.WaitStatus)
	return &exitState{ws}
}

// procID returns the rank's process id on its host, 0 when not known.
func (p *rankProc) procID() int { return int(p.pid.Load()) }

// end records how the rank ended, once: its streams end, its status
// record is read, ended is closed.
func (p *rankProc) end(st *exitState, gone string) {
	p.endOnce.Do(func() {
		p.state, p.gone = st, gone
		p.stdout.close()
		p.stderr.close()
		p.status = p.stderr.status
		close(p.ended)
	})
}

// kill ends the rank's process group: here by SIGKILL, on another host
// by a kill frame to its agent.
func (p *rankProc) kill() {
	if p.sess != nil {
		p.sess.kill(p)
		return
	}
	if pid := p.procID(); pid > 0 {
		syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// newProc makes slot r's rankProc of incarnation inc before it starts: its
// streams (and --output-dir's generation lines) and its trace track, in
// slot order, so that tracks are numbered alike in every run.
func (l *launcher) newProc(r int, host string, remote bool, inc uint32) *rankProc {
	p := &rankProc{rank: r, host: host, remote: remote, ended: make(chan struct{})}
	first := role{int(inc), r}
	if r >= l.o.N {
		first.rank = -1 // a spare
	}
	roles := newSlotRoles(first.gen, first.rank)
	var fo, fe *os.File
	if l.files != nil {
		fo, fe = l.files[r][0], l.files[r][1]
		fmt.Fprintf(fo, "--- generation %d%s\n", inc, l.out.fileLabel(r, first))
		fmt.Fprintf(fe, "--- generation %d%s\n", inc, l.out.fileLabel(r, first))
	}
	p.stdout = newStream(l.out, r, false, inc, fo, roles)
	p.stderr = newStream(l.out, r, true, inc, fe, roles)
	if l.out.trace != nil {
		p.trace = l.out.trace.proc(inc, r, trackName(l.out.slots, r, roles.all(), host, inc), remote)
		spares := l.out.slots
		// Named when the file is written, by every role the slot served.
		p.trace.title = func() string { return trackName(spares, r, roles.all(), host, inc) }
		p.stderr.tp = p.trace
	}
	return p
}

// spawn starts p's process with argv and env: a local rank by fork and
// exec in wdir with its listening socket ln as descriptor 3, a remote one
// by a start frame to its host's agent. The rank waits for its description
// (describe) on its standard input.
func (l *launcher) spawn(p *rankProc, argv, env []string, wdir string, ln *os.File) error {
	if p.remote {
		// A session that broke is said when its reader sees it end: its
		// ranks are lost, with ssh's words, not failed to start.
		p.sess.start(p, argv, env)
		return nil
	}
	return l.startLocal(p, argv, env, wdir, ln)
}

// describe gives the started rank p its description j: the first line of
// its standard input, which stays open as its control channel.
func (l *launcher) describe(p *rankProc, j *job.Job) {
	p.stdout.setKey(record.Key(j.Key))
	p.stderr.setKey(record.Key(j.Key))
	if !p.remote {
		j.ListenFD = 3
	}
	// An error is a rank that died at once; its end is seen by wait.
	_, _ = p.stdin.Write(append(j.Encode(), '\n'))
	if p.trace != nil && p.remote {
		go p.trace.probe(p.stdin, p.ended)
	}
}

// startLocal forks and execs p on this machine, in its own process group,
// SIGKILLed if the launcher dies, its standard input a pipe kept open.
func (l *launcher) startLocal(p *rankProc, argv, env []string, wdir string, ln *os.File) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.ExtraFiles = []*os.File{ln}
	cmd.Dir = wdir
	cmd.Env = append(l.environ(), oneProcessor(env, l.environ(), machineCPUs())...)
	cmd.Stdout = p.stdout
	cmd.Stderr = p.stderr
	cmd.WaitDelay = 5 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return fmt.Errorf("rank %d: %v", p.rank, err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("rank %d on %s: cannot start %s: %v", p.rank, p.host, argv[0], err)
	}
	p.cmd, p.stdin = cmd, stdin
	p.pid.Store(int64(cmd.Process.Pid))
	if p.trace != nil {
		p.trace.started = time.Now()
	}
	go func() {
		cmd.Wait()
		p.end(exitOf(cmd.ProcessState), "")
	}()
	return nil
}

// environ is the launcher's environment, read once per launch: every
// local rank's begins with it.
func (l *launcher) environ() []string {
	l.envOnce.Do(func() { l.env = os.Environ() })
	return l.env
}

// startParallel bounds the ranks started, or described, at once: a start
// is a fork and exec (or a frame to a host's agent), a description a
// signature of the rank's certificate and token (CPU) and a write that
// waits for the rank to read once the line is longer than a pipe holds.
func startParallel(n int) int {
	return max(1, min(n, max(4, 4*runtime.GOMAXPROCS(0)), 32))
}

// eachRank calls fn for every rank of procs, startParallel(len(procs)) at
// a time, and returns each rank's error. After the first error it calls
// fn no more: the ranks left have errNotStarted.
func eachRank(procs []*rankProc, fn func(p *rankProc) error) []error {
	todo := make(chan *rankProc)
	errs := make([]error, len(procs))
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range startParallel(len(procs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range todo {
				if failed.Load() {
					errs[p.rank] = errNotStarted
				} else if err := fn(p); err != nil {
					errs[p.rank] = err
					failed.Store(true)
				}
			}
		}()
	}
	for _, p := range procs {
		todo <- p
	}
	close(todo)
	wg.Wait()
	return errs
}

var errNotStarted = errors.New("not started: an earlier rank failed to start")

// firstErr returns the error of the lowest rank that is not errNotStarted.
func firstErr(errs []error) error {
	for _, err := range errs {
		if err != nil && err != errNotStarted {
			return err
		}
	}
	return nil
}

// awaitEnds waits, at most d, for every started rank of procs to end
// (after stopAll: they were killed).
func awaitEnds(procs []*rankProc, d time.Duration) {
	deadline := time.After(d)
	for _, p := range procs {
		if p == nil {
			continue
		}
		select {
		case <-p.ended:
		case <-deadline:
			return
		}
	}
}
