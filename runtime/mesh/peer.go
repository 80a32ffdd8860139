package mesh

import (
	"bufio"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"time"

	"sperli/codes"
	"sperli/runtime/bufpool"
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

// BufSize is the buffer of a link's reader and of its writer: one TLS
// record's plaintext (at most 16 KiB), so that a read from TLS fills it
// and small frames go out a record at a time; a larger frame passes by
// both buffers. 64 KiB measured no faster and cost a rank of a thousand
// 1.6 MiB of heap for its 13 links (docs/scale.md). A variable only so
// that the simulation of many slots in one process can make it smaller
// (runtime/sim_test.go); nothing else sets it.
var BufSize = 16 << 10

// FrameCost is the credit a frame of an n-byte payload consumes.
func FrameCost(n int) int64 { return int64(n) + frameOverhead }

// Counted reports whether frames of type t consume credit.
func Counted(t wire.Type) bool {
	return t == wire.Data || t == wire.Checkpoint || t == wire.Collective
}

// Frame is a frame to write. Done, when not nil, is closed once the
// frame is written to the connection (or failed, Err set before).
type Frame struct {
	H       wire.Header
	Head    []byte // written before Payload, with it the frame's payload (a gather list: no copy)
	Payload []byte
	Counted bool // consumes credit
	Done    chan struct{}
	Err     error
}

func (f *Frame) cost() int64 {
	if !f.Counted {
		return 0
	}
	return FrameCost(len(f.Head) + len(f.Payload))
}

// Peer is one connection of the full mesh. Writing is serialised by wmu:
// a sending goroutine writes its own data frame directly when nothing is
// queued before it and credit allows (the latency path); otherwise the
// frame waits in pending for the writer goroutine, which also writes every
// control frame, so that no caller of Control ever blocks. The reader
// goroutine is the only code that reads, beside a receiver in ReadFor.
type Peer struct {
	sh   *Shared
	up   Sink // all the connection tells the layer above it
	slot int  // the peer's slot (its rank at launch; it names the connection for life)
	conn net.Conn

	qmu        sync.Mutex // guards the queues and credit below
	ctlq       []*Frame   // control frames: heartbeat, credit, abort, silence
	ctlFree    []*Frame   // control frames written, to be used again
	ctlSpare   []*Frame   // the array of a ctlq the writer gave back
	pending    []*Frame   // ordered frames (data, collective, bye) not yet taken
	credit     int64      // bytes the peer can still take (SPEC §6)
	direct     int        // direct writes under way
	writerData int        // ordered frames the writer took and is writing
	werr       error      // the first write error
	last       *Frame     // CloseTelling's frame: written after every other, and nothing after it
	// The writer goroutine runs while there is something to write and
	// ends when the queues are empty: an idle link holds no goroutine
	// for writing (docs/design.md). writing: one runs; stopping: the
	// peer closes, the next run drains, writes last and ends for good
	// (ended, writerDone closed).
	writing, stopping, ended bool
	runWriter                func() // p.writeRun, made at the first start

	wmu      sync.Mutex    // guards bw, cork and the connection's write side
	lastSent bool          // last was written: nothing more is (wmu)
	bw       *bufio.Writer // made at the first batch above smallBatch
	cork     *corkConn     // below TLS, or nil
	hb       [wire.HeaderSize]byte

	rkick chan struct{} // wakes the reader goroutine out of its grace (ReadSoon) or its wait for a receiver's read (ReadFor)
	stop  chan struct{} // closed when the peer closes: the reader stops (the writer: stopping)

	rmu        sync.Mutex // held by whoever reads
	rs         readState
	foreground atomic.Int64 // unix nanoseconds a receiver last read or was served
	bgReading  atomic.Bool  // the reader goroutine holds rmu
	fgReading  atomic.Bool  // a receiver holds rmu (ReadFor)
	bgLooks    atomic.Int64 // turns of the reader goroutine's loop (tests)

	lastHeard  atomic.Int64  // unix nanoseconds of the last frame read
	frames     atomic.Int64  // frames read
	silenceMS  atomic.Int64  // the peer's announced silence limit
	bye        atomic.Bool   // the peer said bye
	gone       atomic.Bool   // the connection is finished (bye read, broken or closed): setGone
	goneC      chan struct{} // closed when gone is set
	umu        sync.Mutex    // guards unreturned
	unreturned int64         // credit consumed and not yet returned
	held       atomic.Int64  // credit the peer has used and not had back: read minus returned

	wg         sync.WaitGroup
	writerDone chan struct{}
	closeOnce  sync.Once

	// amu orders Attach and Close: a connection attached after the peer
	// was closed is closed at once. attached is set once conn, bw and
	// cork are in place (a peer made by NewPending has none before).
	amu       sync.Mutex
	attached  atomic.Bool
	reading   atomic.Bool   // the reader started (StartReading)
	closed    bool          // under amu
	ready     chan struct{} // closed when attached or closed
	readyOnce sync.Once
}

// Shared is what every connection of a rank reads from the rank: its own
// slot (stamped on every frame), whether reads spin (ReadFor may take
// reading over from the reader goroutine), the count of large writes
// under way (the spin budget's hint, spin.go) and the clock that stamps
// what was heard when (the failure detector's).
type Shared struct {
	Self    int
	Spins   bool
	Writing atomic.Int32
	Now     func() time.Time
}

// Sink is all a connection tells the layer above it, and the little it
// asks of it: a frame arrived, the connection was lost, the peer broke the
// protocol; whether broken connections are expected now, the generation
// its control frames are stamped with, and the current generation's end
// (for a sender that waits). Each Peer has a Sink of its own; the peer
// calls nothing else above it.
type Sink interface {
	// Arrive takes a frame read from the peer; an error refuses the peer
	// (Refused). The payload is the receiver's (bufpool.Put when done).
	Arrive(h wire.Header, payload []byte) error
	// Lost says the connection broke without a bye.
	Lost(why string)
	// Refused ends the job over a frame of the peer that the protocol
	// does not allow (err says which).
	Refused(err error)
	// Closing reports whether Finish or Close is under way: the reader
	// goes on reading what Finish waits for after the peer was stopped.
	Closing() bool
	// Expected reports whether broken connections are the job's end now
	// (closing, or the job is over), not a loss.
	Expected() bool
	// Gen is the generation control frames are stamped with.
	Gen() uint32
	// Dead is closed when the current generation ended; the function
	// says how.
	Dead() (<-chan struct{}, func() error)
}

// New is the peer of slot over conn, which has finished its handshake;
// Start begins reading and writing. silenceMS is the peer's announced
// silence limit.
func New(sh *Shared, up Sink, slot int, conn net.Conn, silenceMS uint32) *Peer {
	p := NewPending(sh, up, slot)
	p.setConn(conn, silenceMS)
	return p
}

// NewPending is the peer of slot before its connection is made (links on
// demand, SPEC §18): frames sent to it wait in its queues, in order, and
// go out first once Attach gives it its connection; nothing is read from
// it before. Its silence counts from now, so a connection that is never
// made is a peer that stays silent.
func NewPending(sh *Shared, up Sink, slot int) *Peer {
	p := &Peer{
		sh:         sh,
		up:         up,
		slot:       slot,
		credit:     Window,
		rkick:      make(chan struct{}, 1),
		stop:       make(chan struct{}),
		writerDone: make(chan struct{}),
		ready:      make(chan struct{}),
		goneC:      make(chan struct{}),
	}
	p.lastHeard.Store(sh.Now().UnixNano())
	return p
}

// Ready is closed once the peer has its connection, or was closed
// without one.
func (p *Peer) Ready() <-chan struct{} { return p.ready }

func (p *Peer) setReady() { p.readyOnce.Do(func() { close(p.ready) }) }

// setConn gives the peer its connection (before it is attached).
func (p *Peer) setConn(conn net.Conn, silenceMS uint32) {
	p.conn = conn
	if nc, ok := conn.(interface{ NetConn() net.Conn }); ok {
		p.cork, _ = nc.NetConn().(*corkConn)
	}
	p.silenceMS.Store(int64(silenceMS))
	p.lastHeard.Store(p.sh.Now().UnixNano())
}

// Attach gives a peer made by NewPending its connection, which has
// finished its handshake, and starts reading and writing: the frames
// queued meanwhile are written first, in order. It reports false, closing
// conn, when the peer was closed meanwhile or has a connection already.
func (p *Peer) Attach(conn net.Conn, silenceMS uint32) bool {
	if !p.AttachWriting(conn, silenceMS) {
		return false
	}
	p.StartReading()
	return true
}

// AttachWriting is Attach without reading: the peer writes (what was
// queued, then heartbeats and the rest) and reads nothing until
// StartReading, so that what the peer sends waits in the connection (a
// join that is not done yet).
func (p *Peer) AttachWriting(conn net.Conn, silenceMS uint32) bool {
	p.amu.Lock()
	defer p.amu.Unlock()
	if p.closed || p.attached.Load() {
		conn.Close()
		return false
	}
	p.wmu.Lock()
	p.setConn(conn, silenceMS)
	p.wmu.Unlock()
	p.qmu.Lock()
	p.attached.Store(true)
	p.qmu.Unlock()
	p.wake() // what was queued meanwhile
	p.setReady()
	return true
}

// StartReading starts the reader of a peer attached by AttachWriting;
// silence counts from now. It does nothing for a closed peer, or twice.
func (p *Peer) StartReading() {
	p.amu.Lock()
	defer p.amu.Unlock()
	if p.closed || !p.attached.Load() || p.reading.Load() {
		return
	}
	p.lastHeard.Store(p.sh.Now().UnixNano())
	p.reading.Store(true)
	p.wg.Add(1)
	go p.readLoop()
}

// Attached reports whether the peer has its connection.
func (p *Peer) Attached() bool { return p.attached.Load() }

// Slot is the peer's slot.
func (p *Peer) Slot() int { return p.slot }

// Gone reports whether the connection is finished (bye read, broken or
// closed).
func (p *Peer) Gone() bool { return p.gone.Load() }

// GoneC is closed once the peer is gone (Gone): a wait for a peer's end
// is woken by it, not by polling Gone.
func (p *Peer) GoneC() <-chan struct{} { return p.goneC }

// setGone marks the connection finished, once.
func (p *Peer) setGone() {
	if !p.gone.Swap(true) {
		close(p.goneC)
	}
}

// Bye reports whether the peer said bye; SetBye records that it did.
func (p *Peer) Bye() bool { return p.bye.Load() }
func (p *Peer) SetBye()   { p.bye.Store(true) }

// LastHeard is when a byte of the peer was last read, in unix
// nanoseconds of the Shared clock; SetLastHeard restarts it.
func (p *Peer) LastHeard() int64       { return p.lastHeard.Load() }
func (p *Peer) Frames() int64          { return p.frames.Load() }
func (p *Peer) SetLastHeard(ns int64)  { p.lastHeard.Store(ns) }
func (p *Peer) SilenceMS() int64       { return p.silenceMS.Load() }
func (p *Peer) SetSilenceMS(ms uint32) { p.silenceMS.Store(int64(ms)) }

// Unread reports whether bytes of the peer's wait in this process's
// socket, not yet read: the peer spoke, and it is this process that has
// not read it yet. A peer not attached has no connection to ask.
func (p *Peer) Unread() bool {
	return p.attached.Load() && (unreadBytes(below(p.conn)) > 0 || p.cork != nil && p.cork.gulped() > 0)
}

// MarkForeground tells the reader goroutine that a receiver was served
// now: it stays away a grace period.
func (p *Peer) MarkForeground() { p.foreground.Store(time.Now().UnixNano()) }

// Wait waits for the reader and writer goroutines to end (after Close).
func (p *Peer) Wait() { p.wg.Wait() }

// Outstanding is the credit the peer has used that is neither returned
// nor waiting to be: what frames still buffered above hold.
func (p *Peer) Outstanding() int64 {
	p.umu.Lock()
	defer p.umu.Unlock()
	return p.held.Load() - p.unreturned
}

// Consumed counts credit consumed from the peer's window (a frame the
// layer above has done with, FrameCost of its payload) and returns it in
// batches.
func (p *Peer) Consumed(cost int64) {
	p.umu.Lock()
	defer p.umu.Unlock()
	p.unreturned += cost
	if p.unreturned >= creditBatch {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(p.unreturned))
		p.held.Add(-p.unreturned)
		p.unreturned = 0
		p.Control(wire.Credit, b[:])
	}
}

