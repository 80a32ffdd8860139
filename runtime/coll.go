package runtime

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"sperli/codes"
	"sperli/runtime/bufpool"
	"sperli/runtime/mesh"
	"sperli/runtime/sched"
	"sperli/wire"
)

// MaxCollective is the most data one rank gives one collective call
// (SPEC §8.3): a result frame is this plus its call descriptor and still
// within the 16 MiB frame limit.
const MaxCollective = 16777200

// collFrame is a collective frame kept until its call takes it.
type collFrame struct {
	seq   uint64
	flags uint16
	call  wire.Call
	data  []byte
	buf   []byte // the whole payload data is in, for bufpool.Put once data is used
	cost  int64
}

// voidNote is a void heard for a call this rank has not finished. It holds
// its frame's credit until the call is reached (protocol.md §5).
type voidNote struct {
	from int
	call wire.Call
	cost int64
}

// collState is the bookkeeping of collective calls. Frames and voids are
// guarded by Comm.mu; calls are serialised by mu below.
type collState struct {
	mu     sync.Mutex          // one collective call at a time
	seq    uint64              // the number of the current (or last) call
	done   uint64              // the last call this rank has returned from
	queues map[int][]collFrame // frames by sender, in arrival order (senders with none have no entry)
	voids  map[uint64]voidNote // by call: the first void heard for it
	voided map[uint64]bool     // calls this rank returned H1618 for
	// endVoid is set once a call returned the H1618 the job ended with
	// (endOfCallLocked): later calls get the job's end.
	endVoid bool
	notify  chan struct{}
	// reading is the connection a waiting call reads itself (take), so
	// that a frame on another one can interrupt it (wake).
	reading atomic.Pointer[peer]
}

func (s *collState) init() {
	s.queues = make(map[int][]collFrame)
	s.voids = make(map[uint64]voidNote)
	s.voided = make(map[uint64]bool)
	s.notify = make(chan struct{}, 1)
}

// wake tells a waiting call that frames came; from is the connection
// they came on (nil for none). A call reading another connection itself
// (take) is interrupted, so that it looks at what came.
func (s *collState) wake(from *peer) {
	select {
	case s.notify <- struct{}{}:
	default:
	}
	if p := s.reading.Load(); p != nil && p != from {
		p.Interrupt()
	}
}

