//go:build linux

package runtime

import (
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
// system calls on the socket; a read first polls for up to its spin
// limit; a read or write that must wait blocks its thread in ppoll(2) on
// the socket and on an eventfd that deadline changes and Close signal.
// Every deadline, EOF and error behaves as net.TCPConn's, so TLS above it
// cannot tell the difference.
type fdConn struct {
	fd           int
	rwake, wwake int // eventfds that wake a waiting reader / writer
	laddr, raddr net.Addr

	spin     atomic.Int64 // read spin limit, nanoseconds
	rdl, wdl atomic.Int64 // deadlines, unix nanoseconds; 0: none
	closing  atomic.Bool

	mu     sync.Mutex
	idle   sync.Cond // signalled when ops falls to 0 after closing
	ops    int       // reads and writes under way
	closed bool
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
	if err := rc.Control(func(s uintptr) {
		r, _, e := syscall.Syscall(syscall.SYS_FCNTL, s, syscall.F_DUPFD_CLOEXEC, 0)
		if e != 0 {
			derr = os.NewSyscallError("fcntl", e)
			return
		}
		fd = int(r)
	}); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, derr
	}
	fc := &fdConn{fd: fd, rwake: -1, wwake: -1, laddr: tc.LocalAddr(), raddr: tc.RemoteAddr()}
	fc.idle.L = &fc.mu
	for _, w := range []*int{&fc.rwake, &fc.wwake} {
		r, _, e := syscall.Syscall(syscall.SYS_EVENTFD2, 0, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		if e != 0 {
			fc.release()
			return nil, os.NewSyscallError("eventfd2", e)
		}
		*w = int(r)
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		fc.release()
		return nil, os.NewSyscallError("setnonblock", err)
	}
	tc.Close()
	return fc, nil
}

func (c *fdConn) release() {
	for _, fd := range []int{c.fd, c.rwake, c.wwake} {
		if fd >= 0 {
			syscall.Close(fd)
		}
	}
}

func (c *fdConn) setSpin(d time.Duration)  { c.spin.Store(int64(d)) }
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
	var start int64
	for i := 0; ; i++ {
		n, err := syscall.Read(c.fd, b)
		switch {
		case n > 0:
			return n, nil
		case err == nil:
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
			start = now
		}
		if now-start < c.spin.Load() {
			continue
		}
		if err := c.wait(pollIn|pollRdHup, c.rwake, &c.rdl); err != nil {
			return 0, c.opErr("read", err)
		}
		start = time.Now().UnixNano() // woken by data: spin again if it was not enough
	}
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
		r, _, e := syscall.Syscall6(syscall.SYS_SENDTO, uintptr(c.fd), uintptr(unsafe.Pointer(&b[w])), uintptr(len(b)-w), syscall.MSG_NOSIGNAL, 0, 0)
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
		if err := c.wait(pollOut, c.wwake, &c.wdl); err != nil {
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

// wait blocks until the socket has events, the deadline passes (the
// deadline error) or the connection closes (net.ErrClosed).
func (c *fdConn) wait(events int16, wake int, dl *atomic.Int64) error {
	for {
		if c.closing.Load() {
			return net.ErrClosed
		}
		var ts *syscall.Timespec
		if d := dl.Load(); d != 0 {
			left := d - time.Now().UnixNano()
			if left <= 0 {
				return os.ErrDeadlineExceeded
			}
			t := syscall.NsecToTimespec(left)
			ts = &t
		}
		fds := [2]pollFd{{fd: int32(c.fd), events: events}, {fd: int32(wake), events: pollIn}}
		_, _, e := syscall.Syscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), 2, uintptr(unsafe.Pointer(ts)), 0, 0, 0)
		if e != 0 && e != syscall.EINTR {
			return os.NewSyscallError("ppoll", e)
		}
		if fds[1].revents != 0 {
			var buf [8]byte
			syscall.Read(wake, buf[:])
		}
		if fds[0].revents != 0 {
			return nil // ready, or an error or hang-up the next call reports
		}
	}
}

// signal wakes a reader or writer waiting in ppoll.
func signal(wake int) {
	one := [8]byte{1}
	syscall.Write(wake, one[:])
}

func (c *fdConn) Close() error {
	c.mu.Lock()
	if c.closed || c.closing.Load() {
		c.mu.Unlock()
		return c.opErr("close", net.ErrClosed)
	}
	c.closing.Store(true)
	signal(c.rwake)
	signal(c.wwake)
	for c.ops > 0 {
		c.idle.Wait()
	}
	c.closed = true
	c.mu.Unlock()
	c.release()
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

// The setters count as operations, so that Close never releases an
// eventfd they are about to signal.
func (c *fdConn) SetReadDeadline(t time.Time) error {
	if err := c.begin(); err != nil {
		return c.opErr("set", err)
	}
	c.rdl.Store(deadlineNS(t))
	signal(c.rwake)
	c.end()
	return nil
}

func (c *fdConn) SetWriteDeadline(t time.Time) error {
	if err := c.begin(); err != nil {
		return c.opErr("set", err)
	}
	c.wdl.Store(deadlineNS(t))
	signal(c.wwake)
	c.end()
	return nil
}