// Start begins reading and writing a peer made by New.
func (p *Peer) Start() {
	p.amu.Lock()
	defer p.amu.Unlock()
	p.qmu.Lock()
	p.attached.Store(true)
	p.qmu.Unlock()
	p.reading.Store(true)
	p.wg.Add(1)
	go p.readLoop()
	p.wake()
	p.setReady()
}

// wake starts the writer goroutine if there is work for it and none runs.
// A writer that runs sees what was queued before (it looks again under qmu
// before it ends).
func (p *Peer) wake() {
	p.qmu.Lock()
	start := !p.writing && !p.ended && p.attached.Load() && (len(p.ctlq) > 0 || len(p.pending) > 0 || p.stopping)
	if start {
		p.writing = true
		p.wg.Add(1)
		if p.runWriter == nil {
			p.runWriter = p.writeRun // made once: go p.writeRun() allocates a closure each time
		}
	}
	run := p.runWriter
	p.qmu.Unlock()
	if start {
		go run()
	}
}

// stopWriting has the writer drain what it may, write CloseTelling's frame
// and end for good (writerDone).
func (p *Peer) stopWriting() {
	p.qmu.Lock()
	p.stopping = true
	p.qmu.Unlock()
	p.wake()
}

// maxControl bounds the control frames queued for a connection.
const maxControl = 1024

