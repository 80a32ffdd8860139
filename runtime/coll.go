package runtime

import (
	"context"
	"fmt"
	"sync"

	"sperli/codes"
	"sperli/wire"
)

// MaxCollective is the most data one rank gives one collective call
// (SPEC §8.3): a result frame is this plus its call descriptor and still
// within the 16 MiB frame limit.
const MaxCollective = 16777200

// Kind is a collective call. The numbers travel in call descriptors:
// append only.
type Kind uint8

// Collective kinds.
const (
	KindBarrier   Kind = 1
	KindBcast     Kind = 2
	KindReduce    Kind = 3
	KindAllreduce Kind = 4
	KindGather    Kind = 5
	KindScatter   Kind = 6
)

var kindNames = map[Kind]string{KindBarrier: "barrier", KindBcast: "bcast", KindReduce: "reduce", KindAllreduce: "allreduce", KindGather: "gather", KindScatter: "scatter"}

func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("collective(%d)", uint8(k))
}

// collFrame is a collective frame kept until its call takes it.
type collFrame struct {
	seq   uint64
	flags uint16
	call  wire.Call
	data  []byte
	cost  int64
}

type voidNote struct {
	from int
	call wire.Call
}

// collState is the bookkeeping of collective calls. Frames and voids are
// guarded by Comm.mu; calls are serialised by mu below.
type collState struct {
	mu     sync.Mutex    // one collective call at a time
	seq    uint64        // the number of the current (or last) call
	queues [][]collFrame // frames by sender, in arrival order
	voids  map[uint64]voidNote
	voided map[uint64]bool // calls this rank returned H1618 for
	notify chan struct{}
}

func (s *collState) init(size int) {
	s.queues = make([][]collFrame, size)
	s.voids = make(map[uint64]voidNote)
	s.voided = make(map[uint64]bool)
	s.notify = make(chan struct{}, 1)
}

func (s *collState) wake() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// collArrive keeps a collective frame from p (reader goroutine).
func (c *Comm) collArrive(p *peer, h wire.Header, payload []byte) error {
	call, data, err := wire.DecodeCall(payload)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if h.Flags&wire.FlagVoid != 0 {
		c.coll.voids[h.Seq] = voidNote{from: p.rank, call: call}
		c.consumedLocked(p, frameCost(len(payload)))
	} else {
		c.coll.queues[p.rank] = append(c.coll.queues[p.rank], collFrame{seq: h.Seq, flags: h.Flags, call: call, data: data, cost: frameCost(len(payload))})
	}
	c.mu.Unlock()
	c.coll.wake()
	return nil
}

func describe(k Kind, call wire.Call) string {
	switch k {
	case KindBarrier:
		return "barrier"
	case KindBcast, KindGather, KindScatter:
		return fmt.Sprintf("%s(root %d)", k, call.Root)
	case KindReduce:
		return fmt.Sprintf("reduce(root %d, %s, %s)", call.Root, Type(call.Type), Op(call.Op))
	case KindAllreduce:
		return fmt.Sprintf("allreduce(%s, %s)", Type(call.Type), Op(call.Op))
	}
	return Kind(call.Kind).String()
}

func sameCall(a, b wire.Call) bool {
	return a.Kind == b.Kind && a.Root == b.Root && a.Type == b.Type && a.Op == b.Op
}

// mismatch ends the job: this rank saw that the ranks disagree (H1613).
func (c *Comm) mismatch(format string, args ...any) error {
	err := &codes.Error{Code: codes.CollectiveMismatch, Rank: -1, Msg: fmt.Sprintf(format, args...)}
	c.fail(err)
	return c.deadErr()
}

