package runtime

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"sperli/codes"
	"sperli/elastic"
	"sperli/job"
	"sperli/pki"
	"sperli/runtime/mesh"
	"sperli/wire"
)

// Comm is a rank's communicator: its place in a joined job. Its methods are
// safe for concurrent use by several goroutines (point-to-point calls from
// many goroutines work; collectives and checkpoints are serialised in the
// order the goroutines reach them, so their order across ranks is the
// caller's business).
type Comm struct {
	*core // the job's connections and state, shared by every communicator

	rank int // this rank's number in this communicator
	size int

	// A communicator made by Split: its id (0 for the job's), and the
	// job rank of each of its ranks (nil for the job's own).
	ctxID   uint32
	members []int
	local   map[int]int // job rank → rank here, for members
	subDone bool        // Finish was called on this sub-communicator; guarded by mu

	coll  collState
	collN int // collectives started in this incarnation

	revoked bool   // Revoke (ulfm.go); guarded by mu
	agreeN  uint32 // Agree calls made; guarded by mu
}

// core is what every communicator of one joined job shares: the
// connections, the matcher, the job's end, the monitor.
type core struct {
	*links // the connections by slot, the monitor: shared by every generation

	job  *Job
	inc  uint32        // the generation (SPEC §10.1): the incarnation of restarts, one more at each recovery
	spin time.Duration // the reads' spin limit (spin.go)

	world  *Comm
	layout elastic.Layout // the slot of each job rank of this generation (its links are the slots'), as runs

	failedSlots map[int]string // slots known lost with LossReturn (ulfm.go), and why; under mu
	agrees      agrees         // Agree instances (ulfm.go)
	jobPub      *pki.PublicKey
	jobPriv     *pki.PrivateKey // rank 0 only

	mu       sync.Mutex
	match    *matcher
	open     map[any]struct{} // open operations (*SendOp, *RecvOp)
	err      error            // why the communicator ended; set once, under mu
	ending   bool             // an end is telling the peers; err follows; under mu
	finished bool
	dead     chan struct{} // closed when err is set

	// Sub-communicators by id, and collective frames that came for an id
	// this rank has not made yet (the first frames of a call on a new
	// communicator may come before this rank's split returns). Both
	// guarded by mu; the frames hold their credit until taken.
	comms   map[uint32]*Comm
	early   map[uint32][]earlyFrame
	nextCtx uint32 // the lowest id this rank may give a new communicator

	ckpt     ckptState
	ckptMu   sync.Mutex    // one checkpoint or resume at a time
	failures []job.Failure // the test-only failure schedule

	fin finState // the end of the job in this generation (fin.go)

	// recovering is set when this generation was abandoned for the next
	// (SPEC §10.2): its end is not the job's. abandoned (under mu) stops
	// its consumption of credit once the next generation took it over.
	recovering atomic.Bool
	abandoned  bool
}

// Rank returns this rank's number, 0 … Size()-1.
func (c *Comm) Rank() int { return c.rank }

// Size returns the number of ranks in the job.
func (c *Comm) Size() int { return c.size }

// JobID returns the job's id (32 hex digits).
func (c *Comm) JobID() string { return c.job.ID }

// Incarnation returns the job's incarnation: 0, then one more at each restart.
func (c *Comm) Incarnation() uint32 { return c.inc }

// Job returns the job description the communicator was made from.
func (c *Comm) Job() *Job { return c.job }

// Finished reports whether Finish was called.
func (c *Comm) Finished() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.finished
}

// StaleDropped returns how many frames of another incarnation were dropped.
func (c *Comm) StaleDropped() int64 { return c.staleDropped.Load() }

// Spin is the spin limit of this rank's reads (spin.go): 0 when they block
// in Go's poller at once.
func (c *Comm) Spin() time.Duration { return c.spin }

func newComm(j *Job) *Comm {
	l := newLinks(j)
	l.rec = newRecovery(l, j) // its goroutine starts with the job (start)
	layout := elastic.Initial(j.Size, j.Spares)
	layout.Gen = int(j.Incarnation)
	c := l.genComm(j, j.Incarnation, layout)
	c.failures, _ = job.ParseFailures(j.Failures) // Validate checked it
	l.cur.Store(c)
	return c
}

