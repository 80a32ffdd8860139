package runtime

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"

	"sperli/codes"
	"sperli/elastic"
	"sperli/record"
	"sperli/topo"
	"sperli/wire"
)

// Programs that manage losses themselves (SPEC §10.3), in the manner of
// ULFM: after SetOnLoss(LossReturn) a loss ends neither the job nor the
// generation; a call that needs a lost rank returns H1611, and the
// program uses Failed, Revoke, Agree, Shrink and Grow.

// LossMode says what a loss does.
type LossMode int

const (
	// LossRecover is the default: in place with spares (SPEC §10.2),
	// else the job ends (H1611 here, H1612 elsewhere).
	LossRecover LossMode = iota
	// LossReturn keeps the job running: calls that need a lost rank
	// return H1611; the others go on.
	LossReturn
)

// SetOnLoss sets what a loss does, for the whole job. Every rank makes
// the call, in the same order as its collectives (it is not one: it
// changes only this rank, at once).
func (c *Comm) SetOnLoss(m LossMode) error {
	if m != LossRecover && m != LossReturn {
		return &codes.Error{Code: codes.OutOfRange, Op: "set_on_loss", Rank: -1, Msg: fmt.Sprintf("set_on_loss: mode %d, want LossRecover or LossReturn", m)}
	}
	c.mu.Lock()
	err := c.err // not the revoke: a rank that comes late to it may find its communicator revoked by the others
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if c.links.lossReturn.Swap(m == LossReturn) != (m == LossReturn) && c.links.rec != nil {
		// The launcher keeps such a job running after a loss.
		c.links.rec.reportOwn("mode", 0, map[bool]string{true: "return", false: "recover"}[m == LossReturn])
	}
	return nil
}

// lostReturn records the loss of slot in LossReturn mode: its connection
// closes, the receives from it and the collectives that wait for it
// return H1611; nothing else ends.
func (c *Comm) lostReturn(slot int, why string) {
	c.mu.Lock()
	if _, seen := c.failedSlots[slot]; seen {
		c.mu.Unlock()
		return
	}
	c.failedSlots[slot] = why
	rank := c.rankOf(slot)
	var ops, wild []*recvOp
	if rank >= 0 {
		ops = c.match.cancelFrom(rank)
		wild = c.anySourceEndsLocked(rank, why) // errors set
	}
	c.mu.Unlock()
	c.links.drop(slot, why)
	for _, op := range ops {
		op.err = c.lostErr("recv", rank, why)
		close(op.done)
	}
	for _, op := range wild {
		close(op.done)
	}
	c.wakeAll()
	c.links.wakeLosses()
	c.agrees.suspect(slot)
	if c.links.rec != nil {
		c.links.rec.note(slot, why)
	}
}

func (c *Comm) lostErr(op string, rank int, why string) error {
	return codes.Lost(op, rank, "%s: rank %d lost: %s", op, rank, why)
}

// peerFailedLocked is the error of a call on c that needs rank r of c
// when it is lost or c is revoked; nil otherwise. Call with c.mu held.
func (c *Comm) peerFailedLocked(op string, r int) error {
	if c.revoked {
		return c.revokedErr(op)
	}
	if len(c.failedSlots) == 0 || r < 0 || r >= c.size {
		return nil // the common case, on every send, receive and collective frame taken
	}
	s := c.world.layout.Slot(c.worldRank(r))
	if s < 0 {
		return nil
	}
	if why, lost := c.failedSlots[s]; lost {
		return c.lostErr(op, r, why)
	}
	return nil
}

// failedRankLocked reports whether some rank of c is lost.
func (c *Comm) anyFailedLocked() (int, string, bool) {
	for r := 0; r < c.size; r++ {
		if why, lost := c.failedSlots[c.slotOfLocked(r)]; lost {
			return r, why, true
		}
	}
	return -1, "", false
}

func (c *Comm) slotOfLocked(r int) int { return c.world.layout.Slot(c.worldRank(r)) }

func (c *Comm) revokedErr(op string) error {
	return &codes.Error{Code: codes.Revoked, Op: op, Rank: -1, Msg: fmt.Sprintf("%s: the communicator was revoked", op)}
}

// Failed returns the ranks of c this rank knows lost, sorted; the list
// only grows.
func (c *Comm) Failed() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for r := 0; r < c.size; r++ {
		if _, lost := c.failedSlots[c.slotOfLocked(r)]; lost {
			out = append(out, r)
		}
	}
	return out
}

