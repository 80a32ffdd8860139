package runtime

import (
	"context"
	"fmt"
	"strings"

	"sperli/codes"
	"sperli/runtime/bufpool"
)

// AnySource and AnyTag are the wildcards of a receive or probe (SPEC §8.1):
// a message from any rank, of any tag. A receive that names one tells which
// source and tag it got (RecvFrom, RecvOp.Envelope).
const (
	AnySource = -1
	AnyTag    = -1
)

// Envelope is what a receive or probe got (MPI's status): the message's
// source rank, its tag and its length in bytes.
type Envelope struct {
	Source int
	Tag    int
	Length int
}

// recvOpFor checks a receive's source and tag (either may be a wildcard)
// and makes its operation.
func (c *Comm) recvOpFor(op string, source, tag int) (*recvOp, error) {
	if source != AnySource {
		if err := c.checkPeer(op, source); err != nil {
			return nil, err
		}
	}
	if tag != AnyTag {
		if err := checkTag(op, tag); err != nil {
			return nil, err
		}
	}
	r := &recvOp{ctx: c.ctxID, src: source, anySrc: source == AnySource, anyTag: tag == AnyTag, done: make(chan struct{})}
	if !r.anySrc {
		r.src = c.worldRank(source)
		// The link is made now if it is not there (SPEC §18): a receive
		// from a rank that has finished, or is lost, then learns it
		// from the link itself.
		c.linkRank(r.src)
	} else {
		c.linkMembers() // any rank may send: each one's end must be heard
	}
	if !r.anyTag {
		r.tag = uint32(tag)
	}
	return r, nil
}

// peerOf is the connection that alone can complete r, or nil (a wildcard
// source, or this rank itself).
func (c *Comm) peerOf(r *recvOp) *peer {
	if r.anySrc {
		return nil
	}
	return c.peerRank(r.src)
}

// readUntil reads for r until it completes, ctx ends or the job ends: from
// the one connection that can complete it, on the calling goroutine (the
// latency path), or, for a wildcard source, by every reader goroutine now.
func (c *Comm) readUntil(ctx context.Context, r *recvOp) {
	if p := c.peerOf(r); p != nil {
		p.ReadFor(ctx, r.done)
		return
	}
	if r.anySrc {
		for _, p := range c.links.peerList() {
			p.ReadSoon()
		}
	}
}

// Envelope returns what the receive got: its source, tag and length. It is
// valid once FinishRecv has returned the message.
func (op *RecvOp) Envelope() Envelope { return op.c.envelope(op.r) }

// envelope is what r got, its source as a rank of c.
func (c *Comm) envelope(r *recvOp) Envelope {
	return Envelope{Source: c.rankOf(r.gotSrc), Tag: int(r.gotTag), Length: r.gotLen}
}

// RecvFrom is Recv that also tells the source and tag of the message it
// got: source may be AnySource and tag AnyTag. Of the messages that fit, it
// takes the one that arrived first, so one source's messages stay in order.
func (c *Comm) RecvFrom(ctx context.Context, source, tag int) ([]byte, Envelope, error) {
	sp := traceBegin()
	op, err := c.StartRecv(source, tag)
	if err != nil {
		if sp.on() {
			c.traceRecv(sp, "recv_from", nil, err)
		}
		return nil, Envelope{}, err
	}
	data, err := c.finishRecv(ctx, op, true)
	if sp.on() {
		c.traceRecv(sp, "recv_from", op, err)
	}
	if err != nil {
		return nil, Envelope{}, err
	}
	return data, op.Envelope(), nil
}

