package launch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"sperli/job"
)

// The host agent: `sperli spawn`, which the launcher runs once per remote
// host over ssh (SPEC §18: one session per host, not one per rank). It
// reads the launcher's frames on its standard input (mux.go), starts each
// rank it is told to start — the same command and environment as a rank
// started over ssh of its own, in its own process group with Pdeathsig,
// in the agent's working directory (the remote home, as ssh would) — and
// carries each rank's standard input, output and error and its end over
// its standard input and output.
//
// The agent trusts no frame blindly: each header is checked before its
// payload is read, a start frame is decoded strictly, and a frame for a
// slot it does not run ends the session. When its standard input ends,
// or a frame is refused, or the launcher can no longer be written to, it
// kills every rank's process group, waits for them and ends: nothing it
// started outlives the session.

// agentParallel bounds the ranks an agent starts at once (fork and exec
// of many ranks of one host).
const agentParallel = 8

// agentReadBuf is the read buffer of each of a rank's output streams: the
// agent holds at most two per rank, whatever the rank writes (a slow
// launcher slows the ranks: their pipes fill, they block).
const agentReadBuf = 16 << 10

// agentStdinQueue bounds the bytes queued for a rank's standard input that
// it has not read yet: the description (job.MaxLine) always fits; control
// lines beyond the bound, to a rank that does not read them, are dropped.
const agentStdinQueue = job.MaxLine + 2*muxMaxData

// agentWaitDelay is how long the agent reads a rank's output after the
// rank ended (a child that kept its pipes), as exec.Cmd.WaitDelay.
const agentWaitDelay = 5 * time.Second

// Agent runs the host agent over in (the launcher's frames) and out (the
// agent's frames), saying its own trouble on errw. It returns the exit
// status: 0 when the launcher ended the session, 1 when a frame was
// refused or the session broke.
func Agent(in io.Reader, out io.Writer, errw io.Writer) int {
	a := &agent{out: out, sem: make(chan struct{}, agentParallel), ranks: map[uint32]*agentRank{}}
	err := a.serve(in)
	a.killAll()
	a.wg.Wait()
	if err != nil {
		fmt.Fprintf(errw, "sperli spawn: %v\n", err)
		return 1
	}
	if werr := a.writeErr(); werr != nil {
		fmt.Fprintf(errw, "sperli spawn: the launcher's end of the session: %v\n", werr)
		return 1
	}
	return 0
}

// agent is one session's agent.
type agent struct {
	out  io.Writer
	wmu  sync.Mutex // one frame at a time on out
	wbuf []byte
	werr error // the first failed write: the launcher is gone

	mu    sync.Mutex
	ranks map[uint32]*agentRank
	wg    sync.WaitGroup // every rank's start and life
	sem   chan struct{}
}

// agentRank is one rank the agent runs.
type agentRank struct {
	slot uint32

	mu      sync.Mutex
	cond    *sync.Cond // queue, closing, ended changed
	queue   [][]byte   // bytes for its standard input, not yet written
	queued  int
	closing bool // close its standard input once queue is written
	dropped int  // bytes not queued: the rank does not read
	proc    *os.Process
	killed  bool // a kill frame came
	ended   bool // its process was waited for
}

