package memnet

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// pipe is one direction of a connection: bytes written by one end, read
// by the other, at most max of them held.
type pipe struct {
	mu      sync.Mutex
	buf     []byte // buf[off:] is held
	off     int
	max     int
	readDL  time.Time // the reader's deadline
	writeDL time.Time // the writer's deadline
	rClosed bool      // the reading end closed: writes fail
	wClosed bool      // the writing end closed: reads end at io.EOF
	waiting bool
	changed chan struct{} // closed when something changed and someone waits

	// With a latency, bytes written at t are read from t+latency on:
	// written and read count every byte ever, due holds the writes not
	// yet readable (the first is the earliest), and readable is how far
	// the reader may go.
	latency       time.Duration
	written, read int64
	readable      int64
	due           []dueMark
}

// dueMark says that the bytes up to upto (counted from the first ever
// written) are readable from at on.
type dueMark struct {
	upto int64
	at   time.Time
}

func newPipe(max int, latency time.Duration) *pipe {
	return &pipe{max: max, latency: latency, changed: make(chan struct{})}
}

// ready makes the bytes whose time has come readable and returns how many
// the reader may take now, and when the next ones come (zero if none).
func (p *pipe) ready() (n int, next time.Time) {
	if p.latency > 0 {
		now := time.Now()
		i := 0
		for i < len(p.due) && !now.Before(p.due[i].at) {
			p.readable = p.due[i].upto
			i++
		}
		p.due = p.due[i:]
		if len(p.due) > 0 {
			next = p.due[0].at
		}
	} else {
		p.readable = p.written
	}
	return int(p.readable - p.read), next
}

// wrote records that n bytes were written now.
func (p *pipe) wrote(n int) {
	p.written += int64(n)
	if p.latency <= 0 {
		return
	}
	at := time.Now().Add(p.latency)
	if k := len(p.due); k > 0 && p.due[k-1].at.Equal(at) {
		p.due[k-1].upto = p.written
		return
	}
	p.due = append(p.due, dueMark{upto: p.written, at: at})
}

// change runs f on p under its lock and wakes whoever waits on p.
func (p *pipe) change(f func()) {
	p.mu.Lock()
	f()
	p.waiting = true
	p.notifyLocked()
	p.mu.Unlock()
}

// notifyLocked wakes whoever waits on p.
func (p *pipe) notifyLocked() {
	if p.waiting {
		close(p.changed)
		p.changed = make(chan struct{})
		p.waiting = false
	}
}

// waitLocked waits, p.mu released, until p changes or dl passes (dl
// zero: no limit). It returns with p.mu held.
func (p *pipe) waitLocked(dl time.Time) {
	p.waiting = true
	ch := p.changed
	p.mu.Unlock()
	if dl.IsZero() {
		<-ch
	} else {
		t := time.NewTimer(time.Until(dl))
		select {
		case <-ch:
		case <-t.C:
		}
		t.Stop()
	}
	p.mu.Lock()
}

func passed(dl time.Time) bool { return !dl.IsZero() && !time.Now().Before(dl) }

// Conn is one end of an in-memory connection.
type Conn struct {
	in, out       *pipe
	local, remote net.Addr
	closeOnce     sync.Once
	closed        chan struct{}
}

// Pipe makes the two ends of a connection with size bytes of buffer in
// each direction; a's local address is la, b's is ra.
func Pipe(size int, la, ra net.Addr) (a, b *Conn) { return pipeOf(size, 0, la, ra) }

// pipeOf is Pipe with a latency: what one end writes the other reads
// latency later.
func pipeOf(size int, latency time.Duration, la, ra net.Addr) (a, b *Conn) {
	ab, ba := newPipe(size, latency), newPipe(size, latency)
	a = &Conn{in: ba, out: ab, local: la, remote: ra, closed: make(chan struct{})}
	b = &Conn{in: ab, out: ba, local: ra, remote: la, closed: make(chan struct{})}
	return a, b
}

func (c *Conn) isClosed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

func (c *Conn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Source: c.local, Addr: c.remote, Err: err}
}

