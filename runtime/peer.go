package runtime

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"time"

	"sperli/codes"
	"sperli/wire"
)

// Flow control (SPEC §6): each peer may have at most Window bytes of data,
// checkpoint and collective frames buffered at the receiver and not yet
// consumed. The receiver returns credit as it consumes them, in batches of
// creditBatch bytes, in credit frames that are never held back. The
// receiver enforces the window: a frame past it is a protocol violation
// (H1627), so a peer that ignores credit cannot grow a rank's memory.
const (
	Window      = 64 << 20
	creditBatch = Window / 8
	// frameOverhead is what a buffered frame costs beyond its payload: its
	// header and the receiver's bookkeeping of it (matcher entry, queue
	// slot, buffer rounding; measured at about 190 bytes for an empty
	// message). Counting it keeps a flood of empty frames within the
	// window's memory too: 64 MiB of credit is at most 262,144 of them.
	frameOverhead = 256
)

func frameCost(n int) int64 { return int64(n) + frameOverhead }

// countedType reports whether frames of type t consume credit.
func countedType(t wire.Type) bool {
	return t == wire.Data || t == wire.Checkpoint || t == wire.Collective
}

// outFrame is a frame to write. done, when not nil, is closed once the
// frame is written to the connection (or failed, err set before).
type outFrame struct {
	h       wire.Header
	head    []byte // written before payload, with it the frame's payload (a gather list: no copy)
	payload []byte
	counted bool // consumes credit
	done    chan struct{}
	err     error
}

func (f *outFrame) cost() int64 {
	if !f.counted {
		return 0
	}
	return frameCost(len(f.head) + len(f.payload))
}

// peer is one connection of the full mesh. Writing is serialised by wmu:
// a sending goroutine writes its own data frame directly when nothing is
// queued before it and credit allows (the latency path); otherwise the
// frame waits in pending for the writer goroutine, which also writes every
// control frame, so that no caller of control ever blocks. The reader
// goroutine is the only code that reads.
type peer struct {
	l    *links
	up   sink // all the connection tells the layer above it (links)
	rank int  // the peer's slot (its rank at launch; it names the connection for life)
	conn net.Conn

	qmu        sync.Mutex  // guards the queues and credit below
	ctlq       []*outFrame // control frames: heartbeat, credit, abort, silence
	pending    []*outFrame // ordered frames (data, collective, bye) not yet taken
	credit     int64       // bytes the peer can still take (SPEC §6)
	direct     int         // direct writes under way
	writerData int         // ordered frames the writer took and is writing
	werr       error       // the first write error

	wmu  sync.Mutex // guards bw, cork and the connection's write side
	bw   *bufio.Writer
	cork *corkConn // below TLS, or nil
	hb   [wire.HeaderSize]byte

	kick  chan struct{} // wakes the writer
	rkick chan struct{} // wakes the reader goroutine out of its grace (readSoon)
	stop  chan struct{} // closed to end the writer (after it drained)

	rmu        sync.Mutex // held by whoever reads
	br         *bufio.Reader
	rs         readState
	foreground atomic.Int64 // unix nanoseconds a receiver last read or was served
	bgReading  atomic.Bool  // the reader goroutine holds rmu

	lastHeard  atomic.Int64 // unix nanoseconds of the last frame read
	silenceMS  atomic.Int64 // the peer's announced silence limit
	bye        atomic.Bool  // the peer said bye
	gone       atomic.Bool  // the connection is finished (bye read, broken or closed)
	umu        sync.Mutex   // guards unreturned
	unreturned int64        // credit consumed and not yet returned
	held       atomic.Int64 // credit the peer has used and not had back: read minus returned

	// Frames of a generation this slot has not entered yet (SPEC §10.1),
	// kept in order until it does; guarded by fmu, which is also held
	// while a frame is dispatched, so that the switch of generations sees
	// no frame half handled.
	fmu    sync.Mutex
	future []heldFrame

	wg         sync.WaitGroup
	writerDone chan struct{}
	closeOnce  sync.Once
}