// Probe waits for a message that fits source and tag (wildcards allowed)
// and tells its source, tag and length without receiving it: the next
// receive that names them gets it. Ranges are checked as for Recv (H1616).
func (c *Comm) Probe(ctx context.Context, source, tag int) (env Envelope, err error) {
	if sp := traceBegin(); sp.on() {
		defer func() {
			sp.call("probe", err, targ("from", c.worldRankOr(env.Source)), targ("tag", env.Tag), targ("bytes", env.Length))
		}()
	}
	r, err := c.recvOpFor("probe", source, tag)
	if err != nil {
		return Envelope{}, err
	}
	c.mu.Lock()
	if err := c.callableLocked("probe"); err != nil {
		c.mu.Unlock()
		return Envelope{}, err
	}
	if c.match.probe(r, true) {
		c.mu.Unlock()
		return c.envelope(r), nil
	}
	if r.anySrc && !c.someCanSendLocked() {
		c.match.withdraw(r)
		c.mu.Unlock()
		return Envelope{}, c.noSenderErr(r)
	}
	r.waiting = true
	if p := c.peerOf(r); p != nil && p.Finished() {
		c.match.withdraw(r)
		c.mu.Unlock()
		return Envelope{}, &codes.Error{Code: codes.Finished, Op: "probe", Rank: source, Msg: fmt.Sprintf("probe: rank %d has finished: probe(%d, %s) can never be matched", source, source, map[bool]string{true: "ANY_TAG", false: fmt.Sprint(tag)}[tag == AnyTag])}
	}
	if !r.anySrc && r.src == c.worldRank(c.rank) {
		// As a receive from itself (neverMatches): a send to itself goes
		// straight to the matcher, so none is on its way.
		c.match.withdraw(r)
		c.mu.Unlock()
		return Envelope{}, &codes.Error{Code: codes.Finished, Op: "probe", Rank: source, Msg: fmt.Sprintf("probe(%d, %d) can never match: it is from this rank itself and no send to itself is pending (send before you probe)", source, tag)}
	}
	c.mu.Unlock()
	c.readUntil(ctx, r)
	select {
	case <-r.done:
	case <-ctx.Done():
		c.mu.Lock()
		gone := c.match.withdraw(r)
		c.mu.Unlock()
		if gone {
			return Envelope{}, ctx.Err()
		}
		<-r.done
	}
	if r.err != nil {
		return Envelope{}, r.err
	}
	return c.envelope(r), nil
}