// genComm makes the job's communicator of generation inc, in which rank r
// is slot layout.Slot(r); this slot is rank -1 in it when it is a spare.
// The connections are bound later (bind) when they are not there yet.
// Nothing here is O(ranks): a slot of a large job keeps its generations'
// layouts as runs (elastic.Layout).
func (l *links) genComm(j *Job, inc uint32, layout elastic.Layout) *Comm {
	co := &core{
		links:   l,
		job:     j,
		inc:     inc,
		layout:  layout,
		match:   newMatcher(layout.Size()),
		open:    make(map[any]struct{}),
		dead:    make(chan struct{}),
		comms:   make(map[uint32]*Comm),
		early:   make(map[uint32][]earlyFrame),
		nextCtx: 1,

		failedSlots: make(map[int]string),
	}
	co.fin.init()
	c := &Comm{core: co, rank: co.rankOf(l.self), size: layout.Size()}
	co.world = c
	co.comms[0] = c
	c.coll.init()
	return c
}

// rankOf is the job rank of slot s in this generation, -1 for a spare or a
// lost slot.
func (c *core) rankOf(s int) int {
	r, _ := c.layout.RankOf(s)
	return r
}

// from is the job rank in this generation of the slot p connects to, -1
// for a spare.
func (c *core) from(p *peer) int { return c.rankOf(p.rank) }

func (c *Comm) deadErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// end records why the communicator ended and wakes every waiter. It reports
// whether this call was the first (only the first cause is kept). With a
// reason, the first call also tells every peer (an abort frame) — before
// any waiter wakes or any call sees the end: a woken program may close the
// communicator at once, and a peer that read the connection's end before
// the abort would take this rank for lost. The abort is queued with no
// mutex held (nosend_test.go); a later call waits for the first's end.
func (c *Comm) end(err error, tell *wire.Reason) bool {
	c.mu.Lock()
	if c.err != nil || c.ending {
		c.mu.Unlock()
		<-c.dead // the first call is queuing its abort, which never waits
		return false
	}
	c.ending = true
	c.mu.Unlock()
	if tell != nil {
		c.tell(*tell)
	}
	c.mu.Lock()
	c.err = err
	close(c.dead)
	ops := c.match.all()
	c.mu.Unlock()
	for _, op := range ops {
		op.err = err
		close(op.done)
	}
	c.wakeAll()
	return true
}

// tell sends an abort frame with reason r on every link still up: each
// slot that learns of the end passes it on, so it reaches every slot
// (SPEC §18, news for all).
func (c *Comm) tell(r wire.Reason) {
	if c.links.outcast.Load() {
		return // the others went on without this slot: it has nothing to tell them
	}
	payload := wire.AppendReason(nil, r)
	for _, p := range c.links.peerList() {
		if !p.Gone() {
			p.Final(wire.Abort, payload)
		}
	}
}

// lost declares rank lost (SPEC §7): this rank returns H1611 and tells every
// other rank, which return H1612.
func (c *Comm) lost(rank int, why string) {
	err := codes.Lost("", rank, "rank %d lost: %s", rank, why)
	c.end(err, &wire.Reason{Code: codes.PeerLost, Cause: codes.CauseLost, Rank: int32(rank), Msg: err.Error()})
	if p := c.peerRank(rank); p != nil {
		p.Close()
	}
}

// fail ends the job because this rank failed with err (a mismatch, a bad
// frame, a program error): the others return H1612 with this cause.
func (c *Comm) fail(err error) {
	code := codes.Of(err)
	if !code.Valid() {
		code = codes.JobEnded
	}
	c.end(err, &wire.Reason{Code: code, Cause: codes.CauseFailed, Rank: int32(c.origin()), Msg: codes.OneLine(err.Error())})
}

