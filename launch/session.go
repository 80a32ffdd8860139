package launch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// session is the launcher's end of one remote host's ssh session, which
// runs that host's agent (`ssh HOST SPERLI spawn`, agent.go): every rank
// of the host is started, fed and heard through it (SPEC §18), and shows
// itself to the rest of the launcher as a rankProc like a local one. One
// goroutine reads the agent's frames (read); writes go out one frame at a
// time under wmu. When the session ends before a rank's own end was heard
// — ssh failed, the connection broke, the agent was killed or sent a
// frame the launcher refuses — every such rank of the host ends as lost,
// with ssh's last words (rankProc.gone).
type session struct {
	host  string // as the host list names it
	want  int    // the ranks it runs in this incarnation
	cmd   *exec.Cmd
	in    io.WriteCloser // ssh's standard input
	stder tailLine       // ssh's standard error (ssh's and the agent's own words)
	gens  *generations   // told when a rank's pid comes

	wmu    sync.Mutex
	wbuf   []byte
	closed bool // the input is closed: nothing more is sent

	mu     sync.Mutex
	procs  map[uint32]*rankProc
	nEnded int
	exited bool // ssh has ended (not yet reaped, maybe): it is not signalled
	dead   bool // the session ended: ranks registered from now on end at once
	why    string
	timer  *time.Timer // stop's kill of ssh
	done   chan struct{}
}

// sessionGrace is how long a session has to end by itself once its input
// is closed after the incarnation (its agent ends) before ssh is killed;
// stopGrace the same when the launcher ends the job: the agent kills its
// ranks at once, and a killed ssh ends them too (the agent sees its input
// end), so it only waits to hear their ends.
const (
	sessionGrace = 3 * time.Second
	stopGrace    = time.Second
)

var errSessionClosed = errors.New("the host's session is closed")

// openSession starts the ssh session to host for want ranks, rank being
// the first of them (an error names it).
func (l *launcher) openSession(host string, rank, want int) (*session, error) {
	argv := sshArgv(l.o.SSHPort, host, []string{l.o.Self, "spawn"})
	s := &session{host: host, want: want, gens: &l.gens, procs: map[uint32]*rankProc{}, done: make(chan struct{})}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = &s.stder
	cmd.WaitDelay = 5 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("rank %d on %s: %v", rank, host, err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("rank %d on %s: %v", rank, host, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("rank %d on %s: cannot start %s: %v", rank, host, argv[0], err)
	}
	s.cmd, s.in = cmd, in
	s.send(muxFrame{Type: muxHello, Payload: []byte(muxHelloText)})
	go s.read(out)
	return s, nil
}

// send writes one frame to the agent.
func (s *session) send(f muxFrame) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return errSessionClosed
	}
	s.wbuf = appendMuxFrame(s.wbuf[:0], f)
	_, err := s.in.Write(s.wbuf)
	if cap(s.wbuf) > 2*muxMaxData {
		s.wbuf = nil
	}
	return err
}

// start has the agent start p with argv and env. A session that has
// ended ends p at once, lost as the others of its host.
func (s *session) start(p *rankProc, argv, env []string) {
	p.stdin = &remoteStdin{s: s, p: p}
	if p.trace != nil {
		p.trace.started = time.Now()
	}
	s.mu.Lock()
	s.procs[uint32(p.rank)] = p
	dead, why := s.dead, s.why
	s.mu.Unlock()
	if dead {
		p.end(&exitState{255 << 8}, why)
		return
	}
	s.send(muxFrame{Type: muxStart, Slot: uint32(p.rank), Payload: appendMuxStart(nil, argv, env)})
}

// kill has the agent kill p's process group.
func (s *session) kill(p *rankProc) {
	s.send(muxFrame{Type: muxKill, Slot: uint32(p.rank)})
}

// closeInput closes ssh's standard input: the agent kills what it still
// runs and ends.
func (s *session) closeInput() {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if !s.closed {
		s.closed = true
		s.in.Close()
	}
}

// stop ends the session (the launcher ends the job): its input closes,
// and ssh is killed if it has not ended after stopGrace.
func (s *session) stop() {
	go s.closeInput() // a write may hang on a stuck connection: the kill ends it
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer == nil && !s.exited {
		s.timer = time.AfterFunc(stopGrace, s.killSSH)
	}
}