// Control queues a control frame for the writer and returns at once.
func (p *Peer) Control(t wire.Type, payload []byte) { p.ControlOf(p.up.Gen(), t, payload) }

// ControlOf queues a control frame of generation gen.
func (p *Peer) ControlOf(gen uint32, t wire.Type, payload []byte) {
	p.qmu.Lock()
	// A stuck connection drops control frames (silence then tells), but
	// not the relays of agreement messages: the coordinator of a large
	// job sends one through its children for each slot, and the relays
	// a slot passes on are bounded by what honest slots sent (repeats
	// are dropped, runtime/relay.go).
	if p.last == nil && (len(p.ctlq) < maxControl || t == wire.Relay) {
		var f *Frame
		if n := len(p.ctlFree); n > 0 {
			f, p.ctlFree = p.ctlFree[n-1], p.ctlFree[:n-1]
		} else {
			f = new(Frame)
		}
		f.H = wire.Header{Type: t, Incarnation: gen, Length: uint32(len(payload))}
		f.Payload = payload
		if p.ctlq == nil {
			p.ctlq, p.ctlSpare = p.ctlSpare, nil
		}
		p.ctlq = append(p.ctlq, f)
	}
	p.qmu.Unlock()
	p.wake()
}

// maxFreeControl bounds the written control frames a connection keeps to
// use again: enough for a heartbeat and the news of a step.
const maxFreeControl = 8

