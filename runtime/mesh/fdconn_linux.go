//go:build linux

package mesh

import (
	"errors"
	"io"
	"math"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// fdConn is a TCP connection that this package polls itself, outside Go's
// network poller (see spin.go for why): reads and writes are non-blocking
// system calls on the socket, and a read first polls for up to its spin
// limit. A read or write that must wait parks its goroutine in Go's poller
// on a duplicate of the socket registered for that wait alone (park), so a
// waiting goroutine holds neither a thread nor a processor, while between
// waits no arriving segment wakes anybody. Every deadline, EOF and error
// behaves as net.TCPConn's, so TLS above it cannot tell the difference.
type fdConn struct {
	fd           int
	laddr, raddr net.Addr

	spin atomic.Int64 // read spin limit, nanoseconds
	// busy, when not nil and above 0, says the process's writers are at
	// work: a read then parks at once rather than take the processor
	// they need (setBusy).
	busy     *atomic.Int32
	budget   atomic.Int64 // how long a read spins now (adapt), at most spin
	rdl, wdl atomic.Int64 // deadlines, unix nanoseconds; 0: none
	closing  atomic.Bool

	mu           sync.Mutex
	idle         sync.Cond // signalled when ops falls to 0 after closing
	ops          int       // reads, writes and setters under way
	closed       bool
	rpark, wpark *os.File // the registered duplicates of waits under way
}

// ownConn takes c (a *net.TCPConn) out of Go's poller: it duplicates the
// socket, closes c (which removes it from the poller), and returns an
// fdConn on the duplicate. Anything else than a TCP connection is
// returned as it is.
func ownConn(c net.Conn) (net.Conn, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c, nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	var derr error
	if err := rc.Control(func(s uintptr) { fd, derr = dupSocket(s) }); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, derr
	}
	fc := &fdConn{fd: fd, laddr: tc.LocalAddr(), raddr: tc.RemoteAddr()}
	fc.idle.L = &fc.mu
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return nil, os.NewSyscallError("setnonblock", err)
	}
	tc.Close()
	return fc, nil
}

// dupSocket duplicates fd, close-on-exec.
func dupSocket(fd uintptr) (int, error) {
	r, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_DUPFD_CLOEXEC, 0)
	if e != 0 {
		return -1, os.NewSyscallError("fcntl", e)
	}
	return int(r), nil
}

func (c *fdConn) setSpin(d time.Duration)  { c.spin.Store(int64(d)); c.budget.Store(int64(d)) }
func (c *fdConn) setBusy(b *atomic.Int32)  { c.busy = b }
func (c *fdConn) spinLimit() time.Duration { return time.Duration(c.spin.Load()) }

func (c *fdConn) begin() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.closing.Load() {
		return net.ErrClosed
	}
	c.ops++
	return nil
}

func (c *fdConn) end() {
	c.mu.Lock()
	c.ops--
	if c.ops == 0 && c.closing.Load() {
		c.idle.Broadcast()
	}
	c.mu.Unlock()
}

func (c *fdConn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.laddr, Addr: c.raddr, Err: err}
}

func (c *fdConn) Read(b []byte) (int, error) {
	if err := c.begin(); err != nil {
		return 0, c.opErr("read", err)
	}
	defer c.end()
	if len(b) == 0 {
		return 0, nil
	}
	// A deadline already passed wins over data waiting, as in net.TCPConn.
	if dl := c.rdl.Load(); dl != 0 && time.Now().UnixNano() >= dl {
		return 0, c.opErr("read", os.ErrDeadlineExceeded)
	}
	var start, budget int64
	for i := 0; ; i++ {
		n, err := nbRead(c.fd, b)
		switch {
		case n > 0:
			if i > 0 && budget > 0 {
				c.adapt(budget, true, 0)
			}
			return n, nil
		case err == 0:
			return 0, io.EOF
		case err == syscall.EINTR:
			continue
		case err != syscall.EAGAIN:
			return 0, c.opErr("read", os.NewSyscallError("read", err))
		}
		if c.closing.Load() {
			return 0, c.opErr("read", net.ErrClosed)
		}
		now := time.Now().UnixNano()
		if dl := c.rdl.Load(); dl != 0 && now >= dl {
			return 0, c.opErr("read", os.ErrDeadlineExceeded)
		}
		if i == 0 {
			start, budget = now, c.budget.Load()
		}
		if now-start < budget && (c.busy == nil || c.busy.Load() == 0) {
			if i&yieldEvery == yieldEvery-1 {
				schedYield() // let a process that must run for the data run
			}
			continue
		}
		if err := c.park(false); err != nil {
			return 0, c.opErr("read", err)
		}
		woke := time.Now().UnixNano()
		c.adapt(budget, false, woke-start)
		start, budget, i = woke, c.budget.Load(), 0 // woken by data: spin again if it was not enough
	}
}

// yieldEvery is how many empty polls a spinning read makes between yields
// of its processor (sched_yield): on a busy machine the spinner then lets
// the process run that its data waits for, as MPI progress engines yield
// when idle; on a quiet one a yield returns at once.
const yieldEvery = 8