// serve reads the launcher's frames until its standard input ends (nil)
// or a frame is refused (the error).
func (a *agent) serve(in io.Reader) error {
	a.send(muxFrame{Type: muxHello, Payload: []byte(muxHelloText)})
	r := newMuxReader(in, muxFromLauncher)
	for first := true; ; first = false {
		f, err := r.next()
		switch {
		case err == io.EOF && !first:
			return nil
		case err == io.EOF:
			return errors.New("the session ended before the launcher's hello")
		case err != nil:
			return fmt.Errorf("reading the launcher's frames: %w", err)
		case first && f.Type != muxHello:
			return muxErr("%v frame before the launcher's hello", f.Type)
		case !first && f.Type == muxHello:
			return muxErr("a second hello")
		case f.Type == muxHello:
			continue
		}
		a.mu.Lock()
		rk := a.ranks[f.Slot]
		a.mu.Unlock()
		if f.Type == muxStart {
			if rk != nil {
				return muxErr("start frame for slot %d, which this agent started already", f.Slot)
			}
			argv, env, err := parseMuxStart(f.Payload)
			if err != nil {
				return err
			}
			rk = &agentRank{slot: f.Slot}
			rk.cond = sync.NewCond(&rk.mu)
			a.mu.Lock()
			a.ranks[f.Slot] = rk
			a.mu.Unlock()
			a.wg.Add(1)
			go a.run(rk, argv, env)
			continue
		}
		if rk == nil {
			return muxErr("%v frame for slot %d, which this agent did not start", f.Type, f.Slot)
		}
		switch f.Type {
		case muxStdin:
			rk.push(append([]byte(nil), f.Payload...))
		case muxClose:
			rk.closeStdin()
		case muxKill:
			rk.kill()
		}
	}
}

// send writes one frame; after a failed write it writes nothing more and
// kills every rank (the launcher cannot hear them).
func (a *agent) send(f muxFrame) {
	a.wmu.Lock()
	if a.werr != nil {
		a.wmu.Unlock()
		return
	}
	a.wbuf = appendMuxFrame(a.wbuf[:0], f)
	_, err := a.out.Write(a.wbuf)
	if cap(a.wbuf) > 2*muxMaxData {
		a.wbuf = nil
	}
	a.werr = err
	a.wmu.Unlock()
	if err != nil {
		a.killAll()
	}
}

func (a *agent) writeErr() error {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	return a.werr
}

// killAll kills the process group of every rank that runs, and of every
// rank started from now on.
func (a *agent) killAll() {
	a.mu.Lock()
	ranks := make([]*agentRank, 0, len(a.ranks))
	for _, rk := range a.ranks {
		ranks = append(ranks, rk)
	}
	a.mu.Unlock()
	for _, rk := range ranks {
		rk.kill()
	}
}

// run starts rk's process (at most agentParallel at once), carries its
// output and says its end, after its last output.
func (a *agent) run(rk *agentRank, argv, env []string) {
	defer a.wg.Done()
	a.sem <- struct{}{}
	rk.mu.Lock()
	killed := rk.killed
	rk.mu.Unlock()
	if killed {
		// Killed before it started (the launcher ends the job): it never runs.
		<-a.sem
		rk.end()
		a.send(muxFrame{Type: muxExit, Slot: rk.slot, Payload: appendMuxExit(nil, syscall.WaitStatus(syscall.SIGKILL))})
		return
	}
	cmd, stdin, outs, err := startAgentRank(argv, env)
	<-a.sem
	if err != nil {
		rk.end()
		a.send(muxFrame{Type: muxStderr, Slot: rk.slot, Payload: fmt.Appendf(nil, "sperli spawn: cannot start %s: %v\n", argv[0], unwrapPath(err))})
		// As env(1) and a shell say a command they cannot run.
		a.send(muxFrame{Type: muxExit, Slot: rk.slot, Payload: appendMuxExit(nil, syscall.WaitStatus(127<<8))})
		return
	}
	a.send(muxFrame{Type: muxStarted, Slot: rk.slot, Payload: binary.BigEndian.AppendUint32(nil, uint32(cmd.Process.Pid))})
	rk.started(cmd.Process)
	go rk.feed(stdin)
	var pumps sync.WaitGroup
	for i, t := range []muxType{muxStdout, muxStderr} {
		pumps.Add(1)
		go func() { defer pumps.Done(); a.pump(rk.slot, t, outs[i]) }()
	}
	// The end is seen before the process is reaped, so that no kill
	// frame signals a process group whose id was given to another.
	var info unix.Siginfo
	for unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
	}
	rk.end()
	st, werr := cmd.Process.Wait()
	done := make(chan struct{})
	go func() { pumps.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(agentWaitDelay):
		outs[0].Close()
		outs[1].Close()
		<-done
	}
	ws := syscall.WaitStatus(255 << 8)
	if werr == nil {
		ws, _ = st.Sys().(syscall.WaitStatus)
	}
	a.send(muxFrame{Type: muxExit, Slot: rk.slot, Payload: appendMuxExit(nil, ws)})
}