// killSSH kills ssh's process group, unless ssh has ended already.
func (s *session) killSSH() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.exited {
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// end waits for the session to end after the incarnation, closing its
// input and, after sessionGrace, killing ssh.
func (s *session) end() {
	go s.closeInput()
	select {
	case <-s.done:
		return
	case <-time.After(sessionGrace):
	}
	s.killSSH()
	<-s.done
}

// read reads the agent's frames until the session ends, then ends every
// rank of it whose end it did not hear.
func (s *session) read(out io.Reader) {
	err := s.serve(out)
	var why string
	if err != nil {
		// A session the launcher cannot read any more is of no use.
		why = fmt.Sprintf("ssh to %s: %v", s.host, err)
		s.killSSH()
	}
	var info unix.Siginfo
	for unix.Waitid(unix.P_PID, s.cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
	}
	s.mu.Lock()
	s.exited = true
	if s.timer != nil {
		s.timer.Stop()
	}
	s.mu.Unlock()
	s.cmd.Wait()
	if why == "" {
		why = s.endWhy()
	}
	s.mu.Lock()
	s.dead, s.why = true, why
	var left []*rankProc
	for _, p := range s.procs {
		left = append(left, p)
	}
	s.mu.Unlock()
	for _, p := range left {
		p.end(&exitState{255 << 8}, why)
	}
	s.closeInput()
	close(s.done)
}

// endWhy says why ssh ended, for the ranks whose end it did not carry.
func (s *session) endWhy() string {
	st := s.cmd.ProcessState
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Sprintf("ssh to %s was %s before the rank's status record", s.host, signalWhy(ws))
	}
	last := s.stder.String()
	if last == "" {
		return fmt.Sprintf("ssh to %s ended with exit status %d before the rank's status record, with no message (the host's agent was killed, or the connection broke)", s.host, st.ExitCode())
	}
	return fmt.Sprintf("ssh to %s ended with exit status %d before the rank's status record: %s", s.host, st.ExitCode(), last)
}

// serve reads the agent's frames: nil at the end of the stream between
// frames, else why the launcher stopped reading.
func (s *session) serve(out io.Reader) error {
	r := newMuxReader(out, muxFromAgent)
	f, err := r.next()
	switch {
	case err == io.EOF:
		return nil // ssh ended first: its status and words say why
	case errors.Is(err, errMux) || err == nil && f.Type != muxHello:
		return fmt.Errorf("the remote command did not answer as a sperli agent: its first bytes are %q (a login shell that prints something, or another sperli at this path?)", r.hdr[:])
	case err != nil:
		return err
	}
	for {
		f, err := r.next()
		switch {
		case err == io.EOF:
			return nil
		case err != nil:
			return fmt.Errorf("the launcher refuses the agent's frames: %w", err)
		case f.Type == muxHello:
			return fmt.Errorf("the launcher refuses the agent's frames: %w", muxErr("a second hello"))
		}
		s.mu.Lock()
		p := s.procs[f.Slot]
		s.mu.Unlock()
		switch {
		case p == nil:
			return fmt.Errorf("the launcher refuses the agent's frames: %w", muxErr("%v frame for slot %d, which does not run on %s", f.Type, f.Slot, s.host))
		case isEnded(p):
			return fmt.Errorf("the launcher refuses the agent's frames: %w", muxErr("%v frame for slot %d after its exit", f.Type, f.Slot))
		}
		switch f.Type {
		case muxStarted:
			pid, err := parseMuxStarted(f.Payload)
			if err == nil && p.procID() != 0 {
				err = muxErr("a second started frame for slot %d", f.Slot)
			}
			if err != nil {
				return fmt.Errorf("the launcher refuses the agent's frames: %w", err)
			}
			p.pid.Store(int64(pid))
			s.gens.pidKnown()
		case muxStdout:
			p.stdout.Write(f.Payload)
		case muxStderr:
			p.stderr.Write(f.Payload)
		case muxExit:
			ws, err := parseMuxExit(f.Payload)
			if err != nil {
				return fmt.Errorf("the launcher refuses the agent's frames: %w", err)
			}
			p.end(&exitState{ws}, "")
			s.mu.Lock()
			s.nEnded++
			all := s.nEnded == s.want
			s.mu.Unlock()
			if all {
				go s.closeInput() // the agent ends, and so does ssh
			}
		}
	}
}

// remoteStdin is a remote rank's control channel: stdin frames.
type remoteStdin struct {
	s      *session
	p      *rankProc
	closed atomic.Bool
}

func (w *remoteStdin) Write(b []byte) (int, error) {
	if w.closed.Load() || isEnded(w.p) {
		return 0, os.ErrClosed
	}
	n := 0
	for len(b) > 0 {
		c := b[:min(len(b), muxMaxData)]
		if err := w.s.send(muxFrame{Type: muxStdin, Slot: uint32(w.p.rank), Payload: c}); err != nil {
			return n, err
		}
		n, b = n+len(c), b[len(c):]
	}
	return n, nil
}

func (w *remoteStdin) Close() error {
	if w.closed.Swap(true) || isEnded(w.p) {
		return nil
	}
	return w.s.send(muxFrame{Type: muxClose, Slot: uint32(w.p.rank)})
}

// tailLine keeps the last line written to it that is not blank, its first
// 200 bytes: ssh's message when it fails.
type tailLine struct {
	mu   sync.Mutex
	cur  []byte
	last []byte
}

const tailMax = 200

func (t *tailLine) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		chunk := b
		if i >= 0 {
			chunk = b[:i]
		}
		if room := tailMax - len(t.cur); room > 0 {
			t.cur = append(t.cur, chunk[:min(len(chunk), room)]...)
		}
		if i < 0 {
			break
		}
		if len(bytes.TrimSpace(t.cur)) > 0 {
			t.last = append(t.last[:0], t.cur...)
		}
		t.cur = t.cur[:0]
		b = b[i+1:]
	}
	return n, nil
}

// String returns the last line that is not blank (a last one without its
// line end too), trimmed.
func (t *tailLine) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := bytes.TrimSpace(t.cur); len(s) > 0 {
		return string(s)
	}
	return string(bytes.TrimSpace(t.last))
}