// adapt moves the spin budget after a wait that spun for budget: a wait the
// spin ended (hit), or one that parked and was woken after waited
// nanoseconds. The budget doubles, up to the spin limit, after a hit or a
// park that a longer spin would have saved (woken before the limit), and
// halves, down to a thirty-second of the limit, after a park that spinning
// could not have saved: when spins stop paying, a read spins less (never
// not at all: a short spin finds out when they pay again).
func (c *fdConn) adapt(budget int64, hit bool, waited int64) {
	limit := c.spin.Load()
	if limit <= 0 {
		return
	}
	next := budget * 2
	if !hit && waited >= limit {
		next = budget / 2
	}
	c.budget.Store(max(limit/32, min(limit, next)))
}

func (c *fdConn) Write(b []byte) (int, error) {
	if err := c.begin(); err != nil {
		return 0, c.opErr("write", err)
	}
	defer c.end()
	if len(b) == 0 {
		return 0, nil
	}
	w := 0
	for w < len(b) {
		if dl := c.wdl.Load(); dl != 0 && time.Now().UnixNano() >= dl {
			return w, c.opErr("write", os.ErrDeadlineExceeded)
		}
		// send with MSG_NOSIGNAL: a peer that went away is EPIPE, never
		// SIGPIPE (which a C program embedding libsperli would get).
		r, _, e := rawSyscall6(syscall.SYS_SENDTO, uintptr(c.fd), uintptr(unsafe.Pointer(&b[w])), uintptr(len(b)-w), syscall.MSG_NOSIGNAL, 0, 0)
		switch {
		case e == 0:
			w += int(r)
			continue
		case e == syscall.EINTR:
			continue
		case e != syscall.EAGAIN:
			return w, c.opErr("write", os.NewSyscallError("write", e))
		}
		if c.closing.Load() {
			return w, c.opErr("write", net.ErrClosed)
		}
		if err := c.park(true); err != nil {
			return w, c.opErr("write", err)
		}
	}
	return w, nil
}

// poll(2) events (the syscall package has no names for them).
const (
	pollIn    = 0x1
	pollOut   = 0x4
	pollRdHup = 0x2000
)

type pollFd struct {
	fd      int32
	events  int16
	revents int16
}

// ready reports whether fd has any of events now (or an error or hang-up,
// which the next call reports).
func ready(fd uintptr, events int16) bool {
	p := pollFd{fd: int32(fd), events: events}
	var zero syscall.Timespec
	n, _, e := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&p)), 1, uintptr(unsafe.Pointer(&zero)), 0, 0, 0)
	return e != 0 || (n > 0 && p.revents != 0) // a failed poll: let the call itself tell
}

// park waits, in Go's poller, until the socket is readable (or writable),
// the deadline passes (the deadline error) or the connection closes
// (net.ErrClosed). It registers a duplicate of the socket for this wait
// and closes it after; SetDeadline and Close reach it through rpark/wpark.
func (c *fdConn) park(write bool) error {
	nfd, err := dupSocket(uintptr(c.fd))
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(nfd), "sperli-socket") // non-blocking: Go's poller takes it
	slot, dl := &c.rpark, &c.rdl
	if write {
		slot, dl = &c.wpark, &c.wdl
	}
	c.mu.Lock()
	if c.closing.Load() {
		c.mu.Unlock()
		f.Close()
		return net.ErrClosed
	}
	*slot = f
	setFileDeadline(f, write, dl.Load())
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		if *slot == f {
			*slot = nil
			f.Close()
		}
		c.mu.Unlock()
	}()
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	if write {
		err = rc.Write(func(fd uintptr) bool { return ready(fd, pollOut) })
	} else {
		err = rc.Read(func(fd uintptr) bool { return ready(fd, pollIn|pollRdHup) })
	}
	switch {
	case c.closing.Load():
		return net.ErrClosed
	case errors.Is(err, os.ErrDeadlineExceeded):
		return os.ErrDeadlineExceeded
	}
	return err
}

// setFileDeadline gives a parked wait's file the connection's deadline.
func setFileDeadline(f *os.File, write bool, ns int64) {
	t := time.Time{}
	if ns != 0 {
		t = time.Unix(0, ns)
	}
	if write {
		f.SetWriteDeadline(t)
	} else {
		f.SetReadDeadline(t)
	}
}

func (c *fdConn) Close() error {
	c.mu.Lock()
	if c.closed || c.closing.Load() {
		c.mu.Unlock()
		return c.opErr("close", net.ErrClosed)
	}
	c.closing.Store(true)
	for _, slot := range []**os.File{&c.rpark, &c.wpark} {
		if *slot != nil {
			(*slot).Close() // wakes the parked wait
			*slot = nil
		}
	}
	for c.ops > 0 {
		c.idle.Wait()
	}
	c.closed = true
	c.mu.Unlock()
	syscall.Close(c.fd)
	return nil
}

func (c *fdConn) LocalAddr() net.Addr  { return c.laddr }
func (c *fdConn) RemoteAddr() net.Addr { return c.raddr }