// Revoke makes every live rank's calls on c, pending and later, return
// H1626, except Failed, Agree and Shrink. It reaches every rank even when
// this one is lost meanwhile: each rank passes it on once.
func (c *Comm) Revoke() error {
	traceInstant("revoke", record.TraceCalls)
	c.revoke(-1)
	return nil
}

func (c *Comm) revoke(from int) {
	c.mu.Lock()
	if c.revoked {
		c.mu.Unlock()
		return
	}
	c.revoked = true
	ops := c.match.cancelCtx(c.ctxID)
	c.mu.Unlock()
	for _, op := range ops {
		op.err = c.revokedErr("recv")
		close(op.done)
	}
	c.coll.wake(nil)
	payload := binary.BigEndian.AppendUint32(nil, c.ctxID)
	for _, r := range c.revokeTo() {
		if p := c.linkAt(r); p != nil && c.worldRank(r) != from && !p.Gone() {
			p.ControlOf(c.inc, wire.Revoke, payload)
		}
	}
}

// revokeTo is the ranks of c a revoke goes to from this rank (SPEC §18,
// news for all): the tree and the ring of c's ranks (package topo),
// healed around the ranks this slot knows lost, and every rank of c it
// has a link to already. Every rank that learns of the revoke first passes
// it on the same way, so it reaches every live rank of c over a few links
// each; to every rank at once, a revoke after a shrink made a link to
// every other rank (a handshake each) where the collectives need a few.
func (c *Comm) revokeTo() []int {
	if c.rank < 0 || c.size <= 2 {
		all := make([]int, c.size)
		for r := range all {
			all[r] = r
		}
		return all
	}
	slots := make([]int, c.size)
	for r := range slots {
		slots[r] = -1
		slots[r] = c.layout.Slot(c.worldRank(r))
	}
	lost := func(r int) bool { return slots[r] < 0 || c.links.knownLost(slots[r]) }
	to := topo.Neighbours(c.size, c.rank, lost)
	for r, s := range slots {
		if s < 0 || r == c.rank || slices.Contains(to, r) {
			continue
		}
		if p := c.links.peer(s); p != nil && p.Attached() && !p.Gone() {
			to = append(to, r)
		}
	}
	return to
}

// revokeIn takes a revoke frame from job rank from.
func (c *Comm) revokeIn(from int, payload []byte) error {
	id := binary.BigEndian.Uint32(payload)
	c.mu.Lock()
	to, ok := c.comms[id]
	c.mu.Unlock()
	if !ok {
		return nil // a communicator this rank has not made, or has left
	}
	if to.rankOf(from) < 0 {
		return violation(from, "it revoked communicator %d, which it is not in", id)
	}
	to.revoke(from)
	return nil
}

// The calls whose consensus an Agree instance is (its input's last byte):
// a program's agree, or the first step of a shrink or grow. A rank in
// agree and another in shrink would otherwise take one instance for the
// same call and go on to different next calls, and wait for ever.
const (
	agreeOfAgree  = 0
	agreeOfShrink = 1
	agreeOfGrow   = 2
)

var agreeCallName = [...]string{"agree", "shrink", "grow"}

// agreeMismatch is a decided Agree's disagreement: slot A made call
// KindA, slot B call KindB.
type agreeMismatch struct {
	A, B         int
	KindA, KindB byte
}

// agreeValue is the decided value of an Agree: the AND of the flags, the
// failed slots, and a mismatch byte (0: none; 1: then two slots and
// their calls that differ, u32 and u8 each).
func agreeValue(flag uint64, failed []int, mis *agreeMismatch) []byte {
	b := binary.BigEndian.AppendUint64(nil, flag)
	b = binary.BigEndian.AppendUint32(b, uint32(len(failed)))
	for _, s := range failed {
		b = binary.BigEndian.AppendUint32(b, uint32(s))
	}
	if mis == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.BigEndian.AppendUint32(b, uint32(mis.A))
	b = append(b, mis.KindA)
	b = binary.BigEndian.AppendUint32(b, uint32(mis.B))
	return append(b, mis.KindB)
}