// ended handles an abort frame from rank from.
//
// The message names the rank the cause is about (the frame's rank), not
// the rank the frame came from: an abort may reach this rank passed on by
// a third. For a loss that is the lost rank, and the text says who saw it.
func (c *Comm) ended(from int, r wire.Reason) {
	origin := int(r.Rank)
	msg := fmt.Sprintf("job ended by rank %d: %s", origin, r.Msg)
	switch r.Cause {
	case codes.CauseAborted:
		msg = fmt.Sprintf("job ended by rank %d: it called abort", origin)
	case codes.CauseLauncher:
		msg = fmt.Sprintf("job ended by rank %d: its launcher is gone", origin)
	case codes.CauseLost:
		msg = fmt.Sprintf("job ended by the loss of rank %d: %s", origin, r.Msg)
	}
	// The news is passed on, so that a rank that has not read the first
	// abort yet learns the cause, not a closed connection (which would look
	// like a loss).
	c.end(&codes.Error{
		Code:  codes.JobEnded,
		Rank:  from,
		Msg:   msg,
		Cause: &codes.Cause{Kind: r.Cause, Rank: int(r.Rank), Code: r.Code},
	}, &r)
}

// dispatch handles one frame read from p. It runs on p's reader goroutine;
// an error it returns ends the job with this rank as the failed one.
func (c *Comm) dispatch(p *peer, h wire.Header, payload []byte) error {
	from := c.from(p)
	if from < 0 && h.Type != wire.Abort && h.Type != wire.Bye && h.Type != wire.Fin {
		return violation(p.rank, "slot %d, a spare in generation %d, sent a %s frame", p.rank, c.inc, h.Type)
	}
	switch h.Type {
	case wire.Data, wire.Checkpoint:
		tag := h.Tag
		ctx := uint32(0)
		if h.Type == wire.Checkpoint {
			tag |= sysTag // the runtime's own messages (checkpoints, resume)
		} else if h.Seq > wire.MaxTag {
			return violation(from, "it sent a data frame of communicator %d, past every id (at most %d)", h.Seq, wire.MaxTag)
		} else {
			ctx = uint32(h.Seq) // the communicator (protocol.md §8.6)
		}
		msg := message{data: payload, cost: mesh.FrameCost(len(payload))}
		c.mu.Lock()
		ops := c.match.arrive(ctx, from, tag, msg)
		if n := len(ops); n > 0 && !ops[n-1].probe {
			c.consumedLocked(p, msg.cost)
			p.MarkForeground() // a receiver is active: let it read next
		}
		c.mu.Unlock()
		for _, op := range ops {
			close(op.done)
		}
	case wire.Bye:
		p.SetBye()
		if from >= 0 {
			c.peerFinished(p, from)
		}
		c.wakeAll()
		c.links.byeSeen()
	case wire.Fin:
		return c.finIn(p, payload)
	case wire.Abort:
		r, err := wire.DecodeReason(payload)
		if err != nil {
			return err
		}
		if r.Rank < 0 || int(r.Rank) >= c.links.slots || r.Cause == codes.CauseNone {
			return violation(p.rank, "it sent an abort about rank %d with cause %v (job of %d slots)", r.Rank, r.Cause, c.links.slots)
		}
		c.ended(from, r)
	case wire.Collective:
		return c.collFrameIn(p, h, payload)
	case wire.Revoke:
		return c.revokeIn(from, payload)
	case wire.Agree:
		return c.agreeIn(p, payload)
	default:
		return codes.New(codes.FrameMalformed, "rank %d sent a %s frame after the join", p.rank, h.Type)
	}
	return nil
}

// violation is the error for a frame or record of rank from that
// contradicts the protocol (H1627): the connection to it ends, and the job
// with it.
func violation(from int, format string, args ...any) *codes.Error {
	return codes.Violation(from, format, args...)
}

// consumedLocked counts credit consumed from p's window and returns it in
// batches. Call with c.mu held.
func (c *Comm) consumedLocked(p *peer, cost int64) {
	if p == nil || c.abandoned {
		return // an abandoned generation's frames were given back at the switch
	}
	p.Consumed(cost)
}

func (c *Comm) checkPeer(op string, rank int) error {
	if rank < 0 || rank >= c.size {
		return &codes.Error{Code: codes.OutOfRange, Op: op, Rank: -1, Msg: fmt.Sprintf("%s: rank %d is outside the job (size %d)", op, rank, c.size)}
	}
	return nil
}