// sink is all a connection tells the layer above it, and the little it
// asks of it: a frame arrived, the connection was lost, the peer broke the
// protocol; whether broken connections are expected now, the generation
// its control frames are stamped with, and the current generation's end
// (for a sender that waits). links is the sink of every peer; a test may
// give another (sink_test.go). The peer calls nothing else above it; it
// reads the slot's settings from links (self, spins, writing, now).
type sink interface {
	// arrive takes a frame read from slot p.rank; an error refuses the
	// peer (refused).
	arrive(p *peer, h wire.Header, payload []byte) error
	// lost says the connection to slot broke without a bye.
	lost(slot int, why string)
	// refused ends the job over a frame of slot that the protocol does
	// not allow (err says which).
	refused(slot int, err error)
	// closing reports whether Finish or Close is under way: the reader
	// goes on reading what Finish waits for after the peer was stopped.
	closing() bool
	// expected reports whether broken connections are the job's end now
	// (closing, or the job is over), not a loss.
	expected() bool
	// gen is the generation control frames are stamped with.
	gen() uint32
	// dead is closed when the current generation ended; deadErr says how.
	dead() (<-chan struct{}, func() error)
}

func newPeer(l *links, rank int, conn net.Conn, silenceMS uint32) *peer {
	p := &peer{
		l:          l,
		up:         l,
		rank:       rank,
		conn:       conn,
		credit:     Window,
		bw:         bufio.NewWriterSize(conn, 64<<10),
		kick:       make(chan struct{}, 1),
		rkick:      make(chan struct{}, 1),
		stop:       make(chan struct{}),
		writerDone: make(chan struct{}),
	}
	if nc, ok := conn.(interface{ NetConn() net.Conn }); ok {
		p.cork, _ = nc.NetConn().(*corkConn)
	}
	p.silenceMS.Store(int64(silenceMS))
	p.lastHeard.Store(l.now().UnixNano())
	return p
}

func (p *peer) start(br *bufio.Reader) {
	p.br = br
	p.wg.Add(2)
	go p.writeLoop()
	go p.readLoop(br)
}

func (p *peer) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// control queues a control frame for the writer and returns at once.
func (p *peer) control(t wire.Type, payload []byte) { p.controlOf(p.up.gen(), t, payload) }

// controlOf queues a control frame of generation gen.
func (p *peer) controlOf(gen uint32, t wire.Type, payload []byte) {
	f := &outFrame{h: wire.Header{Type: t, Incarnation: gen, Length: uint32(len(payload))}, payload: payload}
	p.qmu.Lock()
	if len(p.ctlq) < 1024 { // a stuck connection drops control frames; silence then tells
		p.ctlq = append(p.ctlq, f)
	}
	p.qmu.Unlock()
	p.wake()
}

// final queues the abort that ends the job behind the ordered frames
// already queued that credit lets out, so that what this rank said before
// it ended — above all a collective's void (SPEC §8.3) — reaches the peer
// before the abort does. Frames that would wait for credit are given up:
// the job is over, and nothing may hold its abort back.
func (p *peer) final(t wire.Type, payload []byte) {
	f := &outFrame{h: wire.Header{Type: t, Incarnation: p.up.gen(), Length: uint32(len(payload))}, payload: payload}
	var dropped []*outFrame
	p.qmu.Lock()
	credit := p.credit
	for i, q := range p.pending {
		if credit < q.cost() {
			dropped = append(dropped, p.pending[i:]...)
			p.pending = p.pending[:i]
			break
		}
		credit -= q.cost()
	}
	p.pending = append(p.pending, f)
	p.qmu.Unlock()
	for _, q := range dropped {
		if q.done != nil {
			q.err = errJobOver
			close(q.done)
		}
	}
	p.wake()
}

// errJobOver is the write error of frames given up when the job ended; the
// caller reports the job's end instead.
var errJobOver = errors.New("the job ended before the frame was sent")

// addCredit records credit the peer returned (reader goroutine). Credit
// beyond what this rank has used is a protocol violation.
func (p *peer) addCredit(n uint64) error {
	p.qmu.Lock()
	if n == 0 || n > uint64(Window-p.credit) {
		used := Window - p.credit
		p.qmu.Unlock()
		return violation(p.rank, "it returned %d bytes of credit, this rank has used %d", n, used)
	}
	p.credit += int64(n)
	more := len(p.pending) > 0
	p.qmu.Unlock()
	if more {
		p.wake()
	}
	return nil
}

// send writes an ordered frame: directly from the calling goroutine when
// nothing is queued before it and credit allows (wait or not), else by the
// writer. With wait it returns when the frame is written; without, at once
// (f.done tells when).
func (p *peer) send(f *outFrame, wait bool) error {
	return p.sendAs(f, wait, wait)
}