// recycle keeps ctl, control frames written, and their array for the
// frames to come, so that a link's heartbeats allocate nothing (an idle
// rank's heap then stays as it was once joined). Call with qmu held.
func (p *Peer) recycle(ctl []*Frame) {
	for i, f := range ctl {
		*f = Frame{}
		if len(p.ctlFree) < maxFreeControl {
			p.ctlFree = append(p.ctlFree, f)
		}
		ctl[i] = nil
	}
	if p.ctlSpare == nil && cap(ctl) <= maxFreeControl {
		p.ctlSpare = ctl[:0]
	}
}

// Final queues the abort that ends the job behind the ordered frames
// already queued that credit lets out, so that what this rank said before
// it ended — above all a collective's void (SPEC §8.3) — reaches the peer
// before the abort does. Frames that would wait for credit are given up:
// the job is over, and nothing may hold its abort back.
func (p *Peer) Final(t wire.Type, payload []byte) {
	f := &Frame{H: wire.Header{Type: t, Incarnation: p.up.Gen(), Length: uint32(len(payload))}, Payload: payload}
	var dropped []*Frame
	p.qmu.Lock()
	if p.last != nil {
		p.qmu.Unlock()
		return
	}
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
	done(dropped, ErrJobOver)
	p.wake()
}

// ErrJobOver is the write error of frames given up when the job ended; the
// caller reports the job's end instead.
var ErrJobOver = errors.New("the job ended before the frame was sent")

// AddCredit records credit the peer returned (reader goroutine). Credit
// beyond what this rank has used is a protocol violation.
func (p *Peer) AddCredit(n uint64) error {
	p.qmu.Lock()
	if n == 0 || n > uint64(Window-p.credit) {
		used := Window - p.credit
		p.qmu.Unlock()
		return codes.Violation(p.slot, "it returned %d bytes of credit, this rank has used %d", n, used)
	}
	p.credit += int64(n)
	more := len(p.pending) > 0
	p.qmu.Unlock()
	if more {
		p.wake()
	}
	return nil
}

// Send writes an ordered frame: directly from the calling goroutine when
// nothing is queued before it and credit allows (wait or not), else by the
// writer. With wait it returns when the frame is written; without, at once
// (f.Done tells when).
func (p *Peer) Send(f *Frame, wait bool) error {
	return p.sendAs(f, wait, wait)
}

// Post writes an ordered frame directly from the calling goroutine when
// nothing is queued before it and credit allows, else hands it to the
// writer and returns at once (f.Done tells when it is written). It is how
// a collective sends its small frames: no goroutine handoff on the latency
// path, and no wait where the writer must do it.
func (p *Peer) Post(f *Frame) error { return p.sendAs(f, true, false) }