func checkTag(op string, tag int) error {
	if tag < 0 || tag > wire.MaxTag {
		return &codes.Error{Code: codes.OutOfRange, Op: op, Rank: -1, Msg: fmt.Sprintf("%s: tag %d is outside 0 to %d", op, tag, wire.MaxTag)}
	}
	return nil
}

// String says what the operation is ("send to rank 1 tag 5").
func (op *SendOp) String() string {
	return fmt.Sprintf("send to rank %d tag %d", op.dest, op.f.H.Tag)
}

// String says what the operation is ("recv from rank 0 tag 4").
func (op *RecvOp) String() string {
	return fmt.Sprintf("recv from rank %d tag %d", op.r.src, op.r.tag)
}

// SendOp is an open send made by StartSend.
type SendOp struct {
	f        *mesh.Frame
	dest     int
	finished bool // guarded by Comm.mu
	busy     bool
}

// RecvOp is an open receive made by StartRecv.
type RecvOp struct {
	r    *recvOp
	c    *Comm
	busy bool
}

// Send sends data to rank dest with tag. It returns when the message is
// handed to the connection; it may block while the receiver's buffer for
// this rank is full (SPEC §6). From the call on, data belongs to the
// runtime: the caller must not change it. A dest or tag out of range, or
// data over 16 MiB, is H1616; a finished communicator is H1617.
func (c *Comm) Send(ctx context.Context, dest, tag int, data []byte) error {
	sp := traceBegin()
	err := c.sendNow(ctx, dest, tag, data)
	if sp.on() {
		sp.call("send", err, targ("to", c.worldRankOr(dest)), targ("tag", tag), targ("bytes", len(data)))
	}
	return err
}

// StartSend starts sending data to rank dest with tag and returns at once.
// Messages are sent in the order StartSend and Send are called. data
// belongs to the runtime from the call on. The operation must be finished
// with FinishSend exactly once.
func (c *Comm) StartSend(dest, tag int, data []byte) (*SendOp, error) {
	if err := c.checkSend("send", dest, tag, len(data)); err != nil {
		return nil, err
	}
	countSend(len(data))
	op := &SendOp{dest: dest}
	f := &mesh.Frame{H: wire.Header{Type: wire.Data, Incarnation: c.inc, Tag: uint32(tag), Seq: uint64(c.ctxID), Length: uint32(len(data))}, Payload: data, Counted: true, Done: make(chan struct{})}
	op.f = f
	c.mu.Lock()
	if err := c.callableLocked("send"); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	if err := c.peerFailedLocked("send", dest); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	if dest == c.rank {
		m := message{data: data}
		ops := c.match.arrive(c.ctxID, c.worldRank(c.rank), uint32(tag), m)
		c.open[op] = struct{}{}
		c.mu.Unlock()
		for _, r := range ops {
			close(r.done)
		}
		close(f.Done)
		return op, nil
	}
	p := c.linkAt(dest)
	if p.Finished() {
		c.mu.Unlock()
		return nil, &codes.Error{Code: codes.Finished, Op: "send", Rank: dest, Msg: fmt.Sprintf("send: rank %d has finished", dest)}
	}
	c.open[op] = struct{}{}
	c.mu.Unlock()
	if err := p.Enqueue(f); err != nil {
		f.Err = err
		close(f.Done)
	}
	return op, nil
}

// checkSend checks what op (send, sendrecv) sends: a peer of the
// communicator, a tag of the program's range, at most wire.MaxPayload bytes.
func (c *Comm) checkSend(op string, dest, tag, n int) error {
	if err := c.checkPeer(op, dest); err != nil {
		return err
	}
	if err := checkTag(op, tag); err != nil {
		return err
	}
	if n > wire.MaxPayload {
		return &codes.Error{Code: codes.OutOfRange, Op: op, Rank: -1, Msg: fmt.Sprintf("%s: message is %d bytes, limit %d", op, n, wire.MaxPayload)}
	}
	return nil
}