// collFrameIn routes a collective frame from p to its communicator (its
// id is the frame's tag), keeping it for a communicator not made yet.
func (c *Comm) collFrameIn(p *peer, h wire.Header, payload []byte) error {
	c.mu.Lock()
	to, ok := c.comms[h.Tag]
	if !ok {
		c.early[h.Tag] = append(c.early[h.Tag], earlyFrame{from: c.from(p), h: h, payload: payload})
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	return to.collArrive(p, h, payload)
}

// collArrive keeps a collective frame of c from p (reader goroutine).
func (c *Comm) collArrive(p *peer, h wire.Header, payload []byte) error {
	call, data, err := wire.DecodeCall(payload)
	if err != nil {
		return err
	}
	from := c.rankOf(c.from(p))
	if from < 0 {
		return violation(p.rank, "it sent a collective frame of communicator %d, which it is not in", c.ctxID)
	}
	c.mu.Lock()
	if h.Flags&wire.FlagVoid != 0 {
		cost := mesh.FrameCost(len(payload))
		_, dup := c.coll.voids[h.Seq]
		switch {
		case h.Seq <= c.coll.done && !c.coll.voided[h.Seq]:
			c.mu.Unlock()
			return &codes.Error{Code: codes.CollectiveMismatch, Rank: -1, Msg: fmt.Sprintf("collective mismatch: rank %d declared call %d void, which this rank completed", from, h.Seq)}
		case h.Seq <= c.coll.done || dup:
			// Nothing more to learn from it: its credit goes back now.
			c.consumedLocked(p, cost)
		default:
			c.coll.voids[h.Seq] = voidNote{from: from, call: call, cost: cost}
		}
	} else {
		c.coll.queues[from] = append(c.coll.queues[from], collFrame{seq: h.Seq, flags: h.Flags, call: call, data: data, buf: payload, cost: mesh.FrameCost(len(payload))})
	}
	c.mu.Unlock()
	c.coll.wake(p)
	return nil
}

func describe(k wire.CollKind, call wire.Call) string {
	switch k {
	case wire.CollBarrier:
		return "barrier"
	case wire.CollBcast, wire.CollGather, wire.CollScatter:
		return fmt.Sprintf("%s(root %d)", k, call.Root)
	case wire.CollReduce:
		return fmt.Sprintf("reduce(root %d, %s, %s)", call.Root, Type(call.Type), Op(call.Op))
	case wire.CollAllreduce:
		return fmt.Sprintf("allreduce(%s, %s)", Type(call.Type), Op(call.Op))
	}
	return call.Kind.String()
}

// equalLengths are the calls whose every rank gives the same length of
// data (H1613 otherwise, SPEC §8.3): a frame of such a call says the
// sender's length, and whoever takes it compares.
var equalLengths = map[wire.CollKind]bool{wire.CollReduce: true, wire.CollAllreduce: true, wire.CollGather: true,
	wire.CollAllgather: true, wire.CollAlltoall: true, wire.CollReduceScatter: true}

func sameCall(a, b wire.Call) bool {
	return a.Kind == b.Kind && a.Root == b.Root && a.Type == b.Type && a.Op == b.Op
}

// mismatch ends the job: this rank saw that the ranks disagree (H1613).
func (c *Comm) mismatch(format string, args ...any) error {
	err := &codes.Error{Code: codes.CollectiveMismatch, Rank: -1, Msg: fmt.Sprintf(format, args...)}
	c.fail(err)
	return c.deadErr()
}

// heardVoid is the outcome of call k (this rank's descriptor mine) that
// rank v.from voided: H1618, or H1613 when it voided another kind of call.
func (c *Comm) heardVoid(k uint64, mine wire.Call, v voidNote) error {
	if v.call.Kind != mine.Kind {
		return c.mismatch("collective mismatch in call %d: rank %d called %s, this rank called %s", k, v.from, v.call.Kind, describe(mine.Kind, mine))
	}
	return c.voidedBy(k, v.from)
}

// take returns the next frame of call k from rank from, waiting for it.
// While it waits it watches every sign that call k cannot complete: a void
// for k (H1618), a frame of k that is not the same call, a frame or void of
// an earlier call this rank completed (H1613), the sender finishing.
func (c *Comm) take(ctx context.Context, k uint64, mine wire.Call, from int) (collFrame, error) {
	defer leaveWait(enterWait(collWait{k, mine, from}, c.worldRank(c.rank), c.worldRank(from)))
	kind := mine.Kind
	for {
		c.mu.Lock()
		// A void of this call counts even when the job has ended since: the
		// rank that voided it may end the job at once (its program does
		// not catch H1618), and its abort must not hide the void it sent
		// before (SPEC §8.3: every rank returns H1618).
		if v, ok := c.coll.voids[k]; ok {
			c.mu.Unlock()
			return collFrame{}, c.heardVoid(k, mine, v)
		}
		if c.err != nil {
			err := c.endOfCallLocked(k)
			c.mu.Unlock()
			return collFrame{}, err
		}
		if err := c.peerFailedLocked(kind.String(), from); err != nil {
			c.mu.Unlock()
			return collFrame{}, err // SPEC §10.3: a collective that needs a lost rank
		}
		if len(c.failedSlots) > 0 {
			// Every member is needed: this rank may wait for a live one that
			// met the loss and left the call (SPEC §10.3), so the loss of
			// any member ends the call here too.
			if r, why, lost := c.anyFailedLocked(); lost {
				c.mu.Unlock()
				return collFrame{}, c.lostErr(kind.String(), r, why)
			}
		}
		for r, q := range c.coll.queues {
			for len(q) > 0 && q[0].seq < k {
				if !c.coll.voided[q[0].seq] {
					seq := q[0].seq
					c.mu.Unlock()
					return collFrame{}, c.mismatch("collective mismatch: rank %d sent a frame of call %d, which this rank completed", r, seq)
				}
				c.consumedLocked(c.peerAt(r), q[0].cost)
				q = q[1:]
			}
			if len(q) == 0 {
				delete(c.coll.queues, r)
				continue
			}
			c.coll.queues[r] = q
			if len(q) > 0 && q[0].seq == k && !sameCall(q[0].call, mine) {
				got := q[0].call
				c.mu.Unlock()
				return collFrame{}, c.mismatch("collective mismatch in call %d: rank %d called %s, this rank called %s", k, r, describe(got.Kind, got), describe(kind, mine))
			}
			if len(q) > 0 && q[0].seq == k && equalLengths[kind] && q[0].call.Length != mine.Length {
				got := q[0].call
				c.mu.Unlock()
				return collFrame{}, c.mismatch("%s: contributions of different lengths: rank %d gave %d bytes, rank %d gave %d", kind, r, got.Length, c.rank, mine.Length)
			}
		}
		if q := c.coll.queues[from]; len(q) > 0 && q[0].seq == k {
			f := q[0]
			if len(q) == 1 {
				delete(c.coll.queues, from)
			} else {
				c.coll.queues[from] = q[1:]
			}
			c.consumedLocked(c.peerAt(from), f.cost)
			c.mu.Unlock()
			return f, nil
		}
		if p := c.peerAt(from); p != nil && p.Finished() {
			c.mu.Unlock()
			return collFrame{}, c.mismatch("collective mismatch in call %d: rank %d finished instead of calling %s", k, from, describe(kind, mine))
		}
		c.mu.Unlock()
		// The frame this call needs next comes on from's connection: read
		// it on this goroutine, as a receive does (the latency path), until
		// a frame of any collective came (wake interrupts the read when it
		// came on another connection). The other connections' reader
		// goroutines are not hurried: a frame there (a void, another call)
		// is read within their grace, and one woken now would hold its
		// connection when this call takes from it next (a handoff per
		// frame: measured 180 µs a barrier of three ranks instead of 150,
		// 22% of its processor time in the reader goroutines).
		if p := c.peerAt(from); p != nil && !p.Gone() {
			c.coll.reading.Store(p)
			read := p.ReadFor(ctx, c.coll.notify)
			c.coll.reading.Store(nil)
			if read {
				continue
			}
		}
		select {
		case <-c.coll.notify:
		case <-c.dead:
		case <-ctx.Done():
			return collFrame{}, ctx.Err()
		}
	}
}

// endOfCallLocked is what call k returns once the job has ended. When a
// rank ended the job with an H1618 its program did not catch, the call it
// voided is H1618 here too — also when its void is still on the way, behind
// the abort passed on by a third rank — so every rank returns H1618 from
// that call (SPEC §8.3). Only that first call: later ones get the job's
// end. Call with c.mu held.
func (c *Comm) endOfCallLocked(k uint64) error {
	ce := codes.As(c.err)
	if ce == nil || ce.Code != codes.JobEnded || ce.Cause == nil || ce.Cause.Kind != codes.CauseFailed ||
		ce.Cause.Code != codes.WrongCollective || c.coll.endVoid || c.Sub() {
		return c.err
	}
	c.coll.endVoid = true
	c.coll.voided[k] = true
	return &codes.Error{Code: codes.WrongCollective, Rank: ce.Cause.Rank, Err: c.err,
		Msg:   fmt.Sprintf("call %d is void: rank %d called it wrongly (and ended the job with it)", k, ce.Cause.Rank),
		Cause: &codes.Cause{Kind: codes.CauseFailed, Rank: ce.Cause.Rank, Code: codes.WrongCollective}}
}

func (c *Comm) voidedBy(k uint64, from int) error {
	c.mu.Lock()
	c.coll.voided[k] = true
	c.coll.endVoid = c.err != nil // the job's end was this void: later calls get the end
	if v, ok := c.coll.voids[k]; ok {
		delete(c.coll.voids, k)
		c.consumedLocked(c.peerAt(v.from), v.cost)
	}
	c.mu.Unlock()
	// The cause names the rank that called it wrongly, for the launcher's
	// last line ("ranks 1, 2 ended by it").
	return &codes.Error{Code: codes.WrongCollective, Rank: from, Msg: fmt.Sprintf("call %d is void: rank %d called it wrongly", k, from),
		Cause: &codes.Cause{Kind: codes.CauseFailed, Rank: from, Code: codes.WrongCollective}}
}

// void declares call k void: this rank's own arguments are wrong (H1618).
// Every peer is told before anything else of this call is sent.
func (c *Comm) void(k uint64, mine wire.Call, why string) error {
	c.mu.Lock()
	c.coll.voided[k] = true
	c.mu.Unlock()
	payload := wire.AppendCall(nil, mine)
	for r := 0; r < c.size; r++ {
		if p := c.linkAt(r); p != nil {
			_ = p.Enqueue(&mesh.Frame{H: wire.Header{Type: wire.Collective, Incarnation: c.inc, Flags: wire.FlagVoid, Tag: c.ctxID, Seq: k, Length: uint32(len(payload))}, Payload: payload, Counted: true})
		}
	}
	return &codes.Error{Code: codes.WrongCollective, Rank: -1, Msg: why}
}

// collCall is one collective call as a schedule sees it (sched.Link):
// its number, this rank's descriptor, and the frames it sent, which must
// be written before the call returns (they may alias the caller's data or
// the result).
type collCall struct {
	c    *Comm
	ctx  context.Context
	k    uint64
	mine wire.Call
	sent []*mesh.Frame
}

var _ sched.Link = (*collCall)(nil)

// directMax is the largest frame a collective writes from its own
// goroutine: smaller ones are written at once when nothing is queued before
// them (the latency path), larger ones by the writer, so that the schedule
// takes frames while its chunks are written.
const directMax = 64 << 10

// Rank is this rank's in the communicator.
func (cc *collCall) Rank() int { return cc.c.rank }

// Size is the communicator's.
func (cc *collCall) Size() int { return cc.c.size }

// Seq is the call's number k.
func (cc *collCall) Seq() uint64 { return cc.k }

// Describe is the call as mismatch messages name it.
func (cc *collCall) Describe() string { return describe(cc.mine.Kind, cc.mine) }

// Send sends one frame of the call, behind this rank's descriptor, to rank
// to. data is not copied; written waits for it.
func (cc *collCall) Send(to int, ack bool, data []byte) error {
	var flags uint16
	if ack {
		flags = wire.FlagAck
	}
	head := wire.AppendCall(make([]byte, 0, wire.CallSize), cc.mine)
	f := &mesh.Frame{H: wire.Header{Type: wire.Collective, Incarnation: cc.c.inc, Flags: flags, Tag: cc.c.ctxID, Seq: cc.k, Length: uint32(len(head) + len(data))}, Head: head, Payload: data, Counted: true, Done: make(chan struct{})}
	cc.sent = append(cc.sent, f)
	countCollFrame(cc.mine.Kind, true, len(data))
	p := cc.c.collLinkAt(to)
	if p == nil {
		return cc.sendErr(&codes.Error{Code: codes.OutOfRange, Rank: to, Msg: fmt.Sprintf("%s: a frame to rank %d, this rank itself", cc.mine.Kind, to)})
	}
	var err error
	if len(data) <= directMax {
		err = p.Post(f)
	} else {
		err = p.Enqueue(f)
	}
	return cc.sendErr(cc.c.linkErr(cc.mine.Kind.String(), to, err))
}

// sendErr is the outcome of the call when a frame of it could not be sent
// (err): as for a frame that could not be taken (Comm.take), a void of the
// call heard before counts, and a job ended by a rank that voided a call
// makes this one void (endOfCallLocked) — a peer that ended at once after
// its void may have closed its connection before this rank's frame went.
func (cc *collCall) sendErr(err error) error {
	if err == nil {
		return nil
	}
	c := cc.c
	c.mu.Lock()
	v, heard := c.coll.voids[cc.k]
	if !heard && c.err != nil {
		err = c.endOfCallLocked(cc.k)
	}
	c.mu.Unlock()
	if heard {
		return c.heardVoid(cc.k, cc.mine, v)
	}
	return err
}

// Take returns the next frame of the call from rank from (Comm.take: it
// has checked the sender's descriptor against this rank's).
func (cc *collCall) Take(from int) (sched.Frame, error) {
	cc.Partners(from) // the lower slot makes the link (collLinkAt)
	f, err := cc.c.take(cc.ctx, cc.k, cc.mine, from)
	if err != nil {
		return sched.Frame{}, err
	}
	countCollFrame(cc.mine.Kind, false, len(f.data))
	return sched.Frame{Ack: f.flags&wire.FlagAck != 0, Len: int(f.call.Length), Data: f.data, Buf: f.buf}, nil
}

// Release hands a taken frame's payload buffer back to the pool.
func (cc *collCall) Release(f sched.Frame) { bufpool.Put(f.Buf) }

// Partners dials now the missing links to the ranks named whose slots are
// higher than this rank's: the lower slot of a pair makes a collective's
// link (collLinkAt), and a parent that dialed each kid only when it took
// from it would make its kids' links one after another, each kid waiting
// for the dial before it. A link to a lower slot is that slot's to make.
func (cc *collCall) Partners(ranks ...int) {
	for _, r := range ranks {
		if r < 0 || r >= cc.c.size {
			continue
		}
		if s := cc.c.layout.Slot(cc.c.worldRank(r)); s > cc.c.links.self {
			cc.c.links.link(s)
		}
	}
}

// Mismatch ends the job: the ranks disagree about the call (H1613).
func (cc *collCall) Mismatch(format string, args ...any) error { return cc.c.mismatch(format, args...) }

// written waits until every frame the call sent is written (or the job
// ended: then nobody reads them).
func (cc *collCall) written() {
	for _, f := range cc.sent {
		select {
		case <-f.Done:
		case <-cc.c.dead:
			return
		}
	}
}

// star runs the star schedule (sched.Star) around the call's root, with
// finishRoot computing the results at the root; a mismatch finishRoot
// finds ends the job (rootFailed).
func (cc *collCall) star(contribute []byte, finishRoot func(contrib [][]byte) (own []byte, out [][]byte, err error)) ([]byte, error) {
	return sched.Star(cc, int(cc.mine.Root), contribute, func(contrib [][]byte) ([]byte, [][]byte, error) {
		own, out, err := finishRoot(contrib)
		if err != nil {
			return nil, nil, cc.c.rootFailed(err)
		}
		return own, out, nil
	})
}

// collective runs one call of the star schedule with contribute as this
// rank's data and finishRoot computing the results at the root.
func (c *Comm) collective(ctx context.Context, mine wire.Call, argErr string, contribute []byte,
	finishRoot func(contrib [][]byte) (own []byte, out [][]byte, err error)) ([]byte, error) {
	return c.collectiveWith(ctx, mine, argErr, func(cc *collCall) ([]byte, error) {
		return cc.star(contribute, finishRoot)
	})
}

// scheduled runs one collective call by its line of the schedule table
// (sched.Run).
func (c *Comm) scheduled(ctx context.Context, mine wire.Call, argErr string, call sched.Call) ([]byte, error) {
	return c.collectiveWith(ctx, mine, argErr, func(cc *collCall) ([]byte, error) {
		return sched.Run(cc, call)
	})
}

// collectiveWith runs one collective call with the schedule run:
//
//  1. Every rank checks its own arguments; a wrong one voids the call
//     (H1618 everywhere). A void already heard for this call is H1618 too.
//  2. The schedule sends and takes the call's frames. Every schedule makes
//     each rank's result depend on every rank's frames, so that no rank
//     returns before every rank has passed its checks: a void reaches
//     everyone in time, and a rank that made another call is seen.
//  3. The call returns when its frames are written.
func (c *Comm) collectiveWith(ctx context.Context, mine wire.Call, argErr string, run func(cc *collCall) ([]byte, error)) (out []byte, err error) {
	c.coll.mu.Lock()
	defer c.coll.mu.Unlock()
	if mine.Kind < wire.CollCkptBegin {
		// The test-only failure point counts the program's collective
		// calls, also one that a revoke or the job's end refuses below:
		// "collective-K" is the K-th call in program order whatever the
		// others did meanwhile.
		c.collN++
		c.failurePoint("collective", c.collN)
	}
	c.mu.Lock()
	if err := c.callableLocked(mine.Kind.String()); err != nil {
		// A void heard for this call before the job ended is still its
		// outcome (take says why).
		if _, heard := c.coll.voids[c.coll.seq+1]; !heard || c.finished {
			if c.err != nil {
				err = c.endOfCallLocked(c.coll.seq + 1)
			}
			c.mu.Unlock()
			return nil, err
		}
	}
	c.coll.seq++
	k := c.coll.seq
	v, heard := c.coll.voids[k]
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.coll.done = k
		c.mu.Unlock()
	}()
	kind := mine.Kind
	countColl(kind)
	if sp := traceBegin(); sp.on() {
		defer func() {
			sp.call(kind.String(), err, targ("k", int(k)), targ("bytes", int(mine.Length)), targ("root", int(mine.Root)))
		}()
	}

	if argErr != "" {
		return nil, c.void(k, mine, argErr)
	}
	if heard {
		if v.call.Kind != mine.Kind {
			return nil, c.mismatch("collective mismatch in call %d: rank %d called %s, this rank called %s", k, v.from, v.call.Kind, describe(kind, mine))
		}
		return nil, c.voidedBy(k, v.from)
	}
	cc := &collCall{c: c, ctx: ctx, k: k, mine: mine}
	res, err := run(cc)
	if err == nil {
		cc.written()
	}
	return res, err
}