func parseAgreeValue(b []byte, slots int) (uint64, []int, *agreeMismatch, error) {
	if len(b) < 13 {
		return 0, nil, nil, codes.New(codes.ProtocolViolation, "agree: a decided value of %d bytes", len(b))
	}
	flag := binary.BigEndian.Uint64(b)
	n := int(binary.BigEndian.Uint32(b[8:]))
	rest := len(b) - 12 - 4*n
	if n > slots || rest < 1 || (b[len(b)-rest] == 0 && rest != 1) || (b[len(b)-rest] == 1 && rest != 11) || b[len(b)-rest] > 1 {
		return 0, nil, nil, codes.New(codes.ProtocolViolation, "agree: a decided value of %d bytes naming %d slots", len(b), n)
	}
	var failed []int
	for i := 0; i < n; i++ {
		s := int(binary.BigEndian.Uint32(b[12+4*i:]))
		if s >= slots {
			return 0, nil, nil, codes.New(codes.ProtocolViolation, "agree: a decided value names slot %d of %d", s, slots)
		}
		failed = append(failed, s)
	}
	if rest == 1 {
		return flag, failed, nil, nil
	}
	m := b[12+4*n+1:]
	mis := &agreeMismatch{A: int(binary.BigEndian.Uint32(m)), KindA: m[4], B: int(binary.BigEndian.Uint32(m[5:])), KindB: m[9]}
	if mis.A >= slots || mis.B >= slots || int(mis.KindA) >= len(agreeCallName) || int(mis.KindB) >= len(agreeCallName) || mis.KindA == mis.KindB {
		return 0, nil, nil, codes.New(codes.ProtocolViolation, "agree: a decided value with a mismatch of slots %d, %d calls %d, %d", mis.A, mis.B, mis.KindA, mis.KindB)
	}
	return flag, failed, mis, nil
}

// agrees holds a generation's consensus instances of Agree, by
// communicator and call number, and the messages that came for one this
// rank has not started.
type agrees struct {
	mu    sync.Mutex
	insts map[[2]uint32]*agreeInst
	early map[[2]uint32][]agreeMsg
	n     int // early messages kept
	// What the engines returned, to send in that order with mu not held
	// (flush), and whether a goroutine is sending it now.
	out      []agreeSend
	flushing bool
}

// agreeSend is one step's messages of an instance, and whether the
// instance is done after them (its done closes once they are queued).
type agreeSend struct {
	in   *agreeInst
	outs []elastic.Out
	done bool
}

type agreeInst struct {
	c    *Comm
	eng  *elastic.Agreement
	done chan struct{} // closed when decided or failed
	shut bool
}

type agreeMsg struct {
	from int
	m    elastic.Msg
}

// maxEarlyAgree bounds the messages kept for Agree calls not yet made.
const maxEarlyAgree = 4096

func (a *agrees) suspect(slot int) {
	a.mu.Lock()
	for _, in := range a.insts {
		a.queue(in, in.eng.Suspect(slot))
	}
	a.mu.Unlock()
	a.flush()
}

// in takes an agree message for communicator id, call k, from slot from.
func (a *agrees) in(from int, id, k uint32, m elastic.Msg) error {
	a.mu.Lock()
	key := [2]uint32{id, k}
	in, ok := a.insts[key]
	if !ok {
		defer a.mu.Unlock()
		if a.n >= maxEarlyAgree {
			return violation(from, "it sent more than %d agree messages for calls this rank has not made", maxEarlyAgree)
		}
		if a.early == nil {
			a.early = map[[2]uint32][]agreeMsg{}
		}
		a.early[key] = append(a.early[key], agreeMsg{from, m})
		a.n++
		return nil
	}
	a.queue(in, in.eng.Receive(from, m))
	a.mu.Unlock()
	a.flush()
	return nil
}

// queue takes what in's engine returned: messages to send and, once the
// instance decided or failed, the close of its done. Call with a.mu held,
// and flush once it is unlocked.
func (a *agrees) queue(in *agreeInst, outs []elastic.Out) {
	s := agreeSend{in: in, outs: outs}
	if !in.shut {
		if _, ok := in.eng.Decided(); ok || in.eng.Err() != nil {
			in.shut, s.done = true, true
		}
	}
	if len(s.outs) > 0 || s.done {
		a.out = append(a.out, s)
	}
}

// flush sends what queue took, in the order the engines returned it, with
// no mutex held: one goroutine at a time sends, and one that finds another
// sending leaves its messages to it, so that the frames to a slot leave in
// the order they were made.
func (a *agrees) flush() {
	a.mu.Lock()
	if a.flushing {
		a.mu.Unlock()
		return
	}
	a.flushing = true
	for len(a.out) > 0 {
		batch := a.out
		a.out = nil
		a.mu.Unlock()
		for _, s := range batch {
			s.in.send(s.outs)
			if s.done {
				close(s.in.done) // after its last messages are queued: the caller may end at once
			}
		}
		a.mu.Lock()
	}
	a.flushing = false
	a.mu.Unlock()
}