// sendNow is Send without an open operation: the latency path.
func (c *Comm) sendNow(ctx context.Context, dest, tag int, data []byte) error {
	if err := c.checkSend("send", dest, tag, len(data)); err != nil {
		return err
	}
	countSend(len(data))
	c.mu.Lock()
	if err := c.callableLocked("send"); err != nil {
		c.mu.Unlock()
		return err
	}
	if err := c.peerFailedLocked("send", dest); err != nil {
		c.mu.Unlock()
		return err
	}
	p := c.linkAt(dest)
	if dest == c.rank || p.Finished() {
		c.mu.Unlock()
		op, err := c.StartSend(dest, tag, data)
		if err != nil {
			return err
		}
		return c.FinishSend(ctx, op)
	}
	c.mu.Unlock()
	f := &mesh.Frame{H: wire.Header{Type: wire.Data, Incarnation: c.inc, Tag: uint32(tag), Seq: uint64(c.ctxID), Length: uint32(len(data))}, Payload: data, Counted: true, Done: make(chan struct{})}
	return c.linkErr("send", dest, p.Send(f, true))
}

// linkErrWait bounds how long a failed send waits for the loss to end its
// communicator; linkDrainWait how long it waits for the peer's reader to
// take what the peer sent before its connection broke.
const (
	linkErrWait   = 30 * time.Second
	linkDrainWait = time.Second
)

// linkErr is the error of a call whose frame to rank to of c could not be
// sent: a code, never a raw network error. The broken connection is a
// loss, declared now (as its reader would): under set_on_loss("return")
// the call returns it (H1611); otherwise the loss ends this communicator
// (in-place recovery, or the job's end) and that end is the call's
// outcome, as it is for a receive that waited.
func (c *Comm) linkErr(op string, to int, err error) error {
	if err == nil || codes.As(err) != nil {
		return err
	}
	if de := c.deadErr(); de != nil {
		return de
	}
	if p := c.peerAt(to); p != nil && !p.Finished() {
		// The peer may have ended with an abort (or said bye) that is
		// still unread: its reader takes what it sent first, so that the
		// job's end is told by its cause, not taken for a loss of the
		// peer that told it.
		p.ReadSoon()
		wait := time.NewTimer(linkDrainWait)
		select {
		case <-c.dead:
		case <-wait.C:
		case <-p.GoneC():
		}
		wait.Stop()
		if de := c.deadErr(); de != nil {
			return de
		}
		if !p.Finished() {
			p.l.lost(p.rank, "connection broke without bye")
		}
	}
	if !c.links.lossReturn.Load() {
		t := time.NewTimer(linkErrWait)
		defer t.Stop()
		select {
		case <-c.dead:
			return c.deadErr()
		case <-t.C:
		}
	}
	c.mu.Lock()
	e := c.peerFailedLocked(op, to)
	c.mu.Unlock()
	if e != nil {
		return e
	}
	return c.lostErr(op, to, fmt.Sprintf("the connection broke (%v)", err))
}

// FinishSend waits until the send is handed to the connection. Finishing an
// operation twice, or one of another communicator, is H1617. When ctx ends
// first, it returns ctx's error and the operation stays open.
func (c *Comm) FinishSend(ctx context.Context, op *SendOp) (err error) {
	if sp := traceBegin(); sp.on() {
		defer func() { sp.call("finish_send", err) }()
	}
	if op == nil {
		return codes.New(codes.Finished, "finish_send: no operation")
	}
	c.mu.Lock()
	if _, ok := c.open[op]; !ok || op.busy {
		c.mu.Unlock()
		if op.finished {
			return &codes.Error{Code: codes.Finished, Op: "finish_send", Rank: -1, Msg: fmt.Sprintf("finish_send: %s is already finished", op.String())}
		}
		return &codes.Error{Code: codes.Finished, Op: "finish_send", Rank: -1, Msg: fmt.Sprintf("finish_send: %s is not open", op.String())}
	}
	op.busy = true
	c.mu.Unlock()
	select {
	case <-op.f.Done:
		err = op.f.Err
	case <-c.dead:
		select {
		case <-op.f.Done:
			err = op.f.Err
		default:
			err = c.deadErr()
		}
	case <-ctx.Done():
		c.mu.Lock()
		op.busy = false
		c.mu.Unlock()
		return ctx.Err()
	}
	err = c.linkErr("send", op.dest, err)
	c.mu.Lock()
	delete(c.open, op)
	op.finished = true
	op.busy = false
	c.mu.Unlock()
	return err
}