// rootFailed turns an error the root found while computing into the end of
// the job (it is a mismatch only the root can see: lengths, blocks).
func (c *Comm) rootFailed(err error) error {
	if codes.Of(err) == codes.CollectiveMismatch {
		c.fail(err)
		return c.deadErr()
	}
	return err
}

func (c *Comm) checkRoot(root int) string {
	if root < 0 || root >= c.size {
		return fmt.Sprintf("root %d is outside the job (size %d)", root, c.size)
	}
	return ""
}

func checkData(op string, n int) string {
	if n > MaxCollective {
		return fmt.Sprintf("%s: data is %d bytes, limit %d per rank per call", op, n, MaxCollective)
	}
	return ""
}

func firstOf(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

func rootField(root int) uint32 {
	if root < 0 {
		return ^uint32(0)
	}
	return uint32(root)
}

// Barrier returns when every rank has called it.
func (c *Comm) Barrier(ctx context.Context) error {
	_, err := c.scheduled(ctx, wire.Call{Kind: wire.CollBarrier}, "", sched.Call{Kind: wire.CollBarrier})
	return err
}

// Reduce combines every rank's data element by element with op, in rank
// order, and returns the result on root (empty bytes elsewhere). data holds
// elements of typ, least significant byte first. Wrong arguments — a root
// outside the job, an op that does not fit typ, data that is no whole
// number of elements or over MaxCollective bytes — are H1618 on every rank,
// and the job goes on; contributions of different lengths are H1613.
// data is not changed; the result is new.
func (c *Comm) Reduce(ctx context.Context, root int, typ Type, op Op, data []byte) ([]byte, error) {
	mine := wire.Call{Kind: wire.CollReduce, Type: uint8(typ), Op: uint8(op), Root: rootField(root), Length: uint32(len(data))}
	argErr := firstOf(c.checkRoot(root), checkReduction("reduce", typ, op, len(data)), checkData("reduce", len(data)))
	res, err := c.scheduled(ctx, mine, argErr, sched.Call{Kind: wire.CollReduce, Root: root, Data: data, Fold: foldOf(typ, op)})
	if err != nil {
		return nil, err
	}
	if c.rank != root {
		return []byte{}, nil
	}
	return res, nil
}

// Allreduce is Reduce whose result every rank returns: the same new bytes
// on every rank, folded in rank order.
func (c *Comm) Allreduce(ctx context.Context, typ Type, op Op, data []byte) ([]byte, error) {
	mine := wire.Call{Kind: wire.CollAllreduce, Type: uint8(typ), Op: uint8(op), Root: 0, Length: uint32(len(data))}
	argErr := firstOf(checkReduction("allreduce", typ, op, len(data)), checkData("allreduce", len(data)))
	return c.scheduled(ctx, mine, argErr, sched.Call{Kind: wire.CollAllreduce, Data: data, Fold: foldOf(typ, op)})
}

// Bcast returns root's data on every rank (new bytes). Off the root, data
// is ignored and may be nil.
func (c *Comm) Bcast(ctx context.Context, root int, data []byte) ([]byte, error) {
	mine := wire.Call{Kind: wire.CollBcast, Root: rootField(root)}
	argErr := c.checkRoot(root)
	if argErr == "" && c.rank == root {
		argErr = checkData("bcast", len(data))
		mine.Length = uint32(len(data)) // the announcement tells the others
	}
	return c.scheduled(ctx, mine, argErr, sched.Call{Kind: wire.CollBcast, Root: root, Data: data})
}

// Gather returns on root the contributions of every rank concatenated in
// rank order (empty bytes elsewhere). All contributions must have the same
// length (else H1613).
func (c *Comm) Gather(ctx context.Context, root int, data []byte) ([]byte, error) {
	mine := wire.Call{Kind: wire.CollGather, Root: rootField(root), Length: uint32(len(data))}
	argErr := firstOf(c.checkRoot(root), checkData("gather", len(data)))
	res, err := c.scheduled(ctx, mine, argErr, sched.Call{Kind: wire.CollGather, Root: root, Data: data})
	if err != nil {
		return nil, err
	}
	if c.rank != root {
		return []byte{}, nil
	}
	return res, nil
}

// Scatter cuts root's data into Size() equal blocks and returns block i on
// rank i. Off the root, data is ignored. Root data that is no whole number
// of blocks ends the job (H1613 on the root, H1612 elsewhere).
func (c *Comm) Scatter(ctx context.Context, root int, data []byte) ([]byte, error) {
	mine := wire.Call{Kind: wire.CollScatter, Root: rootField(root)}
	argErr := c.checkRoot(root)
	if argErr == "" && c.rank == root {
		argErr = checkData("scatter", len(data))
	}
	return c.scheduled(ctx, mine, argErr, sched.Call{Kind: wire.CollScatter, Root: root, Data: data})
}

// Allgather returns on every rank the contributions of every rank
// concatenated in rank order (new bytes). All contributions must have the
// same length (else H1613); data over MaxCollective bytes is H1618.
func (c *Comm) Allgather(ctx context.Context, data []byte) ([]byte, error) {
	mine := wire.Call{Kind: wire.CollAllgather, Length: uint32(len(data))}
	argErr := checkData("allgather", len(data))
	return c.scheduled(ctx, mine, argErr, sched.Call{Kind: wire.CollAllgather, Data: data})
}

// Alltoall cuts data into Size() equal blocks and sends block j to rank j;
// it returns the blocks received, in rank order (new bytes). Data that is
// no whole number of blocks, or over MaxCollective bytes, is H1618; ranks
// giving different lengths are H1613.
func (c *Comm) Alltoall(ctx context.Context, data []byte) ([]byte, error) {
	mine := wire.Call{Kind: wire.CollAlltoall, Length: uint32(len(data))}
	argErr := checkData("alltoall", len(data))
	if argErr == "" && len(data)%c.size != 0 {
		argErr = fmt.Sprintf("alltoall: %d bytes are no whole number of %d blocks", len(data), c.size)
	}
	return c.scheduled(ctx, mine, argErr, sched.Call{Kind: wire.CollAlltoall, Data: data})
}

// ReduceScatter reduces data over every rank element by element with op,
// in rank order, as Allreduce does, and returns on rank i block i of the
// result, data being Size() equal blocks of whole elements (else H1618,
// as the other reduction checks).
func (c *Comm) ReduceScatter(ctx context.Context, typ Type, op Op, data []byte) ([]byte, error) {
	mine := wire.Call{Kind: wire.CollReduceScatter, Type: uint8(typ), Op: uint8(op), Length: uint32(len(data))}
	argErr := firstOf(checkReduction("reduce_scatter", typ, op, len(data)), checkData("reduce_scatter", len(data)))
	if argErr == "" && (len(data)%c.size != 0 || (len(data)/c.size)%typ.Size() != 0) {
		argErr = fmt.Sprintf("reduce_scatter: %d bytes are no %d equal blocks of whole %s elements", len(data), c.size, typ)
	}
	return c.scheduled(ctx, mine, argErr, sched.Call{Kind: wire.CollReduceScatter, Data: data, Fold: foldOf(typ, op)})
}
