package mesh

import (
	"net"
	"sync"
	"sync/atomic"
)

// corkConn gathers the TLS records of a large frame into few large socket
// writes. crypto/tls writes each record (at most 16 KiB) with its own
// Write; while corked, corkConn keeps them in a buffer and writes it out
// when it is full and at uncork, so that a 16 MB frame is 64 socket writes
// rather than 1024 (each write on loopback also costs the receiving side a
// segment to process). The peer corks around frames of corkMin bytes or
// more, under its write lock; small frames go out at once, as before. mu
// is for the writes that do not take the peer's lock: the close alert TLS
// sends from Close, which therefore waits for a flush under way (bounded:
// TLS sets a 5 s write deadline for its alert).
type corkConn struct {
	net.Conn
	mu     sync.Mutex
	buf    []byte
	corked bool
	gate   atomic.Pointer[ticket] // set while a handshake is gated (gate.go)
	gated  *Gate

	// The read side (gulp.go): while the peer reads a large frame, reads
	// below TLS take what the socket holds, up to gulpSize, in one system
	// call, and hand it out to TLS's reads of a record each. Only the
	// connection's one reader (the peer's rmu, or the handshake before
	// it) touches these; rheld is read by Unread from elsewhere.
	rbuf  *[]byte // the read buffer, pooled; nil when empty and not gulping
	rpos  int     // (*rbuf)[rpos:] is not handed out yet
	gulp  bool
	rheld atomic.Int64 // bytes in rbuf not handed out
}

const (
	corkMin  = 64 << 10  // frames this large are corked
	corkSize = 256 << 10 // the buffer
)

func (c *corkConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.corked {
		return c.Conn.Write(b)
	}
	if c.buf == nil {
		c.buf = make([]byte, 0, corkSize)
	}
	n := 0
	for len(b) > 0 {
		k := copy(c.buf[len(c.buf):cap(c.buf)], b)
		c.buf, b, n = c.buf[:len(c.buf)+k], b[k:], n+k
		if len(c.buf) == cap(c.buf) {
			if err := c.flush(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// flush writes the buffer out. Call with mu held.
func (c *corkConn) flush() error {
	_, err := c.Conn.Write(c.buf)
	c.buf = c.buf[:0]
	return err
}

func (c *corkConn) cork() {
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// uncork writes what is gathered and stops gathering.
func (c *corkConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	if len(c.buf) == 0 {
		return nil
	}
	return c.flush()
}