// Recv returns the next message from rank source with tag. The returned
// slice belongs to the caller. A source or tag out of range is H1616; a
// lost peer is H1611 (H1612 when another rank saw the loss).
func (c *Comm) Recv(ctx context.Context, source, tag int) ([]byte, error) {
	sp := traceBegin()
	op, err := c.StartRecv(source, tag)
	var data []byte
	if err == nil {
		data, err = c.finishRecv(ctx, op, true)
	}
	if sp.on() {
		c.traceRecv(sp, "recv", op, err)
	}
	return data, err
}

// StartRecv posts a receive for the next message from source with tag and
// returns at once. Receives of one (source, tag) are matched in the order
// they are posted. The operation must be finished with FinishRecv once.
func (c *Comm) StartRecv(source, tag int) (*RecvOp, error) {
	r, err := c.recvOpFor("recv", source, tag)
	if err != nil {
		return nil, err
	}
	op := &RecvOp{r: r, c: c}
	c.mu.Lock()
	if err := c.callableLocked("recv"); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	if source != AnySource {
		if err := c.peerFailedLocked("recv", source); err != nil {
			c.mu.Unlock()
			return nil, err
		}
	}
	c.open[op] = struct{}{}
	if c.match.post(r) {
		c.consumedLocked(c.peerRank(r.gotSrc), r.cost)
		c.mu.Unlock()
		close(r.done)
		return op, nil
	}
	if p := c.peerOf(r); p != nil && p.Finished() {
		c.match.cancelFrom(r.src) // the job rank: the matcher's ranks are the job's
		c.mu.Unlock()
		r.err = &codes.Error{Code: codes.Finished, Op: "recv", Rank: source, Msg: fmt.Sprintf("recv: rank %d has finished: recv(%d, %s) can never be matched", source, source, map[bool]string{true: "ANY_TAG", false: fmt.Sprint(tag)}[tag == AnyTag])}
		close(r.done)
		return op, nil
	}
	r.lossesAtPost = len(c.failedSlots)
	c.mu.Unlock()
	return op, nil
}

// FinishRecv waits for the receive and returns its message, which belongs
// to the caller. Finishing twice is H1617. When ctx ends first, it returns
// ctx's error and the operation stays open (as MPI_Test leaves a request
// open): the message it matches is kept for it and a later FinishRecv
// returns it. An operation the program abandons is named by Finish (H1617).
func (c *Comm) FinishRecv(ctx context.Context, op *RecvOp) ([]byte, error) {
	sp := traceBegin()
	data, err := c.finishRecv(ctx, op, false)
	if sp.on() {
		c.traceRecv(sp, "finish_recv", op, err)
	}
	return data, err
}