// A drained pipe keeps a buffer of at most keepBuf bytes or more than
// dropBuf, and lets one between them go.
const (
	keepBuf = 1 << 10
	dropBuf = 64 << 10
)

// Read reads what the peer wrote.
func (c *Conn) Read(b []byte) (int, error) {
	p := c.in
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		avail, next := p.ready()
		switch {
		case c.isClosed():
			return 0, c.opErr("read", net.ErrClosed)
		case avail > 0:
			if len(b) == 0 {
				return 0, nil
			}
			n := copy(b[:min(len(b), avail)], p.buf[p.off:])
			p.off += n
			p.read += int64(n)
			if p.off == len(p.buf) {
				// Drained: a buffer of a few records is let go, as a
				// socket's kernel buffer is not the process's memory (the
				// simulation of many slots holds a hundred thousand idle
				// connections); one that carried a bulk transfer is kept,
				// for regrowing megabytes at every drain doubled the time
				// of a test that moves them.
				p.buf, p.off = p.buf[:0], 0
				if c := cap(p.buf); c > keepBuf && c <= dropBuf {
					p.buf = nil
				}
			}
			p.notifyLocked()
			return n, nil
		case p.wClosed && len(p.buf) == p.off:
			return 0, io.EOF
		case passed(p.readDL):
			return 0, c.opErr("read", os.ErrDeadlineExceeded)
		}
		// Wait for a change, the deadline, or the next bytes' time.
		dl := p.readDL
		if !next.IsZero() && (dl.IsZero() || next.Before(dl)) {
			dl = next
		}
		p.waitLocked(dl)
	}
}

// Write writes all of b into the peer's buffer, waiting while it is full.
func (c *Conn) Write(b []byte) (int, error) {
	p := c.out
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for {
		switch {
		case c.isClosed():
			return n, c.opErr("write", net.ErrClosed)
		case p.wClosed:
			return n, c.opErr("write", syscall.EPIPE)
		case p.rClosed:
			return n, c.opErr("write", syscall.EPIPE)
		case passed(p.writeDL):
			return n, c.opErr("write", os.ErrDeadlineExceeded)
		case len(b) == 0:
			return 0, nil
		}
		if room := p.max - (len(p.buf) - p.off); room > 0 {
			if p.off > 0 && len(p.buf)+len(b)-n > cap(p.buf) {
				// Move the held bytes to the front before growing.
				p.buf = p.buf[:copy(p.buf, p.buf[p.off:])]
				p.off = 0
			}
			k := min(room, len(b)-n)
			p.buf = append(p.buf, b[n:n+k]...)
			p.wrote(k)
			n += k
			p.notifyLocked()
			if n == len(b) {
				return n, nil
			}
		}
		p.waitLocked(p.writeDL)
	}
}

// Close ends both directions: the peer reads what was written, then
// io.EOF; its writes fail. Waiting calls of c return net.ErrClosed.
func (c *Conn) Close() error {
	first := false
	c.closeOnce.Do(func() {
		first = true
		close(c.closed)
		c.in.change(func() {
			c.in.rClosed, c.in.buf, c.in.off = true, nil, 0
			c.in.read, c.in.due = c.in.written, nil
		})
		c.out.change(func() { c.out.wClosed = true })
	})
	if !first {
		return c.opErr("close", net.ErrClosed)
	}
	return nil
}

// CloseWrite ends c's direction: the peer reads what was written, then
// io.EOF.
func (c *Conn) CloseWrite() error {
	c.out.change(func() { c.out.wClosed = true })
	return nil
}

func (c *Conn) LocalAddr() net.Addr  { return c.local }
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// SetDeadline sets both deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	c.SetReadDeadline(t)
	return c.SetWriteDeadline(t)
}

// SetReadDeadline sets the deadline of reads, waking a waiting one.
func (c *Conn) SetReadDeadline(t time.Time) error {
	c.in.change(func() { c.in.readDL = t })
	return nil
}

// SetWriteDeadline sets the deadline of writes, waking a waiting one.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	c.out.change(func() { c.out.writeDL = t })
	return nil
}