// post writes an ordered frame directly from the calling goroutine when
// nothing is queued before it and credit allows, else hands it to the
// writer and returns at once (f.done tells when it is written). It is how
// a collective sends its small frames: no goroutine handoff on the latency
// path, and no wait where the writer must do it.
func (p *peer) post(f *outFrame) error { return p.sendAs(f, true, false) }

func (p *peer) sendAs(f *outFrame, direct, wait bool) error {
	cost := f.cost()
	p.qmu.Lock()
	if err := p.werr; err != nil {
		p.qmu.Unlock()
		return err
	}
	if direct && len(p.pending) == 0 && p.writerData == 0 && p.credit >= cost {
		p.credit -= cost
		p.direct++
		p.qmu.Unlock()
		p.wmu.Lock()
		err := p.writeFrame(f)
		if err == nil {
			err = p.flush()
		}
		p.wmu.Unlock()
		p.qmu.Lock()
		p.direct--
		if err != nil && p.werr == nil {
			p.werr = err
		}
		more := len(p.pending) > 0 || len(p.ctlq) > 0
		p.qmu.Unlock()
		if more {
			p.wake()
		}
		if f.done != nil {
			f.err = err
			close(f.done)
		}
		return err
	}
	p.pending = append(p.pending, f)
	starved := p.credit < cost
	p.qmu.Unlock()
	p.wake()
	if starved {
		p.readSoon() // the credit comes in a frame someone must read
	}
	if !wait || f.done == nil {
		return nil
	}
	dead, deadErr := p.up.dead()
	select {
	case <-f.done:
		return f.err
	case <-dead:
		select {
		case <-f.done:
			return f.err
		default:
			return deadErr()
		}
	}
}

// enqueue hands an ordered frame to the writer and returns at once.
func (p *peer) enqueue(f *outFrame) error { return p.send(f, false) }

// writeFrame writes one frame into bw, corking the connection below TLS
// for a large one (cork.go). Call with wmu held.
func (p *peer) writeFrame(f *outFrame) error {
	if len(f.head)+len(f.payload) >= corkMin && p.cork != nil {
		p.cork.cork()
	}
	f.h.Source = uint32(p.l.self) // the generation was set by who made the frame
	f.h.Put(p.hb[:])
	if _, err := p.bw.Write(p.hb[:]); err != nil {
		return err
	}
	if _, err := p.bw.Write(f.head); err != nil {
		return err
	}
	_, err := p.bw.Write(f.payload)
	return err
}

// flush writes out what bw holds and what the cork gathered. Call with wmu
// held.
func (p *peer) flush() error {
	err := p.bw.Flush()
	if p.cork != nil {
		if uerr := p.cork.uncork(); err == nil {
			err = uerr
		}
	}
	return err
}

// take removes the control frames and the ordered frames that credit
// allows, unless a direct write is under way. Call with qmu held.
func (p *peer) take() (ctl, data []*outFrame) {
	ctl, p.ctlq = p.ctlq, nil
	if p.direct > 0 {
		return ctl, nil
	}
	n := 0
	for n < len(p.pending) && p.credit >= p.pending[n].cost() {
		p.credit -= p.pending[n].cost()
		n++
	}
	if n > 0 {
		data = append([]*outFrame(nil), p.pending[:n]...)
		copy(p.pending, p.pending[n:])
		for i := len(p.pending) - n; i < len(p.pending); i++ {
			p.pending[i] = nil
		}
		p.pending = p.pending[:len(p.pending)-n]
	}
	p.writerData += len(data)
	return ctl, data
}