// finishRecv is FinishRecv; with withdraw, a wait that ctx ends takes the
// receive back (Recv: nobody can finish it later), so the next message is
// kept for the next receive instead of being swallowed by this one.
func (c *Comm) finishRecv(ctx context.Context, op *RecvOp, withdraw bool) ([]byte, error) {
	if op == nil {
		return nil, codes.New(codes.Finished, "finish_recv: no operation")
	}
	if err := c.neverMatches(op); err != nil {
		if !withdraw {
			return nil, err // FinishRecv: the program may send to itself and finish it later
		}
		// Recv: nobody can finish it later, so it must not stay posted to
		// swallow the next message of its tag. A send to itself that
		// matched it meanwhile is returned after all.
		c.mu.Lock()
		gone := c.match.withdraw(op.r)
		if gone {
			delete(c.open, op)
		}
		c.mu.Unlock()
		if gone {
			return nil, err
		}
	}
	c.mu.Lock()
	if _, ok := c.open[op]; !ok || op.busy {
		c.mu.Unlock()
		return nil, &codes.Error{Code: codes.Finished, Op: "finish_recv", Rank: -1, Msg: fmt.Sprintf("finish_recv: %s is not open (finished already?)", op.String())}
	}
	if op.r.anySrc {
		if err := c.anySourceEndedLocked(op.r); err != nil {
			// SPEC §10.3: it would wait for ever. It is taken back.
			c.match.withdraw(op.r)
			delete(c.open, op)
			c.mu.Unlock()
			return nil, err
		}
		op.r.waiting = true // a loss or the last bye ends it (anySourceEndsLocked)
	}
	op.busy = true
	c.mu.Unlock()
	defer leaveWait(enterWait(recvWait{r: op.r, c: c}, c.worldRank(c.rank), recvPeer(op.r)))
	c.readUntil(ctx, op.r)
	select {
	case <-op.r.done:
	case <-ctx.Done():
		c.mu.Lock()
		op.busy = false
		op.r.waiting = false
		if !withdraw || c.match.withdraw(op.r) {
			if withdraw {
				delete(c.open, op)
			}
			c.mu.Unlock()
			return nil, ctx.Err()
		}
		c.mu.Unlock()
		// A message matched it while ctx ended: it is returned after all.
		<-op.r.done
	}
	c.mu.Lock()
	delete(c.open, op)
	c.mu.Unlock()
	return op.r.data, op.r.err
}

// callableLocked returns the error a new call gets on an ended
// communicator. Call with c.mu held.
func (c *Comm) callableLocked(op string) error {
	if c.err != nil {
		return c.err
	}
	if c.revoked {
		return c.revokedErr(op)
	}
	if c.subDone {
		return &codes.Error{Code: codes.Finished, Op: op, Rank: -1, Msg: fmt.Sprintf("%s: the communicator is finished", op)}
	}
	if c.finished {
		return &codes.Error{Code: codes.Finished, Op: op, Rank: -1, Msg: fmt.Sprintf("%s: the communicator is finished", op)}
	}
	return nil
}

// SetSilence sets this rank's silence limit (at least 100 ms) and tells
// every peer, so that they heartbeat often enough (SPEC §7).
func (c *Comm) SetSilence(ms int) error {
	if ms < job.MinSilenceMS || ms > job.MaxSilenceMS {
		return &codes.Error{Code: codes.OutOfRange, Op: "set_silence", Rank: -1, Msg: fmt.Sprintf("set_silence: %d ms is outside %d to %d", ms, job.MinSilenceMS, job.MaxSilenceMS)}
	}
	c.mu.Lock()
	err := c.callableLocked("set_silence")
	c.mu.Unlock()
	if err != nil {
		return err
	}
	// The new limit counts from now: peers heartbeat at the old pace until
	// they hear of it.
	now := time.Now().UnixNano()
	for _, p := range c.links.peerList() {
		p.SetLastHeard(now)
	}
	c.silenceMS.Store(int64(ms))
	c.reschedule()
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(ms))
	for _, p := range c.links.peerList() {
		p.Control(wire.Silence, b[:])
	}
	c.heartbeatAll()
	return nil
}

// Heartbeat sends a heartbeat to every peer now.
func (c *Comm) Heartbeat() error {
	c.mu.Lock()
	err := c.callableLocked("heartbeat")
	c.mu.Unlock()
	if err != nil {
		return err
	}
	c.heartbeatAll()
	return nil
}

// Abort ends the job now: every peer is told and returns H1612 (cause
// "aborted"); this communicator's later calls return H1617.
func (c *Comm) Abort() error {
	err := &codes.Error{Code: codes.Finished, Op: "abort", Rank: -1, Msg: "the communicator was aborted"}
	c.end(err, &wire.Reason{Code: codes.JobEnded, Cause: codes.CauseAborted, Rank: int32(c.origin()), Msg: "aborted"})
	c.Close()
	return nil
}

// Fail ends the job because this rank failed with err (for example a
// program error): every peer returns H1612 with cause "failed". It is what
// Exit calls for an error; call it directly only to end the job early.
func (c *Comm) Fail(err error) {
	c.fail(err)
	c.Close()
}