func deadlineNS(t time.Time) int64 {
	switch {
	case t.IsZero():
		return 0
	case !t.After(time.Unix(0, 0)):
		return 1 // long past
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64 // past 2262: as good as never
	}
	return t.UnixNano()
}

func (c *fdConn) SetDeadline(t time.Time) error {
	c.SetReadDeadline(t)
	return c.SetWriteDeadline(t)
}

// The setters count as operations, so that Close never races them.
func (c *fdConn) SetReadDeadline(t time.Time) error  { return c.setDeadline(false, t) }
func (c *fdConn) SetWriteDeadline(t time.Time) error { return c.setDeadline(true, t) }

func (c *fdConn) setDeadline(write bool, t time.Time) error {
	if err := c.begin(); err != nil {
		return c.opErr("set", err)
	}
	defer c.end()
	c.mu.Lock()
	slot, dl := c.rpark, &c.rdl
	if write {
		slot, dl = c.wpark, &c.wdl
	}
	ns := deadlineNS(t)
	dl.Store(ns)
	if slot != nil {
		setFileDeadline(slot, write, ns)
	}
	c.mu.Unlock()
	return nil
}

// nbRead is read(2) on the non-blocking socket.
func nbRead(fd int, b []byte) (int, syscall.Errno) {
	r, _, e := rawSyscall6(syscall.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), 0, 0, 0)
	return int(r), e
}

// rawSyscall6 makes the socket's read and sendto calls. The socket is
// non-blocking, so they never wait, and a raw system call skips the
// scheduler's bookkeeping of a call that might (entersyscall, exitsyscall,
// sysmon's hand-off of the processor): measured, 64 B Go–Go round trip
// 28.1 → 23.1 µs and a 1 MiB stream 13% faster (docs/benchmarks.md). A
// sendto of a 16 KiB record on loopback holds the processor for the
// microseconds the kernel takes to deliver it, as a computation would.
var rawSyscall6 = syscall.RawSyscall6

// schedYield gives the processor to another runnable thread, if any.
func schedYield() { rawSyscall6(syscall.SYS_SCHED_YIELD, 0, 0, 0, 0, 0, 0) }

// unreadBytes is how many bytes the kernel holds for conn that no read
// has taken yet (FIONREAD), or 0 where it cannot tell.
func unreadBytes(conn net.Conn) int {
	var n int32
	ask := func(fd uintptr) {
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&n))); e != 0 {
			n = 0
		}
	}
	switch c := conn.(type) {
	case *fdConn:
		ask(uintptr(c.fd))
	case syscall.Conn:
		rc, err := c.SyscallConn()
		if err != nil || rc.Control(ask) != nil {
			return 0
		}
	}
	return int(n)
}

// pollConn is a TCP connection that stays in Go's poller but reads and
// writes with raw system calls, for a process that does not spin (more
// ranks than processors). A read or write through net.TCPConn enters the
// scheduler's system-call bookkeeping (entersyscall), and the first one
// after the process was idle wakes the runtime's monitor thread (sysmon)
// from its deep sleep into a burst of 20 µs sleeps; on a machine with a
// hundred processes a processor, every heartbeat read so cost a few
// context switches more than the read itself. The socket is non-blocking
// (Go's poller made it so), so its read and sendto never wait: a read
// that finds nothing parks in the poller (RawConn.Read's wait), as
// net.TCPConn's does, with its deadlines.
type pollConn struct {
	*net.TCPConn
	rc syscall.RawConn
}

// pollOwn wraps c, a *net.TCPConn, in a pollConn; anything else is
// returned as it is.
func pollOwn(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	return &pollConn{TCPConn: tc, rc: rc}
}

func (c *pollConn) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	var n int
	var e syscall.Errno
	err := c.rc.Read(func(fd uintptr) bool {
		for {
			n, e = nbRead(int(fd), b)
			if e != syscall.EINTR {
				return e != syscall.EAGAIN
			}
		}
	})
	switch {
	case err != nil:
		return 0, c.opErr("read", err)
	case e != 0:
		return 0, c.opErr("read", os.NewSyscallError("read", e))
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (c *pollConn) Write(b []byte) (int, error) {
	w := 0
	var e syscall.Errno
	err := c.rc.Write(func(fd uintptr) bool {
		for w < len(b) {
			var r uintptr
			r, _, e = rawSyscall6(syscall.SYS_SENDTO, fd, uintptr(unsafe.Pointer(&b[w])), uintptr(len(b)-w), syscall.MSG_NOSIGNAL, 0, 0)
			switch e {
			case 0:
				w += int(r)
			case syscall.EINTR:
			case syscall.EAGAIN:
				return false // wait until writable, then go on
			default:
				return true
			}
		}
		return true
	})
	switch {
	case err != nil:
		return w, c.opErr("write", err)
	case e != 0 && e != syscall.EAGAIN:
		return w, c.opErr("write", os.NewSyscallError("write", e))
	}
	return w, nil
}

// opErr is the error of a failed op, as net.TCPConn's: an error of the
// poller (a deadline, a close) is kept as it is inside.
func (c *pollConn) opErr(op string, err error) error {
	if oe, ok := err.(*net.OpError); ok {
		return oe
	}
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