func (p *peer) writeLoop() {
	defer p.wg.Done()
	defer close(p.writerDone)
	for {
		stopping := false
		select {
		case <-p.kick:
		case <-p.stop:
			stopping = true
		}
		for {
			p.qmu.Lock()
			ctl, data := p.take()
			werr := p.werr
			p.qmu.Unlock()
			if len(ctl) == 0 && len(data) == 0 {
				break
			}
			err := werr
			large := 0
			for _, f := range data {
				large += len(f.head) + len(f.payload)
			}
			if large >= corkMin {
				p.l.writing.Add(1)
			}
			if err == nil {
				p.wmu.Lock()
				for _, f := range ctl {
					if err == nil {
						err = p.writeFrame(f)
					}
				}
				for _, f := range data {
					if err == nil {
						err = p.writeFrame(f)
					}
				}
				if err == nil {
					err = p.flush()
				}
				p.wmu.Unlock()
			}
			if large >= corkMin {
				p.l.writing.Add(-1)
			}
			p.qmu.Lock()
			p.writerData -= len(data)
			if err != nil && p.werr == nil {
				p.werr = err
			}
			p.qmu.Unlock()
			for _, f := range data {
				if f.done != nil {
					f.err = err
					close(f.done)
				}
			}
		}
		if stopping {
			return
		}
	}
}

// Reading. Whoever holds rmu reads whole frames from the connection and
// dispatches them: a goroutine waiting in Recv or in a collective for this
// peer reads itself (the latency path: the message wakes the goroutine
// that wants it, with no handoff; where reads spin it takes reading over
// from the reader goroutine, takeOver), and the reader goroutine reads
// whenever no receiver has read in the last readGrace, so that heartbeats
// and aborts are never left unread for long. Waits that need the reader
// goroutine now — a wildcard receive, credit for a held-back send, the
// byes of Finish — call readSoon, which ends its grace at once. The grace is long because the reader
// goroutine's timer is a wake-up of an idle thread each time it fires, and
// a wake-up costs a spinning receiver as much as a round trip. A read
// interrupted by a deadline (ctx cancelled, the job ended) keeps its
// partial frame in rs and goes on later.
const readGrace = 10 * time.Millisecond

type readState struct {
	hb      [wire.HeaderSize]byte
	hn      int // header bytes read
	h       wire.Header
	payload []byte
	pn      int // payload bytes read
}

func (p *peer) readLoop(br *bufio.Reader) {
	defer p.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for !p.gone.Load() {
		if wait := readGrace - time.Duration(time.Now().UnixNano()-p.foreground.Load()); wait > 0 {
			t.Reset(wait)
			select {
			case <-t.C:
			case <-p.rkick:
			case <-p.stop:
				// Stopped: keep reading only what Finish still waits for.
				if p.up.closing() && !p.gone.Load() {
					continue
				}
				return
			}
			continue
		}
		if !p.rmu.TryLock() {
			// A receiver is reading: it dispatches every frame it reads, so
			// stay away another grace period rather than queue on the lock
			// (which would hand the next frame to this goroutine).
			p.foreground.Store(time.Now().UnixNano())
			continue
		}
		if p.gone.Load() {
			p.rmu.Unlock()
			return
		}
		p.bgReading.Store(true)
		p.readOne()
		p.bgReading.Store(false)
		p.rmu.Unlock()
	}
}

// readSoon makes the reader goroutine read now if no receiver holds the
// connection, rather than after its grace.
func (p *peer) readSoon() {
	p.foreground.Store(0)
	select {
	case p.rkick <- struct{}{}:
	default:
	}
}

// readOne reads and dispatches one frame. Call with rmu held. It reports
// false when the connection is finished (p.gone is then set).
func (p *peer) readOne() bool {
	rs := &p.rs
	for rs.hn < wire.HeaderSize {
		n, err := p.br.Read(rs.hb[rs.hn:])
		rs.hn += n
		p.heard(n)
		if err != nil && rs.hn < wire.HeaderSize {
			return p.readErr(err)
		}
	}
	if rs.pn == 0 && rs.payload == nil {
		h, err := wire.Decode(rs.hb[:], p.rank)
		if err != nil {
			p.readFailed(err)
			return false
		}
		if countedType(h.Type) {
			// The window is enforced on the header, before the payload
			// is allocated or read.
			if held := p.held.Add(frameCost(int(h.Length))); held > Window {
				p.refuse(violation(p.rank, "it sent a %s frame of %d bytes past its credit: %d bytes unconsumed, window %d", h.Type, h.Length, held, Window))
				return false
			}
		}
		rs.h = h
		rs.payload = getBuf(int(h.Length)) // filled whole before use
	}
	for rs.pn < len(rs.payload) {
		n, err := p.br.Read(rs.payload[rs.pn:])
		rs.pn += n
		p.heard(n)
		if err != nil && rs.pn < len(rs.payload) {
			return p.readErr(err)
		}
	}
	h, payload := rs.h, rs.payload
	rs.hn, rs.pn, rs.payload = 0, 0, nil
	if len(payload) == 0 {
		payload = nil
	}
	if err := p.up.arrive(p, h, payload); err != nil {
		p.refuse(err)
		return false
	}
	if h.Type == wire.Bye {
		p.gone.Store(true)
		return false
	}
	return true
}