// take returns the next frame of call k from rank from, waiting for it.
// While it waits it watches every sign that call k cannot complete: a void
// for k (H1618), a frame of k that is not the same call, a frame or void of
// an earlier call this rank completed (H1613), the sender finishing.
func (c *Comm) take(ctx context.Context, k uint64, mine wire.Call, from int) (collFrame, error) {
	defer leaveWait(enterWait(collWait{k, mine, from}))
	kind := Kind(mine.Kind)
	for waited := false; ; waited = true {
		c.mu.Lock()
		if c.err != nil {
			err := c.err
			c.mu.Unlock()
			return collFrame{}, err
		}
		for seq, v := range c.coll.voids {
			switch {
			case seq == k:
				c.mu.Unlock()
				if v.call.Kind != mine.Kind {
					return collFrame{}, c.mismatch("collective mismatch in call %d: rank %d called %s, this rank called %s", k, v.from, Kind(v.call.Kind), describe(kind, mine))
				}
				return collFrame{}, c.voidedBy(k, v.from)
			case seq < k && !c.coll.voided[seq]:
				c.mu.Unlock()
				return collFrame{}, c.mismatch("collective mismatch: rank %d declared call %d void, which this rank completed", v.from, seq)
			case seq < k:
				delete(c.coll.voids, seq)
			}
		}
		for r, q := range c.coll.queues {
			for len(q) > 0 && q[0].seq < k {
				if !c.coll.voided[q[0].seq] {
					seq := q[0].seq
					c.mu.Unlock()
					return collFrame{}, c.mismatch("collective mismatch: rank %d sent a frame of call %d, which this rank completed", r, seq)
				}
				c.consumedLocked(c.peers[r], q[0].cost)
				q = q[1:]
			}
			c.coll.queues[r] = q
			if len(q) > 0 && q[0].seq == k && !sameCall(q[0].call, mine) {
				got := q[0].call
				c.mu.Unlock()
				return collFrame{}, c.mismatch("collective mismatch in call %d: rank %d called %s, this rank called %s", k, r, describe(Kind(got.Kind), got), describe(kind, mine))
			}
		}
		if q := c.coll.queues[from]; len(q) > 0 && q[0].seq == k {
			f := q[0]
			c.coll.queues[from] = q[1:]
			c.consumedLocked(c.peers[from], f.cost)
			c.mu.Unlock()
			return f, nil
		}
		if p := c.peers[from]; p != nil && p.bye.Load() {
			c.mu.Unlock()
			return collFrame{}, c.mismatch("collective mismatch in call %d: rank %d finished instead of calling %s", k, from, describe(kind, mine))
		}
		c.mu.Unlock()
		if !waited {
			// Collective frames are read by the reader goroutines: end a
			// grace a receiver's reads started (peer.go).
			for _, p := range c.peers {
				if p != nil {
					p.readSoon()
				}
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

func (c *Comm) voidedBy(k uint64, from int) error {
	c.mu.Lock()
	c.coll.voided[k] = true
	c.mu.Unlock()
	return &codes.Error{Code: codes.WrongCollective, Rank: from, Msg: fmt.Sprintf("call %d is void: rank %d called it wrongly", k, from)}
}

// void declares call k void: this rank's own arguments are wrong (H1618).
// Every peer is told before anything else of this call is sent.
func (c *Comm) void(k uint64, mine wire.Call, why string) error {
	c.mu.Lock()
	c.coll.voided[k] = true
	c.mu.Unlock()
	payload := wire.AppendCall(nil, mine)
	for _, p := range c.peers {
		if p != nil {
			_ = p.enqueue(&outFrame{h: wire.Header{Type: wire.Collective, Flags: wire.FlagVoid, Seq: k, Length: uint32(len(payload))}, payload: payload, counted: true})
		}
	}
	return &codes.Error{Code: codes.WrongCollective, Rank: -1, Msg: why}
}

// sendColl queues one collective frame to rank to.
func (c *Comm) sendColl(to int, k uint64, flags uint16, call wire.Call, data []byte) error {
	payload := make([]byte, 0, wire.CallSize+len(data))
	payload = wire.AppendCall(payload, call)
	payload = append(payload, data...)
	return c.peers[to].enqueue(&outFrame{h: wire.Header{Type: wire.Collective, Flags: flags, Seq: k, Length: uint32(len(payload))}, payload: payload, counted: true})
}

// collective runs one call of the star protocol of docs/protocol.md:
//
//  1. Every rank checks its own arguments; a wrong one voids the call
//     (H1618 everywhere). A void already heard for this call is H1618 too.
//  2. The root announces the call to every other rank (so that two ranks
//     that both think they are the root find out), and every other rank
//     sends the root its contribution (a descriptor, plus data where the
//     call gathers it).
//  3. The root checks every contribution, computes, and sends each rank
//     its result with the ack flag; no rank returns before the root has
//     seen every contribution, so a void reaches everyone in time.
//
// contribute is this rank's data for the root (nil for none). finishRoot
// computes the results at the root from every rank's contribution and
// returns the root's own result and each other rank's (index by rank).
func (c *Comm) collective(ctx context.Context, mine wire.Call, argErr string, contribute []byte,
	finishRoot func(contrib [][]byte) (own []byte, out [][]byte, err error)) ([]byte, error) {
	c.coll.mu.Lock()
	defer c.coll.mu.Unlock()
	c.mu.Lock()
	if err := c.callableLocked(Kind(mine.Kind).String()); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	c.coll.seq++
	k := c.coll.seq
	v, heard := c.coll.voids[k]
	c.mu.Unlock()
	kind := Kind(mine.Kind)
	countColl(kind)
	if kind < kindCkptBegin {
		c.collN++
		c.failurePoint("collective", c.collN)
	}

	if argErr != "" {
		return nil, c.void(k, mine, argErr)
	}
	if heard {
		if v.call.Kind != mine.Kind {
			return nil, c.mismatch("collective mismatch in call %d: rank %d called %s, this rank called %s", k, v.from, Kind(v.call.Kind), describe(kind, mine))
		}
		return nil, c.voidedBy(k, v.from)
	}
	root := int(mine.Root)
	if c.size == 1 {
		own, _, err := finishRoot([][]byte{contribute})
		if err != nil {
			return nil, c.rootFailed(err)
		}
		return own, nil
	}
	if c.rank != root {
		if err := c.sendColl(root, k, 0, mine, contribute); err != nil {
			return nil, err
		}
		for {
			f, err := c.take(ctx, k, mine, root)
			if err != nil {
				return nil, err
			}
			if f.flags&wire.FlagAck != 0 {
				return f.data, nil
			}
			// The root's announcement; its descriptor was checked by take.
		}
	}
	for r := range c.peers {
		if r != c.rank {
			if err := c.sendColl(r, k, 0, mine, nil); err != nil {
				return nil, err
			}
		}
	}
	contrib := make([][]byte, c.size)
	contrib[c.rank] = contribute
	for r := range c.peers {
		if r == c.rank {
			continue
		}
		f, err := c.take(ctx, k, mine, r)
		if err != nil {
			return nil, err
		}
		if f.flags&wire.FlagAck != 0 {
			return nil, c.mismatch("collective mismatch in call %d: rank %d sent a result of %s, which has root %d", k, r, describe(kind, mine), root)
		}
		if int(f.call.Length) != len(f.data) {
			return nil, c.mismatch("collective frame of call %d from rank %d says %d bytes and carries %d", k, r, f.call.Length, len(f.data))
		}
		contrib[r] = f.data
	}
	own, out, err := finishRoot(contrib)
	if err != nil {
		return nil, c.rootFailed(err)
	}
	for r := range c.peers {
		if r != c.rank {
			var d []byte
			if out != nil {
				d = out[r]
			}
			if err := c.sendColl(r, k, wire.FlagAck, mine, d); err != nil {
				return nil, err
			}
		}
	}
	return own, nil
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
	mine := wire.Call{Kind: uint8(KindBarrier)}
	_, err := c.collective(ctx, mine, "", nil, func([][]byte) ([]byte, [][]byte, error) { return nil, nil, nil })
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
	mine := wire.Call{Kind: uint8(KindReduce), Type: uint8(typ), Op: uint8(op), Root: rootField(root), Length: uint32(len(data))}
	argErr := firstOf(c.checkRoot(root), checkReduction("reduce", typ, op, len(data)), checkData("reduce", len(data)))
	res, err := c.collective(ctx, mine, argErr, data, func(contrib [][]byte) ([]byte, [][]byte, error) {
		out, err := reduceAll(typ, op, contrib)
		return out, nil, err
	})
	if err != nil {
		return nil, err
	}
	if c.rank != root {
		return []byte{}, nil
	}
	return res, nil
}

// Allreduce is Reduce to rank 0 followed by a broadcast of the result: every
// rank returns the same new bytes.
func (c *Comm) Allreduce(ctx context.Context, typ Type, op Op, data []byte) ([]byte, error) {
	mine := wire.Call{Kind: uint8(KindAllreduce), Type: uint8(typ), Op: uint8(op), Root: 0, Length: uint32(len(data))}
	argErr := firstOf(checkReduction("allreduce", typ, op, len(data)), checkData("allreduce", len(data)))
	return c.collective(ctx, mine, argErr, data, func(contrib [][]byte) ([]byte, [][]byte, error) {
		out, err := reduceAll(typ, op, contrib)
		if err != nil {
			return nil, nil, err
		}
		all := make([][]byte, c.size)
		for i := range all {
			all[i] = out
		}
		return out, all, nil
	})
}

// Bcast returns root's data on every rank (new bytes). Off the root, data
// is ignored and may be nil.
func (c *Comm) Bcast(ctx context.Context, root int, data []byte) ([]byte, error) {
	mine := wire.Call{Kind: uint8(KindBcast), Root: rootField(root)}
	argErr := c.checkRoot(root)
	if argErr == "" && c.rank == root {
		argErr = checkData("bcast", len(data))
	}
	return c.collective(ctx, mine, argErr, nil, func([][]byte) ([]byte, [][]byte, error) {
		own := append([]byte{}, data...)
		all := make([][]byte, c.size)
		for i := range all {
			all[i] = data
		}
		return own, all, nil
	})
}

// Gather returns on root the contributions of every rank concatenated in
// rank order (empty bytes elsewhere). All contributions must have the same
// length (else H1613).
func (c *Comm) Gather(ctx context.Context, root int, data []byte) ([]byte, error) {
	mine := wire.Call{Kind: uint8(KindGather), Root: rootField(root), Length: uint32(len(data))}
	argErr := firstOf(c.checkRoot(root), checkData("gather", len(data)))
	res, err := c.collective(ctx, mine, argErr, data, func(contrib [][]byte) ([]byte, [][]byte, error) {
		if err := sameLengths("gather", contrib); err != nil {
			return nil, nil, err
		}
		out := make([]byte, 0, len(data)*c.size)
		for _, d := range contrib {
			out = append(out, d...)
		}
		return out, nil, nil
	})
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
	mine := wire.Call{Kind: uint8(KindScatter), Root: rootField(root)}
	argErr := c.checkRoot(root)
	if argErr == "" && c.rank == root {
		argErr = checkData("scatter", len(data))
	}
	return c.collective(ctx, mine, argErr, nil, func([][]byte) ([]byte, [][]byte, error) {
		if len(data)%c.size != 0 {
			return nil, nil, codes.New(codes.CollectiveMismatch, "scatter: %d bytes are no whole number of %d blocks", len(data), c.size)
		}
		n := len(data) / c.size
		out := make([][]byte, c.size)
		for i := range out {
			out[i] = data[i*n : (i+1)*n]
		}
		return append([]byte{}, out[c.rank]...), out, nil
	})
}

func sameLengths(op string, contrib [][]byte) error {
	for r, d := range contrib {
		if len(d) != len(contrib[0]) {
			return codes.New(codes.CollectiveMismatch, "%s: contributions of different lengths: rank %d gave %d bytes, rank 0 gave %d", op, r, len(d), len(contrib[0]))
		}
	}
	return nil
}
