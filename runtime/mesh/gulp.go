package mesh

import "sync"

// Reads of a large frame. crypto/tls reads one record (at most 16 KiB and
// its header) a Read of the connection below it, so a 1 MiB frame was 64
// or more read system calls on the receiving side, each dearer than the
// copy it did (a third of a receiver's processor time was system calls;
// docs/benchmarks.md, issue 49). While the peer reads the payload of a
// frame of corkMin bytes or more it gulps: a read below TLS takes what
// the socket holds, up to gulpSize, in one call, and TLS's next reads are
// served from that buffer, a copy in cache each. Small frames read as
// before, straight from the socket, and an idle link holds no buffer: it
// comes from a pool when a large frame starts and goes back once the
// gulp ended and the buffer is drained. What is gulped is bytes of the
// stream only, checked by TLS as any others (the frame's limits were
// checked on its header, before anything was gulped).

const gulpSize = 256 << 10

var gulpBufs = sync.Pool{New: func() any { b := make([]byte, 0, gulpSize); return &b }}

// setGulp starts (on) or ends gulping. Call from the connection's reader.
func (c *corkConn) setGulp(on bool) {
	c.gulp = on
	if !on && c.rbuf != nil && c.rpos == len(*c.rbuf) {
		c.releaseRead()
	}
}

func (c *corkConn) releaseRead() {
	*c.rbuf = (*c.rbuf)[:0]
	gulpBufs.Put(c.rbuf)
	c.rbuf, c.rpos = nil, 0
}

// Read hands out what was gulped first; else, gulping, it fills the
// buffer with one read below; else it reads below directly.
func (c *corkConn) Read(b []byte) (int, error) {
	if c.rbuf != nil && c.rpos < len(*c.rbuf) {
		n := copy(b, (*c.rbuf)[c.rpos:])
		c.rpos += n
		c.rheld.Add(int64(-n))
		if c.rpos == len(*c.rbuf) {
			if c.gulp {
				*c.rbuf, c.rpos = (*c.rbuf)[:0], 0
			} else {
				c.releaseRead()
			}
		}
		return n, nil
	}
	if !c.gulp || len(b) >= gulpSize {
		return c.readBelow(b)
	}
	if c.rbuf == nil {
		c.rbuf = gulpBufs.Get().(*[]byte)
	}
	n, err := c.readBelow((*c.rbuf)[:gulpSize])
	if n <= 0 {
		return n, err
	}
	// An error with bytes is returned by the next read below (a socket's
	// errors and its end stay).
	*c.rbuf, c.rpos = (*c.rbuf)[:n], 0
	c.rheld.Add(int64(n))
	return c.Read(b)
}

// gulped is how many bytes read from the socket wait in the buffer.
func (c *corkConn) gulped() int64 { return c.rheld.Load() }