// send queues outs on their links.
func (in *agreeInst) send(outs []elastic.Out) {
	for _, o := range outs {
		p := in.c.links.link(o.To)
		if p == nil || p.Gone() {
			continue
		}
		b, err := o.Msg.MarshalBinary()
		if err != nil {
			continue
		}
		head := []byte{agreeComm}
		head = binary.BigEndian.AppendUint32(head, in.c.ctxID)
		head = binary.BigEndian.AppendUint32(head, uint32(o.Msg.Gen))
		p.ControlOf(in.c.inc, wire.Agree, append(head, b...))
		p.ReadSoon()
	}
}

// Purposes of an agree frame (its first byte, protocol.md §12).
const (
	agreeLayout  = 0 // the agreement on the next generation's layout after a loss (in-place recovery)
	agreeComm    = 1 // a Comm.Agree: then the communicator id and the call number, u32 each
	agreeRegroup = 2 // the agreement on the next generation's layout a shrink or grow asks for
)

// Agree is a collective over the live ranks of c: it returns the bitwise
// AND of their flags, the same on every live rank, and after it Failed is
// the same on every live rank. It works on a revoked communicator. It
// needs a majority of c's ranks live (else H1611: two sides of a
// partition must not both go on).
func (c *Comm) Agree(ctx context.Context, flag uint64) (out uint64, err error) {
	if sp := traceBegin(); sp.on() {
		defer func() { sp.call("agree", err, targ("flag", int(flag)), targ("result", int(out))) }()
	}
	return c.agreeAs(ctx, flag, agreeOfAgree)
}

// agreeAs is Agree as the first step of call kind (agreeOf…).
func (c *Comm) agreeAs(ctx context.Context, flag uint64, kind byte) (out uint64, err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return 0, c.err
	}
	c.agreeN++
	k := c.agreeN
	members := make([]int, c.size)
	for r := range members {
		members[r] = c.slotOfLocked(r)
	}
	var known []int
	for _, s := range members {
		if _, lost := c.failedSlots[s]; lost {
			known = append(known, s)
		}
	}
	c.mu.Unlock()
	slots := c.links.slots
	// The proofs of this call's decision prove nothing in another
	// generation's or communicator's.
	domain := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32([]byte{agreeComm}, c.inc), c.ctxID)
	eng := elastic.NewConsensus(c.links.self, members, slots, int(k), c.links.agreeKeys(domain...), func(failed []int, inputs map[int][]byte) ([]byte, error) {
		and := ^uint64(0)
		var mis *agreeMismatch
		first := -1
		for _, s := range members { // in slot order, so the value names the same slots whoever decides
			in, ok := inputs[s]
			if !ok {
				continue
			}
			if len(in) != 9 || int(in[8]) >= len(agreeCallName) {
				return nil, codes.New(codes.ProtocolViolation, "agree: an input of %d bytes from slot %d", len(in), s)
			}
			and &= binary.BigEndian.Uint64(in)
			if first < 0 {
				first = s
			} else if k0 := inputs[first][8]; in[8] != k0 && mis == nil {
				mis = &agreeMismatch{A: first, KindA: k0, B: s, KindB: in[8]}
			}
		}
		return agreeValue(and, failed, mis), nil
	})
	in := &agreeInst{c: c, eng: eng, done: make(chan struct{})}
	a := &c.agrees
	a.mu.Lock()
	if a.insts == nil {
		a.insts = map[[2]uint32]*agreeInst{}
	}
	key := [2]uint32{c.ctxID, uint32(k)}
	a.insts[key] = in
	a.queue(in, eng.SetInput(append(binary.BigEndian.AppendUint64(nil, flag), kind)))
	a.queue(in, eng.Start(known))
	for _, e := range a.early[key] {
		a.queue(in, eng.Receive(e.from, e.m))
	}
	a.n -= len(a.early[key])
	delete(a.early, key)
	a.mu.Unlock()
	a.flush()
	defer leaveWait(enterWait(collWait{uint64(k), wire.Call{Kind: wire.CollAgree}, -1}, c.worldRank(c.rank), -1))
	select {
	case <-in.done:
	case <-c.dead:
		return 0, c.deadErr()
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	a.mu.Lock()
	v, _ := eng.Decided()
	err = eng.Err()
	a.mu.Unlock()
	if err != nil {
		return 0, err
	}
	and, failed, mis, err := parseAgreeValue(v, slots)
	if err != nil {
		return 0, err
	}
	if mis != nil {
		// The same on every live rank: each ends the job with it.
		rankOf := func(s int) string {
			for r := range members {
				if members[r] == s {
					return fmt.Sprintf("rank %d", r)
				}
			}
			return fmt.Sprintf("slot %d", s)
		}
		return 0, c.mismatch("collective mismatch in agree call %d: %s called %s, %s called %s", k, rankOf(mis.A), agreeCallName[mis.KindA], rankOf(mis.B), agreeCallName[mis.KindB])
	}
	for _, s := range failed {
		if s != c.links.self {
			c.lostReturn(s, "agreed lost")
		}
	}
	if slices.Contains(failed, c.links.self) {
		return 0, codes.LostNoCause("agree", c.rank, "agree: the others agreed that this rank is lost")
	}
	return and, nil
}