// heard records that n bytes came from the peer: a peer in the middle of a
// large frame is alive, whole frames or not.
func (p *peer) heard(n int) {
	if n > 0 {
		p.lastHeard.Store(p.l.now().UnixNano())
	}
}

// readErr handles a read error in the middle of readOne: a deadline only
// interrupts (the partial frame stays in rs); anything else ends reading.
func (p *peer) readErr(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		p.conn.SetReadDeadline(time.Time{})
		return !p.gone.Load()
	}
	p.readFailed(err)
	return false
}

// interrupt makes a blocked read return (it goes on later).
func (p *peer) interrupt() { p.conn.SetReadDeadline(time.Unix(1, 0)) }

// readFor reads this peer's frames from the calling goroutine until done is
// closed, the connection ends, the job ends or ctx ends, if no other
// goroutine is reading; it reports whether it read.
func (p *peer) readFor(ctx context.Context, done <-chan struct{}) bool {
	if !p.rmu.TryLock() && (!p.l.spins || !p.takeOver()) {
		return false
	}
	stop := func() bool { return false }
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, p.interrupt)
	}
	dead, _ := p.up.dead()
	for !p.gone.Load() && ctx.Err() == nil {
		select {
		case <-done:
		case <-dead:
		default:
			if p.readOne() {
				continue
			}
		}
		break
	}
	stop()
	p.foreground.Store(time.Now().UnixNano())
	p.rmu.Unlock()
	return true
}

// takeOver takes rmu from the reader goroutine when it holds it: told that
// a receiver waits (foreground) and interrupted, it lets go within its
// current read (a partial frame stays in rs) and stays away a grace
// period. Where reads spin, a receiver that found the reader goroutine
// reading and waited for its handoff would never read itself again, each
// frame handed over and its thread woken (measured: 140 µs a small
// collective at two ranks instead of 13). Where they do not (more ranks
// than processors), a handoff costs what a read of one's own does, and the
// interruption only adds to it (measured: 300 µs a barrier of three ranks
// instead of 200), so it is not tried. It reports whether it holds rmu;
// false when another receiver reads (it dispatches what it reads).
func (p *peer) takeOver() bool {
	p.foreground.Store(time.Now().UnixNano())
	for i := 0; i < takeOverTries; i++ {
		if !p.bgReading.Load() {
			return p.rmu.TryLock()
		}
		p.interrupt()
		goruntime.Gosched()
		if p.rmu.TryLock() {
			return true
		}
	}
	return false
}

// takeOverTries bounds the yields takeOver waits for the reader goroutine
// to let go (it does within microseconds unless its processor is taken).
const takeOverTries = 1000

// readFailed handles the end of the reader: a bye before it is normal; a
// broken connection without bye is a loss (SPEC §7); a bad header ends the
// job with its code.
func (p *peer) readFailed(err error) {
	p.gone.Store(true)
	if p.bye.Load() || p.up.expected() {
		// The job is over already: connections closing now are its end,
		// not a new loss.
		return
	}
	if ce := codes.As(err); ce != nil {
		ce.Rank = p.rank
		p.refuse(ce)
		return
	}
	why := "connection broke without bye"
	if errors.Is(err, io.EOF) {
		why = "connection closed without bye"
	}
	p.up.lost(p.rank, why)
}

// refuse ends the job over a frame of this peer that the protocol does
// not allow, and the connection with it: the abort that says why is queued
// first (fail) and written before the connection closes, so the sender
// learns the code instead of seeing a closed connection, which it would
// take for a loss. Nothing more is read from the peer.
func (p *peer) refuse(err error) {
	p.up.refused(p.rank, err) // before gone: tell skips peers that are gone
	p.gone.Store(true)
	go p.closeGracefully(time.Second) // not on the reading goroutine: it may be a receiver's
}

// close ends the connection; safe more than once.
func (p *peer) close() {
	p.closeOnce.Do(func() {
		p.gone.Store(true) // its reader may stop before it reads the end: nobody waits for it again
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
	})
}