func (p *Peer) sendAs(f *Frame, direct, wait bool) error {
	cost := f.cost()
	p.qmu.Lock()
	if err := p.werr; err != nil {
		p.qmu.Unlock()
		return err
	}
	if p.last != nil {
		p.qmu.Unlock()
		return ErrLeft
	}
	if direct && p.attached.Load() && len(p.pending) == 0 && p.writerData == 0 && p.credit >= cost {
		p.credit -= cost
		p.direct++
		p.qmu.Unlock()
		// A large frame written here counts as the writer goroutine's do:
		// while it is sealed and written, this process's reads do not
		// spin (fdconn_linux.go), since the sealing needs the processor
		// (measured: a sender of 1 MiB messages spent 4% of its time in
		// its reader goroutine's empty polls, issue 49).
		large := len(f.Head)+len(f.Payload) >= corkMin
		if large {
			p.sh.Writing.Add(1)
		}
		p.wmu.Lock()
		err := ErrLeft // the last frame went out before this one could
		if !p.lastSent {
			err = p.writeBatch([]*Frame{f})
		}
		p.wmu.Unlock()
		if large {
			p.sh.Writing.Add(-1)
		}
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
		if f.Done != nil {
			f.Err = err
			close(f.Done)
		}
		return err
	}
	p.pending = append(p.pending, f)
	starved := p.credit < cost
	p.qmu.Unlock()
	p.wake()
	if starved {
		p.ReadSoon() // the credit comes in a frame someone must read
	}
	if !wait || f.Done == nil {
		return nil
	}
	dead, deadErr := p.up.Dead()
	select {
	case <-f.Done:
		return f.Err
	case <-dead:
		select {
		case <-f.Done:
			return f.Err
		default:
			return deadErr()
		}
	}
}

// Enqueue hands an ordered frame to the writer and returns at once.
func (p *Peer) Enqueue(f *Frame) error { return p.Send(f, false) }

// writeFrame writes one frame into bw, corking the connection below TLS
// for a large one (cork.go). Call with wmu held.
func (p *Peer) writeFrame(f *Frame) error {
	if len(f.Head)+len(f.Payload) >= corkMin && p.cork != nil {
		p.cork.cork()
	}
	p.stamp(f)
	if p.bw == nil {
		p.bw = newWriter(p.conn)
	}
	if _, err := p.bw.Write(p.hb[:]); err != nil {
		return err
	}
	if _, err := p.bw.Write(f.Head); err != nil {
		return err
	}
	_, err := p.bw.Write(f.Payload)
	return err
}

// smallBatch is the most bytes a batch of frames has to go out without
// the link's write buffer. Most links of a large job carry only small
// frames — heartbeats, news, a collective's few bytes — and a buffer of
// BufSize held by each for the job's life was a tenth of a simulated
// slot's heap (docs/scale.md): a link makes its buffer at the first batch
// larger than this, and until then writes each batch from a small pooled
// one, in one write (one TLS record) as a flush of the buffer would.
const smallBatch = 1024

var smallBufs = sync.Pool{New: func() any { b := make([]byte, 0, smallBatch); return &b }}

// batchBytes is the bytes the frames of a batch take on the wire, or more
// than smallBatch once it knows them to be more.
func batchBytes(batches ...[]*Frame) int {
	n := 0
	for _, fs := range batches {
		for _, f := range fs {
			if n += wire.HeaderSize + len(f.Head) + len(f.Payload); n > smallBatch {
				return n
			}
		}
	}
	return n
}

// writeBatch writes frames, the batches in order, and flushes them. Call
// with wmu held.
func (p *Peer) writeBatch(batches ...[]*Frame) error {
	if p.bw == nil && batchBytes(batches...) <= smallBatch {
		return p.writeSmall(batches...)
	}
	for _, fs := range batches {
		for _, f := range fs {
			if err := p.writeFrame(f); err != nil {
				return err
			}
		}
	}
	return p.flush()
}

// writeSmall writes a batch of at most smallBatch bytes in one write. Call
// with wmu held.
func (p *Peer) writeSmall(batches ...[]*Frame) error {
	bp := smallBufs.Get().(*[]byte)
	b := (*bp)[:0]
	for _, fs := range batches {
		for _, f := range fs {
			p.stamp(f)
			b = append(append(append(b, p.hb[:]...), f.Head...), f.Payload...)
		}
	}
	_, err := p.conn.Write(b)
	*bp = b[:0]
	smallBufs.Put(bp)
	return err
}