// startAgentRank starts argv with the agent's environment and env, in its
// own process group, SIGKILLed if the agent dies; it returns the write
// end of its standard input and the read ends of its output and error.
func startAgentRank(argv, env []string) (*exec.Cmd, *os.File, [2]*os.File, error) {
	var outs [2]*os.File
	cmd := exec.Command(argv[0], argv[1:]...)
	inherited := os.Environ()
	cmd.Env = append(inherited, oneProcessor(env, inherited, machineCPUs())...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var child []*os.File
	defer func() {
		for _, f := range child {
			f.Close()
		}
	}()
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, nil, outs, err
	}
	child = append(child, inR)
	for i := range outs {
		r, w, err := os.Pipe()
		if err != nil {
			inW.Close()
			closeFiles(outs[:])
			return nil, nil, outs, err
		}
		outs[i] = r
		child = append(child, w)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, child[1], child[2]
	if err := cmd.Start(); err != nil {
		inW.Close()
		closeFiles(outs[:])
		return nil, nil, outs, err
	}
	return cmd, inW, outs, nil
}

// pump sends what r gives as frames of type t until r ends.
func (a *agent) pump(slot uint32, t muxType, r *os.File) {
	defer r.Close()
	buf := make([]byte, agentReadBuf)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			a.send(muxFrame{Type: t, Slot: slot, Payload: buf[:n]})
		}
		if err != nil {
			return
		}
	}
}

// push queues b for the rank's standard input; beyond agentStdinQueue
// unread bytes it is dropped (a rank that does not read its control
// channel does not answer it either).
func (rk *agentRank) push(b []byte) {
	rk.mu.Lock()
	defer rk.mu.Unlock()
	switch {
	case rk.closing || rk.ended:
	case rk.queued+len(b) > agentStdinQueue:
		rk.dropped += len(b)
	default:
		rk.queue = append(rk.queue, b)
		rk.queued += len(b)
		rk.cond.Signal()
	}
}

// feed writes the queue to the rank's standard input w, and closes w when
// the launcher closed it or the rank ended.
func (rk *agentRank) feed(w *os.File) {
	defer w.Close()
	for {
		rk.mu.Lock()
		for len(rk.queue) == 0 && !rk.closing && !rk.ended {
			rk.cond.Wait()
		}
		if len(rk.queue) == 0 || rk.ended {
			rk.mu.Unlock()
			return
		}
		b := rk.queue[0]
		rk.queue[0] = nil
		rk.queue = rk.queue[1:]
		rk.queued -= len(b)
		rk.mu.Unlock()
		if _, err := w.Write(b); err != nil {
			return // the rank closed its standard input, or ended
		}
	}
}

func (rk *agentRank) closeStdin() {
	rk.mu.Lock()
	rk.closing = true
	rk.cond.Signal()
	rk.mu.Unlock()
}

func (rk *agentRank) started(p *os.Process) {
	rk.mu.Lock()
	rk.proc = p
	killed := rk.killed
	rk.mu.Unlock()
	if killed {
		syscall.Kill(-p.Pid, syscall.SIGKILL)
	}
}

// kill SIGKILLs the rank's process group, now or as soon as it starts.
func (rk *agentRank) kill() {
	rk.mu.Lock()
	defer rk.mu.Unlock()
	rk.killed = true
	if rk.proc != nil && !rk.ended {
		syscall.Kill(-rk.proc.Pid, syscall.SIGKILL)
	}
}

// end notes that the rank's process was waited for: its group is not
// signalled any more, its standard input is closed.
func (rk *agentRank) end() {
	rk.mu.Lock()
	rk.ended = true
	rk.queue, rk.queued = nil, 0
	rk.cond.Signal()
	rk.mu.Unlock()
}
