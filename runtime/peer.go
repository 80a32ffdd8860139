package runtime

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"sperli/codes"
	"sperli/wire"
)

// Flow control (SPEC §6): each peer may have at most Window bytes of data and
// collective frames (payload plus header) buffered at the receiver and not
// yet consumed. The receiver returns credit as it consumes them, in batches
// of creditBatch bytes, in credit frames that are never held back.
const (
	Window      = 64 << 20
	creditBatch = Window / 8
	minCost     = 64 // the least credit any counted frame costs
)

func frameCost(n int) int64 {
	c := int64(n + wire.HeaderSize)
	if c < minCost {
		c = minCost
	}
	return c
}

// outFrame is a frame waiting in a peer's writer. done, when not nil, is
// closed once the frame is written to the connection's buffer (or failed).
type outFrame struct {
	h       wire.Header
	payload []byte
	counted bool // consumes credit
	done    chan struct{}
	err     error // set before done is closed
}

// peer is one connection of the full mesh. The writer goroutine is the only
// code that writes to conn; the reader goroutine is the only code that reads.
type peer struct {
	c    *Comm
	rank int
	conn net.Conn

	data   chan *outFrame // ordered, credit-gated frames (data, collective)
	ctl    chan *outFrame // control frames: heartbeat, credit, abort, bye, silence
	credit chan int64     // credit returned by the peer, from the reader to the writer
	stop   chan struct{}  // closed to end the writer (after it drains ctl)

	lastHeard  atomic.Int64 // unix nanoseconds of the last frame read
	silenceMS  atomic.Int64 // the peer's announced silence limit
	bye        atomic.Bool  // the peer said bye
	gone       atomic.Bool  // the connection is finished (bye read, broken or closed)
	unreturned int64        // credit consumed and not yet returned; guarded by c.mu

	wg         sync.WaitGroup
	writerDone chan struct{}
	closeOnce  sync.Once
	writeErr   atomic.Value // error
}

func newPeer(c *Comm, rank int, conn net.Conn, silenceMS uint32) *peer {
	p := &peer{
		c:      c,
		rank:   rank,
		conn:   conn,
		data:   make(chan *outFrame, 256),
		ctl:    make(chan *outFrame, 256),
		credit: make(chan int64, 64),
		stop:   make(chan struct{}),

		writerDone: make(chan struct{}),
	}
	p.silenceMS.Store(int64(silenceMS))
	p.lastHeard.Store(time.Now().UnixNano())
	return p
}

func (p *peer) start(br *bufio.Reader) {
	p.wg.Add(2)
	go p.writeLoop()
	go p.readLoop(br)
}

// control queues a control frame without waiting. A full control queue
// means the connection is stuck; the frame is then dropped, which the
// silence limit will turn into a loss if the peer is really gone.
func (p *peer) control(t wire.Type, payload []byte) {
	f := &outFrame{h: wire.Header{Type: t, Length: uint32(len(payload))}, payload: payload}
	select {
	case p.ctl <- f:
	default:
	}
}

// enqueue hands an ordered frame to the writer and returns at once; f.done
// is closed when it is written.
func (p *peer) enqueue(f *outFrame) error {
	select {
	case p.data <- f:
		return nil
	case <-p.c.dead:
		return p.c.deadErr()
	}
}

func (p *peer) writeLoop() {
	defer p.wg.Done()
	defer close(p.writerDone)
	bw := bufio.NewWriterSize(p.conn, 64<<10)
	var hb [wire.HeaderSize]byte
	credit := int64(Window)
	var pending *outFrame
	var failed error
	write := func(f *outFrame) {
		if failed == nil {
			f.h.Source = uint32(p.c.rank)
			f.h.Incarnation = p.c.inc
			f.h.Put(hb[:])
			if _, err := bw.Write(hb[:]); err != nil {
				failed = err
			} else if _, err := bw.Write(f.payload); err != nil {
				failed = err
			}
		}
		if f.done != nil {
			f.err = failed
			close(f.done)
		}
	}
	flush := func() {
		if failed == nil && bw.Buffered() > 0 {
			if err := bw.Flush(); err != nil {
				failed = err
			}
		}
		if failed != nil {
			p.writeErr.Store(failed)
		}
	}
	for {
		var dataCh chan *outFrame
		if pending == nil {
			dataCh = p.data
		}
		select {
		case f := <-p.ctl:
			write(f)
		case f := <-dataCh:
			pending = f
		case n := <-p.credit:
			credit += n
		case <-p.stop:
			// Drain what is queued (bye, abort) so the peer hears it.
			for {
				select {
				case f := <-p.ctl:
					write(f)
					continue
				default:
				}
				break
			}
			flush()
			return
		}
		for pending != nil {
			cost := int64(0)
			if pending.counted {
				cost = frameCost(len(pending.payload))
			}
			if credit < cost {
				break
			}
			credit -= cost
			write(pending)
			pending = nil
			select {
			case pending = <-p.data:
			default:
			}
		}
		if len(p.ctl) == 0 && (pending != nil || len(p.data) == 0) && len(p.credit) == 0 {
			flush()
		}
	}
}

func (p *peer) readLoop(br *bufio.Reader) {
	defer p.wg.Done()
	var hb [wire.HeaderSize]byte
	for {
		h, err := wire.ReadHeader(br, hb[:], p.rank)
		if err != nil {
			p.readFailed(err)
			return
		}
		p.lastHeard.Store(time.Now().UnixNano())
		if h.Incarnation != p.c.inc {
			// A frame of another incarnation is dropped whole (SPEC §5).
			if _, err := io.CopyN(io.Discard, br, int64(h.Length)); err != nil {
				p.readFailed(err)
				return
			}
			p.c.staleDropped.Add(1)
			continue
		}
		var payload []byte
		if h.Length > 0 {
			payload = make([]byte, h.Length)
			if _, err := io.ReadFull(br, payload); err != nil {
				p.readFailed(err)
				return
			}
		}
		if err := p.c.dispatch(p, h, payload); err != nil {
			p.c.fail(err)
			p.close()
			return
		}
		if h.Type == wire.Bye {
			p.gone.Store(true)
			return
		}
	}
}

// readFailed handles the end of the reader: a bye before it is normal; a
// broken connection without bye is a loss (SPEC §7); a bad header ends the
// job with its code.
func (p *peer) readFailed(err error) {
	p.gone.Store(true)
	if p.bye.Load() || p.c.closing.Load() {
		return
	}
	if ce := codes.As(err); ce != nil {
		ce.Rank = p.rank
		p.c.fail(ce)
		return
	}
	why := "connection broke without bye"
	if errors.Is(err, io.EOF) {
		why = "connection closed without bye"
	}
	p.c.lost(p.rank, why)
}

// close ends the connection; safe more than once.
func (p *peer) close() {
	p.closeOnce.Do(func() {
		close(p.stop)
		p.conn.Close()
	})
}

// closeGracefully stops the writer after it drained its control queue and
// flushed (waiting at most wait), then closes the connection and waits for
// the reader.
func (p *peer) closeGracefully(wait time.Duration) {
	p.closeOnce.Do(func() {
		close(p.stop)
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-p.writerDone:
		case <-t.C:
		}
		p.conn.Close()
		p.wg.Wait()
	})
}