// stamp puts f's header, with this slot as its source, into hb (the
// generation was set by who made the frame). Call with wmu held.
func (p *Peer) stamp(f *Frame) {
	f.H.Source = uint32(p.sh.Self)
	f.H.Put(p.hb[:])
}

// newWriter is a link's write buffer, made at its first write. Borrowing
// one from a pool for each batch and giving it back at the flush, so that
// an idle link held none, made a stream of 1 MiB frames 10-14 % slower
// (BenchmarkRate1MiB, docs/benchmarks.md), and was not kept.
func newWriter(w io.Writer) *bufio.Writer { return bufio.NewWriterSize(w, BufSize) }

// flush writes out what bw holds and what the cork gathered. Call with wmu
// held.
func (p *Peer) flush() error {
	var err error
	if p.bw != nil {
		err = p.bw.Flush()
	}
	if p.cork != nil {
		if uerr := p.cork.uncork(); err == nil {
			err = uerr
		}
	}
	return err
}

// take removes the control frames and the ordered frames that credit
// allows, unless a direct write is under way. Call with qmu held.
func (p *Peer) take() (ctl, data []*Frame) {
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
		data = append([]*Frame(nil), p.pending[:n]...)
		copy(p.pending, p.pending[n:])
		for i := len(p.pending) - n; i < len(p.pending); i++ {
			p.pending[i] = nil
		}
		p.pending = p.pending[:len(p.pending)-n]
	}
	p.writerData += len(data)
	return ctl, data
}

func (p *Peer) writeRun() {
	defer p.wg.Done()
	for {
		p.qmu.Lock()
		ctl, data := p.take()
		werr := p.werr
		if len(ctl) == 0 && len(data) == 0 {
			if !p.stopping {
				p.writing = false
				p.qmu.Unlock()
				return
			}
			p.qmu.Unlock()
			p.writeLast()
			p.qmu.Lock()
			p.writing, p.ended = false, true
			p.qmu.Unlock()
			close(p.writerDone)
			return
		}
		p.qmu.Unlock()
		err := werr
		large := 0
		for _, f := range data {
			large += len(f.Head) + len(f.Payload)
		}
		if large >= corkMin {
			p.sh.Writing.Add(1)
		}
		if err == nil {
			p.wmu.Lock()
			err = p.writeBatch(ctl, data)
			p.wmu.Unlock()
		}
		if large >= corkMin {
			p.sh.Writing.Add(-1)
		}
		p.qmu.Lock()
		p.writerData -= len(data)
		if err != nil && p.werr == nil {
			p.werr = err
		}
		p.recycle(ctl)
		p.qmu.Unlock()
		done(data, err)
	}
}

// done tells the senders of frames that wait for them (Done) that they
// were written (err nil) or why not.
func done(frames []*Frame, err error) {
	for _, f := range frames {
		if f.Done != nil {
			f.Err = err
			close(f.Done)
		}
	}
}

// writeLast writes CloseTelling's frame, if any, after everything the
// writer and the direct writers sent; no frame is written after it.
func (p *Peer) writeLast() {
	p.qmu.Lock()
	f, err := p.last, p.werr
	p.qmu.Unlock()
	if f == nil {
		return
	}
	p.wmu.Lock()
	p.lastSent = true
	if err == nil {
		err = p.writeBatch([]*Frame{f})
	}
	p.wmu.Unlock()
	// What credit held back is never written: its senders learn so.
	p.qmu.Lock()
	if p.werr == nil {
		p.werr = cmp.Or(err, ErrLeft)
	}
	held := p.pending
	p.pending = nil
	p.qmu.Unlock()
	done(held, ErrLeft)
}

// Reading. Whoever holds rmu reads whole frames from the connection and
// dispatches them: a goroutine waiting in Recv or in a collective for this
// peer reads itself (the latency path: the message wakes the goroutine
// that wants it, with no handoff; where reads spin it takes reading over
// from the reader goroutine, takeOver), and the reader goroutine reads
// whenever no receiver has read in the last readGrace, so that heartbeats
// and aborts are never left unread for long. Waits that need the reader
// goroutine now — a wildcard receive, credit for a held-back send, the
// byes of Finish — call ReadSoon, which ends its grace at once. The grace
// is long because the reader goroutine's timer is a wake-up of an idle
// thread each time it fires, and a wake-up costs a spinning receiver as
// much as a round trip. A read
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

