package runtime

import (
	"fmt"
	"sync"

	"sperli/codes"
	"sperli/record"
	"sperli/runtime/mesh"
	"sperli/topo"
	"sperli/wire"
)

// The end of a job over links on demand (SPEC §18; protocol.md §6.4).
// Finish is collective in effect, like MPI_Finalize: it returns once every
// rank has finished (or is lost), and a spare ends once they all have. No
// slot has a link to every other, so this is learnt over the spanning
// tree, healed around lost slots (package topo):
//
//   - a rank that finishes tells every link it has, in order behind its
//     last data (a fin frame, "finished"), and every link made to it
//     later: a receive from it is then H1617, a wildcard receive learns
//     that one sender fewer is left;
//   - a slot whose own part is done (a rank that finished, or a spare) and
//     whose every live child in the tree said its subtree is done says so
//     to its live parent ("up");
//   - the live root, the lowest live slot, then knows that the whole job
//     is done and says so down the tree ("all"); a slot that hears it
//     passes it on to its children.
//
// Only then do the slots say bye on their links and close them. A loss
// while this goes on changes the healed tree: the children of a lost slot
// report to its live parent, so a slot reports again when its parent
// changed, and a report that comes to a slot that knows the job done is
// answered with the news. Reports only grow truer as slots are lost (a
// lost slot is nothing to wait for), so none is ever taken back.

// Kinds of fin frames (the payload's one byte).
const (
	finFinished byte = 1 // the sender's program finished: no more data comes
	finUp       byte = 2 // the sender's subtree is done
	finAll      byte = 3 // every rank of the job is done
)

// finState is a generation's part of the end of the job; under mu.
type finState struct {
	mu       sync.Mutex
	finished bool         // this rank called Finish
	reports  map[int]bool // slots whose "up" came
	sentTo   int          // the parent the "up" went to; -1 none
	all      bool         // the job is done
	done     chan struct{}
}

func (f *finState) init() {
	f.reports = map[int]bool{}
	f.sentTo = -1
	f.done = make(chan struct{})
}

// lostSlot reports whether slot is lost to the end of c's generation:
// neither a rank nor a spare of its layout, or known lost to this slot
// and a spare, or any slot in a program that manages its losses (its
// generation goes on without them). A rank lost in a job with spares is
// not done: the next generation replaces it, and this one does not end.
func (c *core) lostSlot(s int) bool {
	if c.rankOf(s) < 0 && !c.layout.IsSpare(s) {
		return true
	}
	// A lost spare is nothing to wait for in any mode.
	return (c.links.lossReturn.Load() || c.rankOf(s) < 0) && c.links.knownLost(s)
}

// finStep sends what this slot's part of the end now allows.
func (c *core) finStep() {
	f := &c.fin
	n, self := c.links.slots, c.links.self
	f.mu.Lock()
	if f.all {
		f.mu.Unlock()
		return
	}
	mine := f.finished || c.rankOf(self) < 0
	kids := topo.LiveChildren(n, self, c.lostSlot)
	ready := mine
	for _, k := range kids {
		ready = ready && f.reports[k]
	}
	if !ready {
		f.mu.Unlock()
		return
	}
	parent := topo.LiveParent(n, self, c.lostSlot)
	if parent < 0 {
		f.all = true
		f.mu.Unlock()
		c.finSend(kids, finAll)
		close(f.done) // after the news is queued: the byes that follow must not pass it
		return
	}
	if parent == f.sentTo {
		f.mu.Unlock()
		return
	}
	f.sentTo = parent
	f.mu.Unlock()
	c.finSend([]int{parent}, finUp)
}

// finSend sends a fin frame of kind to slots, in order behind what was
// sent to them before.
func (c *core) finSend(slots []int, kind byte) {
	if len(slots) > 0 && kind != finFinished {
		traceInstant(fmt.Sprintf("fin %d to %v", kind, slots), record.TraceRecovery, targ("generation", int(c.inc)))
	}
	for _, s := range slots {
		if p := c.links.link(s); p != nil && !p.Gone() {
			_ = p.Enqueue(&mesh.Frame{H: wire.Header{Type: wire.Fin, Incarnation: c.inc, Length: 1}, Payload: []byte{kind}})
		}
	}
}

// finIn takes a fin frame from p (the frame's generation is c's).
func (c *Comm) finIn(p *peer, payload []byte) error {
	if payload[0] != finFinished {
		traceInstant(fmt.Sprintf("fin %d from %d", payload[0], p.rank), record.TraceRecovery, targ("generation", int(c.inc)))
	}
	switch payload[0] {
	case finFinished:
		from := c.from(p)
		if from < 0 {
			return violation(p.rank, "slot %d, a spare in generation %d, said its program finished", p.rank, c.inc)
		}
		c.peerFinished(p, from)
	case finUp:
		f := &c.fin
		f.mu.Lock()
		if len(f.reports) >= c.links.slots {
			f.mu.Unlock()
			return violation(p.rank, "it sent more reports of the job's end than there are slots")
		}
		f.reports[p.rank] = true
		all := f.all
		f.mu.Unlock()
		if all {
			c.finSend([]int{p.rank}, finAll) // it reported to this slot after the news went down
			return nil
		}
		c.finStep()
	case finAll:
		f := &c.fin
		f.mu.Lock()
		if f.all {
			f.mu.Unlock()
			return nil
		}
		f.all = true
		f.mu.Unlock()
		c.finSend(topo.LiveChildren(c.links.slots, c.links.self, c.lostSlot), finAll)
		close(f.done) // after the news is queued: the byes that follow must not pass it
		c.links.byeSeen()
	default:
		return violation(p.rank, "it sent a fin frame of kind %d", payload[0])
	}
	return nil
}

// peerFinished records that job rank from (over p) finished: its receives
// can never be matched, and a wildcard receive may have no sender left.
func (c *Comm) peerFinished(p *peer, from int) {
	if p.finished.Swap(true) {
		return
	}
	c.mu.Lock()
	ops := c.match.cancelFrom(from)
	wild := c.anySourceEndsLocked(-1, "") // errors set
	c.mu.Unlock()
	for _, op := range ops {
		// The same error as a receive posted after it finished (StartRecv).
		op.err = &codes.Error{Code: codes.Finished, Op: opName(op), Rank: from, Msg: fmt.Sprintf("%s: rank %d has finished: %s(%d, %s) can never be matched", opName(op), from, opName(op), from, map[bool]string{true: "ANY_TAG", false: fmt.Sprint(op.tag)}[op.anyTag])}
		close(op.done)
	}
	for _, op := range wild {
		close(op.done)
	}
	c.wakeAll()
}

// finishedOn tells a link made after this rank finished that it did.
func (c *core) finishedOn(p *peer) {
	if c.finishing() && c.rankOf(c.links.self) >= 0 {
		c.finSend([]int{p.rank}, finFinished)
	}
}

// finishing reports whether this rank called Finish in c's generation.
func (c *core) finishing() bool {
	c.fin.mu.Lock()
	defer c.fin.mu.Unlock()
	return c.fin.finished
}