// Iprobe is Probe that does not wait: ok is false when no message that
// fits is here yet.
func (c *Comm) Iprobe(source, tag int) (env Envelope, ok bool, err error) {
	r, err := c.recvOpFor("iprobe", source, tag)
	if err != nil {
		return Envelope{}, false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.callableLocked("iprobe"); err != nil {
		return Envelope{}, false, err
	}
	if !c.match.probe(r, false) {
		return Envelope{}, false, nil
	}
	return c.envelope(r), true, nil
}

// Sendrecv sends data to dest with sendtag and receives from source with
// recvtag (wildcards allowed) at once: the receive is posted before the
// send starts, so a ring shift where every rank sends to its right and
// receives from its left never deadlocks, whatever the message size. data
// belongs to the runtime from the call on; the result is new.
func (c *Comm) Sendrecv(ctx context.Context, dest, sendtag int, data []byte, source, recvtag int) (got []byte, env Envelope, err error) {
	if sp := traceBegin(); sp.on() {
		defer func() {
			sp.call("sendrecv", err, targ("to", c.worldRankOr(dest)), targ("sendtag", sendtag), targ("bytes", len(data)),
				targ("from", c.worldRankOr(env.Source)), targ("recvtag", env.Tag), targ("got_bytes", len(got)))
		}()
	}
	if err := c.checkSend("sendrecv", dest, sendtag, len(data)); err != nil {
		return nil, Envelope{}, err
	}
	rop, err := c.StartRecv(source, recvtag)
	if err != nil {
		return nil, Envelope{}, err
	}
	sop, err := c.StartSend(dest, sendtag, data)
	if err != nil {
		c.abandonRecv(rop)
		return nil, Envelope{}, err
	}
	if err := c.FinishSend(ctx, sop); err != nil {
		c.abandonRecv(rop)
		return nil, Envelope{}, err
	}
	got, err = c.finishRecv(ctx, rop, true)
	if err != nil {
		return nil, Envelope{}, err
	}
	return got, rop.Envelope(), nil
}

// abandonRecv withdraws an open receive the caller will never finish.
func (c *Comm) abandonRecv(op *RecvOp) {
	c.mu.Lock()
	c.match.withdraw(op.r)
	delete(c.open, op)
	c.mu.Unlock()
}

// A receive or probe from ANY_SOURCE waits for ever no more (SPEC §10.3):
// when a rank that could have sent it is lost (under LossReturn: MPI's
// PROC_FAILED_PENDING) it raises H1611 once, and when no rank that could
// send is left (each other member finished or lost) H1617, when it is
// waited in then, or as the last one goes (not when posted: a send to
// itself may still come first). Either way it is no longer posted.
// Later any-source receives wait for the live ranks that remain: the loss
// is taken as known once it was raised (as ULFM's failure_ack).

// anySourceEndsLocked removes the any-source receives and probes that can
// no longer be matched, their errors set, and returns them to be closed:
// with lost ≥ 0 (a job rank just lost) those of every communicator it is
// a member of, and those whose communicator has no member left that could
// send. Call with c.mu held.
func (c *Comm) anySourceEndsLocked(lost int, why string) []*recvOp {
	left := map[uint32]bool{}
	return c.match.cancel(func(op *recvOp) bool {
		if !op.anySrc || !op.waiting {
			return false // one posted and not waited in yet is checked when it is (anySourceEndedLocked)
		}
		cm := c.comms[op.ctx]
		if cm == nil {
			return false
		}
		if lost >= 0 && cm.rankOf(lost) >= 0 && lost != cm.worldRank(cm.rank) {
			r := cm.rankOf(lost)
			op.err = lostSenderErr(op, r, why)
			return true
		}
		can, seen := left[op.ctx]
		if !seen {
			can = cm.someCanSendLocked()
			left[op.ctx] = can
		}
		if !can {
			op.err = cm.noSenderErr(op)
			return true
		}
		return false
	})
}

// anySourceEndedLocked is the error of an any-source receive about to be
// waited in that could wait for ever: a member of c was lost since it was
// posted (H1611, once: that loss is known from then on), or no other
// member is left that could send (H1617). Call with c.mu held.
func (c *Comm) anySourceEndedLocked(op *recvOp) error {
	select {
	case <-op.done:
		return nil // matched already
	default:
	}
	if len(c.failedSlots) > op.lossesAtPost {
		if r, why, lost := c.anyFailedLocked(); lost {
			return lostSenderErr(op, r, why)
		}
	}
	if !c.someCanSendLocked() {
		return c.noSenderErr(op)
	}
	return nil
}

// someCanSendLocked reports whether a rank of c other than this one may
// still send: it has not finished (no bye) and is not known lost.
func (c *Comm) someCanSendLocked() bool {
	for r := 0; r < c.size; r++ {
		if r != c.rank && c.canSendLocked(r) {
			return true
		}
	}
	return false
}

// canSendLocked reports whether rank r of c may still send: it has not
// finished (no bye) and is not known lost. A rank with no link yet may
// (a wildcard receive makes the links, linkMembers).
func (c *Comm) canSendLocked(r int) bool {
	w := c.worldRank(r)
	if s := c.layout.Slot(w); s < 0 || s == c.links.self {
		return false
	}
	if p := c.peerRank(w); p != nil && p.Finished() {
		return false
	}
	if len(c.failedSlots) > 0 {
		if _, lost := c.failedSlots[c.world.layout.Slot(w)]; lost {
			return false
		}
	}
	return true
}

// lostSenderErr is the H1611 of an any-source op whose rank r, which could
// have sent it, was lost.
func lostSenderErr(op *recvOp, r int, why string) error {
	return codes.Lost(opName(op), r, "%s: rank %d, which could have sent it, lost: %s", opText(op), r, why)
}

// noSenderErr is the H1617 of an any-source op no rank is left to match.
func (c *Comm) noSenderErr(op *recvOp) error {
	return &codes.Error{Code: codes.Finished, Op: opName(op), Rank: -1,
		Msg: fmt.Sprintf("%s can never be matched: every other rank has finished or is lost", opText(op))}
}

// opText is op as the program called it: "recv(any source, tag 3)".
func opText(op *recvOp) string {
	return strings.Replace(recvWait{r: op}.String(), "recv(", opName(op)+"(", 1)
}

func opName(op *recvOp) string {
	if op.probe {
		return "probe"
	}
	return "recv"
}

// Release hands a message this rank received (from Recv, FinishRecv or a
// collective's result) back to the runtime, which may reuse its memory for
// a later message: the caller must not use msg, or any slice of it, after
// the call. It is optional and never required for correctness; a program
// that receives many large messages runs faster with it, as an MPI program
// receives into the same buffer again.
func (c *Comm) Release(msg []byte) { bufpool.Put(msg) }

// linkMembers makes the links to every member of c that has none: a
// wildcard receive must hear of each one's end (SPEC §10.3).
func (c *Comm) linkMembers() {
	for r := 0; r < c.size; r++ {
		if s := c.layout.Slot(c.worldRank(r)); s >= 0 {
			c.links.link(s)
		}
	}
}