// Finish tells every peer this rank finished, waits until every rank of
// the job has (or is lost: fin.go), says bye on every link, waits for
// the peers' byes, and closes the connections. Later calls return H1617.
// Finishing with operations still open is an error (H1617) that names them;
// the communicator is finished all the same.
func (c *Comm) Finish() error {
	defer traceFlush()
	if c.Sub() {
		return c.finishSub()
	}
	if cur := c.links.cur.Load(); cur.inc > c.inc && !c.recovering.Load() {
		// Shrink or grow made a later generation: the job finishes there.
		return cur.Finish()
	}
	c.mu.Lock()
	if err := c.callableLocked("finish"); err != nil {
		c.mu.Unlock()
		if c.finished {
			return err
		}
		c.Close()
		return err
	}
	c.finished = true
	var openErr error
	if len(c.open) > 0 {
		var names []string
		for op := range c.open {
			names = append(names, fmt.Sprint(op))
		}
		sort.Strings(names)
		openErr = codes.New(codes.Finished, "finish with %d open operation(s): %s", len(names), strings.Join(names, ", "))
	}
	c.mu.Unlock()
	// Every rank's end first (fin.go): this one's is told on every link,
	// behind its data, and the job is done when the tree says so.
	c.fin.mu.Lock()
	c.fin.finished = true
	c.fin.mu.Unlock()
	if c.rank >= 0 { // a spare has no program to finish
		var slots []int
		for _, p := range c.links.peerList() {
			slots = append(slots, p.rank)
		}
		c.finSend(slots, finFinished)
	}
	c.finStep()
	var endedMeanwhile error
	select {
	case <-c.fin.done:
	case <-c.dead:
		endedMeanwhile = c.deadErr()
	}
	c.closingNow.Store(true)
	for _, p := range c.links.peerList() {
		if !p.Attached() {
			p.Close() // never made: nothing to say bye on, nothing to wait for
			continue
		}
		// A peer whose bye came first still reads until this one's.
		if !p.Gone() || p.Bye() {
			_ = p.Enqueue(&mesh.Frame{H: wire.Header{Type: wire.Bye, Incarnation: c.inc}})
			p.ReadSoon() // the peer's bye
		}
	}
	// Wait for every peer's bye (or its end), so that closing never resets a
	// connection with data the peer has not read yet.
	// Each wait is woken by the peer's end (GoneC), not by polling.
	for _, p := range c.links.peerList() {
		select {
		case <-c.dead:
		case <-p.GoneC():
		}
	}
	var deadErr error
	select {
	case <-c.dead:
		// The job ended while this rank waited for the byes: a peer lost
		// before its bye, or an abort.
		deadErr = c.deadErr()
	default:
	}
	if endedMeanwhile != nil && !(c.links.rec != nil && c.links.rec.job.Spares > 0 && !c.links.lossReturn.Load()) {
		// The job ended after this rank's program had finished, while it
		// waited for the others: its own outcome stands (the launcher
		// says what ended the others). With spares the loss is this
		// generation's, which is not recovered in place (recover.go).
		deadErr = nil
	}
	c.Close()
	if deadErr != nil {
		return deadErr
	}
	return openErr
}

// closePeers closes every link after what it has queued (an abort the
// end told, say), waiting at most a second for each, all at once.
func (l *links) closePeers() {
	var wg sync.WaitGroup
	for _, p := range l.peerList() {
		wg.Add(1)
		go func(p *peer) {
			defer wg.Done()
			p.CloseGracefully(time.Second)
			p.Wait()
		}(p)
	}
	wg.Wait()
}

// Close releases the communicator's connections and goroutines without a
// bye; after Finish, Abort or Fail it only waits for them. Safe twice.
func (c *Comm) Close() {
	if c.Sub() {
		return // a sub-communicator ends with the job (Finish marks it finished)
	}
	c.closeMu.Do(func() {
		c.closingNow.Store(true)
		c.end(&codes.Error{Code: codes.Finished, Op: "close", Rank: -1, Msg: "the communicator is closed"}, nil)
		c.links.stopLinks()
		c.links.closePeers()
		close(c.stopMon)
		close(c.stopRec)
		<-c.monDone
		<-c.recDone
	})
}