func (p *Peer) readLoop() {
	defer p.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	stop := p.stop
	for !p.gone.Load() {
		p.bgLooks.Add(1)
		if wait := readGrace - time.Duration(time.Now().UnixNano()-p.foreground.Load()); wait > 0 {
			t.Reset(wait)
			select {
			case <-t.C:
			case <-p.rkick:
			case <-stop:
				// Stopped: keep reading only what Finish still waits for.
				// The stop is seen: waiting on it again would return at
				// once, and the loop would spin until the grace ended.
				if p.up.Closing() && !p.gone.Load() {
					stop = nil
					continue
				}
				return
			}
			continue
		}
		if !p.rmu.TryLock() {
			// A receiver is reading: it dispatches every frame it reads, so
			// stay away rather than queue on the lock (which would hand the
			// next frame to this goroutine) until it lets go (ReadFor kicks
			// rkick then), and a grace period after. Not a look every grace
			// period: a rank waiting in a collective for a slow peer held
			// its connection for seconds, and the reader's timer woke its
			// idle process a hundred times a second (at 1,024 ranks on two
			// processors, 5 ms of processor time a second a waiting rank).
			p.foreground.Store(time.Now().UnixNano())
			if p.fgReading.Load() {
				select {
				case <-p.rkick:
				case <-stop:
					if p.up.Closing() && !p.gone.Load() {
						stop = nil
						continue
					}
					return
				}
			}
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

// ReadSoon makes the reader goroutine read now if no receiver holds the
// connection, rather than after its grace.
func (p *Peer) ReadSoon() {
	p.foreground.Store(0)
	select {
	case p.rkick <- struct{}{}:
	default:
	}
}

// readOne reads and dispatches one frame. Call with rmu held. It reports
// false when the connection is finished (p.gone is then set).
func (p *Peer) readOne() bool {
	rs := &p.rs
	for rs.hn < wire.HeaderSize {
		n, err := p.conn.Read(rs.hb[rs.hn:])
		rs.hn += n
		p.heard(n)
		if err != nil && rs.hn < wire.HeaderSize {
			return p.readErr(err)
		}
	}
	if rs.pn == 0 && rs.payload == nil {
		h, err := wire.Decode(rs.hb[:], p.slot)
		if err != nil {
			p.readFailed(err)
			return false
		}
		if Counted(h.Type) {
			// The window is enforced on the header, before the payload
			// is allocated or read.
			if held := p.held.Add(FrameCost(int(h.Length))); held > Window {
				p.Refuse(codes.Violation(p.slot, "it sent a %s frame of %d bytes past its credit: %d bytes unconsumed, window %d", h.Type, h.Length, held, Window))
				return false
			}
		}
		rs.h = h
		rs.payload = bufpool.Get(int(h.Length)) // filled whole before use
		if len(rs.payload) >= corkMin && p.cork != nil {
			p.cork.setGulp(true) // few large reads below TLS (gulp.go)
		}
	}
	for rs.pn < len(rs.payload) {
		n, err := p.conn.Read(rs.payload[rs.pn:])
		rs.pn += n
		p.heard(n)
		if err != nil && rs.pn < len(rs.payload) {
			return p.readErr(err)
		}
	}
	if len(rs.payload) >= corkMin && p.cork != nil {
		p.cork.setGulp(false)
	}
	h, payload := rs.h, rs.payload
	rs.hn, rs.pn, rs.payload = 0, 0, nil
	p.frames.Add(1)
	if len(payload) == 0 {
		payload = nil
	}
	if err := p.up.Arrive(h, payload); err != nil {
		p.Refuse(err)
		return false
	}
	if h.Type == wire.Bye {
		p.setGone()
		return false
	}
	return true
}

// heard records that n bytes came from the peer: a peer in the middle of a
// large frame is alive, whole frames or not.
func (p *Peer) heard(n int) {
	if n > 0 {
		p.lastHeard.Store(p.sh.Now().UnixNano())
	}
}

// readErr handles a read error in the middle of readOne: a deadline only
// interrupts (the partial frame stays in rs); anything else ends reading.
func (p *Peer) readErr(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		p.conn.SetReadDeadline(time.Time{})
		return !p.gone.Load()
	}
	p.readFailed(err)
	return false
}

// Interrupt makes a blocked read return (it goes on later).
func (p *Peer) Interrupt() {
	if p.attached.Load() {
		p.conn.SetReadDeadline(time.Unix(1, 0))
	}
}

// ReadFor reads this peer's frames from the calling goroutine until done is
// closed, the connection ends, the job ends or ctx ends, if no other
// goroutine is reading; it reports whether it read.
func (p *Peer) ReadFor(ctx context.Context, done <-chan struct{}) bool {
	if !p.reading.Load() {
		return false // nothing to read yet: its frames come once it reads
	}
	if !p.rmu.TryLock() && (!p.sh.Spins || !p.takeOver()) {
		return false
	}
	p.fgReading.Store(true)
	stop := func() bool { return false }
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, p.Interrupt)
	}
	dead, _ := p.up.Dead()
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
	p.fgReading.Store(false)
	p.foreground.Store(time.Now().UnixNano())
	p.rmu.Unlock()
	select {
	case p.rkick <- struct{}{}: // the reader goroutine waits for the lock's release
	default:
	}
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
func (p *Peer) takeOver() bool {
	p.foreground.Store(time.Now().UnixNano())
	for i := 0; i < takeOverTries; i++ {
		if !p.bgReading.Load() {
			return p.rmu.TryLock()
		}
		p.Interrupt()
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
func (p *Peer) readFailed(err error) {
	if p.bye.Load() || p.up.Expected() {
		// The job is over already: connections closing now are its end,
		// not a new loss.
		p.setGone()
		return
	}
	if ce := codes.As(err); ce != nil {
		// Not gone before the Sink's Refused: its abort goes to this
		// peer too, which would otherwise see a loss (Refuse).
		ce.Rank = p.slot
		p.Refuse(ce)
		return
	}
	p.setGone()
	why := "connection broke without bye"
	if errors.Is(err, io.EOF) {
		why = "connection closed without bye"
	}
	p.up.Lost(why)
}

// Refuse ends the job over a frame of this peer that the protocol does
// not allow, and the connection with it: the abort that says why is
// queued first (the Sink's Refused) and written before the connection
// closes, so the sender learns the code instead of seeing a closed
// connection, which it would take for a loss. Nothing more is read from the peer.
func (p *Peer) Refuse(err error) {
	p.up.Refused(err) // before gone: tell skips peers that are gone
	p.setGone()
	go p.CloseGracefully(time.Second) // not on the reading goroutine: it may be a receiver's
}

// Close ends the connection; safe more than once. The frames of a peer
// that was never attached fail with ErrNoLink.
func (p *Peer) Close() {
	p.closeOnce.Do(func() {
		p.setGone() // its reader may stop before it reads the end: nobody waits for it again
		close(p.stop)
		if p.detach() {
			p.stopWriting()
			p.conn.Close()
		}
	})
}

// CloseTelling closes the connection with the control frame t as the
// last frame on it: after what was queued before (as far as credit lets
// it out), and nothing after — later frames are dropped, later sends fail
// with ErrLeft — so the peer may hold any frame that follows it for a
// lie. The writer sends it and the connection closes (waiting at most
// wait) on a goroutine of its own; the peer is gone at once.
func (p *Peer) CloseTelling(t wire.Type, payload []byte, wait time.Duration) {
	f := &Frame{H: wire.Header{Type: t, Incarnation: p.up.Gen(), Length: uint32(len(payload))}, Payload: payload}
	p.qmu.Lock()
	if p.last == nil {
		p.last = f
	}
	p.qmu.Unlock()
	p.setGone()
	go p.CloseGracefully(wait)
}

// ErrLeft is the write error of frames for a peer whose connection
// CloseTelling ends: the peer was told it was left.
var ErrLeft = errors.New("the connection is closing after its last frame")

// ErrNoLink is the write error of frames queued for a peer whose
// connection was never made.
var ErrNoLink = errors.New("no connection was made to the peer")

// detach marks the peer closed and reports whether it has a connection to
// close; a peer that has none fails its queued frames.
func (p *Peer) detach() bool {
	p.amu.Lock()
	p.closed = true
	up := p.attached.Load()
	p.amu.Unlock()
	p.setReady()
	if up {
		return true
	}
	p.qmu.Lock()
	p.ended = true
	close(p.writerDone)
	frames := p.pending
	p.pending, p.ctlq = nil, nil
	if p.werr == nil {
		p.werr = ErrNoLink
	}
	p.qmu.Unlock()
	done(frames, ErrNoLink)
	return false
}

// CloseGracefully stops the writer after it drained its control queue and
// flushed (waiting at most wait), then closes the connection and waits for
// the reader.
func (p *Peer) CloseGracefully(wait time.Duration) {
	p.closeOnce.Do(func() {
		close(p.stop)
		if !p.detach() {
			p.setGone()
			return
		}
		p.stopWriting()
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-p.writerDone:
		case <-t.C:
		}
		p.conn.Close()
	})
}