// agreeIn takes a Comm.Agree message (its frame's payload) from p.
func (c *Comm) agreeIn(p *peer, payload []byte) error {
	if len(payload) < 9 || payload[0] != agreeComm {
		return violation(p.rank, "it sent an agree frame of %d bytes, purpose %d", len(payload), payload[0])
	}
	id, k := binary.BigEndian.Uint32(payload[1:]), binary.BigEndian.Uint32(payload[5:])
	var m elastic.Msg
	if err := m.UnmarshalBinary(payload[9:], c.links.slots); err != nil {
		return violation(p.rank, "%s", codes.Message(err))
	}
	if m.Gen != int(k) {
		return violation(p.rank, "it sent an agree message of call %d in a frame of call %d", m.Gen, k)
	}
	c.mu.Lock()
	to, ok := c.comms[id]
	c.mu.Unlock()
	if !ok {
		return nil // a communicator this rank has not made (split) or left
	}
	return to.agrees.in(p.rank, id, k, m)
}

// Shrink is a collective over the live ranks of the job's communicator c:
// it returns a new communicator of them, renumbered in their old order,
// in generation + 1 (rank 0's roles pass to the new rank 0); c is revoked.
// With no rank lost it returns c.
func (c *Comm) Shrink(ctx context.Context) (*Comm, error) { return c.regroup(ctx, "shrink") }

// Grow promotes live spares into the places of the lost ranks (the rule
// of in-place recovery) and returns the new communicator, in generation
// + 1; the promoted spares run the program from its start (Run). With no
// rank lost it returns c; without spares enough it is H1611.
func (c *Comm) Grow(ctx context.Context) (*Comm, error) { return c.regroup(ctx, "grow") }

func (c *Comm) regroup(ctx context.Context, op string) (nc *Comm, err error) {
	if sp := traceBegin(); sp.on() {
		defer func() { sp.call(op, err, targ("size", c.size)) }()
	}
	if c.Sub() {
		return nil, &codes.Error{Code: codes.Finished, Op: op, Rank: -1, Msg: fmt.Sprintf("%s: only the job's communicator is shrunk or grown; split the result again", op)}
	}
	if !c.links.lossReturn.Load() {
		return nil, &codes.Error{Code: codes.Finished, Op: op, Rank: -1, Msg: fmt.Sprintf("%s: the job recovers losses itself; call set_on_loss(\"return\") first", op)}
	}
	if now := c.links.cur.Load().inc; now > c.inc {
		// Its agreement would be of a generation the others have left:
		// its frames are dropped, and it would wait for ever.
		return nil, &codes.Error{Code: codes.Finished, Op: op, Rank: -1, Msg: fmt.Sprintf("%s: this communicator is of generation %d, which the job has left (it is in generation %d): %s the communicator the last shrink or grow returned", op, c.inc, now, op)}
	}
	// The failed set, the same on every live rank.
	kind := byte(agreeOfGrow)
	if op == "shrink" {
		kind = agreeOfShrink
	}
	if _, err := c.agreeAs(ctx, 1, kind); err != nil {
		return nil, err
	}
	if len(c.Failed()) == 0 {
		return c, nil
	}
	rec := c.links.rec
	input := elastic.InputGrow
	if op == "shrink" {
		input = elastic.InputShrink
	}
	_, changed := rec.state()
	rec.post(recEvent{lost: -1, from: -1, request: input})
	for {
		fatal, next := rec.state()
		if fatal != nil {
			return nil, fatal
		}
		if c.recovering.Load() {
			// A rank that takes losses in place saw this one first: the
			// job recovers in place, and this program runs again.
			return nil, c.deadErr()
		}
		if nc := c.links.cur.Load(); nc.inc > c.inc {
			c.revoke(-1)
			return nc, nil
		}
		select {
		case <-changed:
			changed = next
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
