package elastic

import (
	"encoding/binary"
	"fmt"
	"slices"

	"sperli/codes"
)

// Kind is the kind of an agreement message.
type Kind uint8

// The messages of the agreement (docs/protocol.md §12.3): Paxos' two
// phases with the coordinator as the proposer and every live slot an
// acceptor, then the decision.
const (
	Prepare  Kind = 1 // coordinator → all: ballot, the failed slots it knows
	Promise  Kind = 2 // → coordinator: the ballot, failed slots, the accepted layout (or the decided one)
	Accept   Kind = 3 // coordinator → all: ballot, the layout
	Accepted Kind = 4 // → coordinator: the ballot
	Decide   Kind = 5 // coordinator → all: the layout, final
	maxKind       = Decide
)

// Msg is one agreement message. Gen is the generation being agreed on
// (the current one + 1).
type Msg struct {
	Kind      Kind
	Gen       int
	Ballot    uint64
	Failed    []int   // Prepare, Promise: slots the sender knows lost
	AccBallot uint64  // Promise: ballot of Layout, when it is an accepted one
	Decided   bool    // Promise: Layout is decided
	Layout    *Layout // Promise (accepted or decided), Accept, Decide
}

// MarshalBinary encodes m: kind u8, flags u8 (1: a layout follows, 2:
// decided), generation u32, ballot u64, accepted ballot u64, failed u16
// count and u16 slots, then the layout.
func (m Msg) MarshalBinary() ([]byte, error) {
	flags := byte(0)
	if m.Layout != nil {
		flags |= 1
	}
	if m.Decided {
		flags |= 2
	}
	b := []byte{byte(m.Kind), flags}
	b = binary.BigEndian.AppendUint32(b, uint32(m.Gen))
	b = binary.BigEndian.AppendUint64(b, m.Ballot)
	b = binary.BigEndian.AppendUint64(b, m.AccBallot)
	b = binary.BigEndian.AppendUint16(b, uint16(len(m.Failed)))
	for _, s := range m.Failed {
		b = binary.BigEndian.AppendUint16(b, uint16(s))
	}
	if m.Layout != nil {
		b = m.Layout.appendTo(b)
	}
	return b, nil
}

// UnmarshalBinary decodes a message of a job of slots slots: H1627 for
// anything an honest slot never sends.
func (m *Msg) UnmarshalBinary(b []byte, slots int) error {
	if len(b) < 24 {
		return bad("message of %d bytes, want at least 24", len(b))
	}
	k, flags := Kind(b[0]), b[1]
	if k < Prepare || k > maxKind || flags&^3 != 0 {
		return bad("message of kind %d with flags %#x", k, flags)
	}
	out := Msg{Kind: k, Gen: int(binary.BigEndian.Uint32(b[2:])), Ballot: binary.BigEndian.Uint64(b[6:]),
		AccBallot: binary.BigEndian.Uint64(b[14:]), Decided: flags&2 != 0}
	if out.Gen < 1 || out.Gen > 1<<31-1 {
		return bad("message for generation %d", out.Gen)
	}
	n := int(binary.BigEndian.Uint16(b[22:]))
	b = b[24:]
	if n > slots || len(b) < 2*n {
		return bad("message names %d failed slots (job of %d, %d bytes left)", n, slots, len(b))
	}
	for i := 0; i < n; i++ {
		s := int(binary.BigEndian.Uint16(b[2*i:]))
		if s >= slots {
			return bad("message names slot %d, job of %d slots", s, slots)
		}
		out.Failed = append(out.Failed, s)
	}
	b = b[2*n:]
	if flags&1 != 0 {
		var l Layout
		rest, err := l.decode(b)
		if err != nil {
			return err
		}
		if len(rest) != 0 {
			return bad("message has %d bytes after its layout", len(rest))
		}
		if l.Slots != slots || l.Gen != out.Gen {
			return bad("message for generation %d carries a layout of generation %d with %d slots (job of %d)", out.Gen, l.Gen, l.Slots, slots)
		}
		out.Layout = &l
	} else if len(b) != 0 {
		return bad("message has %d bytes after its end", len(b))
	}
	needLayout := k == Accept || k == Decide || (k == Promise && (out.Decided || out.AccBallot != 0))
	if needLayout != (out.Layout != nil) || (out.Decided && k != Promise) {
		return bad("%v message with layout %v, decided %v", k, out.Layout != nil, out.Decided)
	}
	*m = out
	return nil
}

func (k Kind) String() string {
	if k >= Prepare && k <= maxKind {
		return [...]string{"", "prepare", "promise", "accept", "accepted", "decide"}[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Out is a message to send to slot To.
type Out struct {
	To  int
	Msg Msg
}

// Agreement is one slot's part in the agreement on the layout of
// generation cur.Gen+1. It is a state machine: each input returns the
// messages to send. Rules and invariants: docs/protocol.md §12.3.
type Agreement struct {
	self int
	cur  Layout
	live []int        // cur.Live()
	lost map[int]bool // slots this slot knows lost (fail-stop: never again trusted)

	// Acceptor.
	promised  uint64
	accBallot uint64
	accepted  *Layout
	decided   *Layout

	// Coordinator of ballot: the round it runs, or 0.
	ballot   uint64
	phase    Kind // Prepare (collecting promises) or Accept (collecting accepteds)
	answers  map[int]Msg
	proposal *Layout
	round    uint64 // rounds this slot has started

	started bool
	err     error
}

// NewAgreement begins this slot's part in the agreement after cur.
func NewAgreement(self int, cur Layout) *Agreement {
	return &Agreement{self: self, cur: cur, live: cur.Live(), lost: map[int]bool{}}
}

func (a *Agreement) gen() int { return a.cur.Gen + 1 }

// quorum is the promises and accepteds a coordinator needs: a majority
// of the slots live at the start, so that two sides of a partition never
// both decide.
func (a *Agreement) quorum() int { return len(a.live)/2 + 1 }

func (a *Agreement) member(s int) bool { return slices.Contains(a.live, s) }

// coordinator is the lowest slot of cur this slot does not know lost.
func (a *Agreement) coordinator() int {
	for _, s := range a.live {
		if !a.lost[s] {
			return s
		}
	}
	return -1
}

func (a *Agreement) failed() []int {
	var out []int
	for _, s := range a.live {
		if a.lost[s] {
			out = append(out, s)
		}
	}
	return out
}

// Failed is every slot of cur this slot knows lost, ascending.
func (a *Agreement) Failed() []int { return a.failed() }

// Decided is the layout of generation cur.Gen+1, once this slot knows it.
func (a *Agreement) Decided() (Layout, bool) {
	if a.decided == nil {
		return Layout{}, false
	}
	return *a.decided, true
}

// Err is why this slot cannot finish the agreement (no quorum left, it
// was declared lost itself, no spare to take a lost rank's place), or nil.
func (a *Agreement) Err() error { return a.err }

// Start reports a loss seen here: failed is every slot known lost.
func (a *Agreement) Start(failed []int) []Out {
	a.started = true
	var out []Out
	for _, s := range failed {
		out = append(out, a.Suspect(s)...)
	}
	return append(out, a.step()...)
}

// Suspect reports another lost slot.
func (a *Agreement) Suspect(slot int) []Out {
	if !a.member(slot) || a.lost[slot] || a.err != nil {
		return nil
	}
	a.started = true
	if slot == a.self {
		a.err = codes.New(codes.PeerLost, "slot %d was declared lost by the others", slot)
		return nil
	}
	a.lost[slot] = true
	if a.decided != nil && a.coordinator() == a.self && slot < a.self {
		// The coordinator that decided may have told only some: the
		// new one, decided itself, tells every live slot again.
		return a.announce()
	}
	return a.step()
}

// Receive takes a message from slot from.
func (a *Agreement) Receive(from int, m Msg) []Out {
	if m.Gen != a.gen() || !a.member(from) || a.err != nil {
		return nil
	}
	if a.lost[from] {
		// A decision is final whoever brings it, even a slot lost since
		// it sent it: a quorum accepted it.
		if m.Kind == Decide {
			a.decide(*m.Layout)
		}
		return nil
	}
	a.started = true
	var out []Out
	for _, s := range m.Failed {
		out = append(out, a.Suspect(s)...)
	}
	if a.err != nil || a.lost[from] {
		return out
	}
	switch m.Kind {
	case Prepare:
		if m.Ballot <= a.promised || int(m.Ballot%uint64(a.cur.Slots)) != from {
			break
		}
		a.promised = m.Ballot
		p := Msg{Kind: Promise, Gen: a.gen(), Ballot: m.Ballot, Failed: a.failed()}
		switch {
		case a.decided != nil:
			p.Layout, p.Decided = a.decided, true
		case a.accepted != nil:
			p.Layout, p.AccBallot = a.accepted, a.accBallot
		}
		out = append(out, Out{from, p})
	case Accept:
		if m.Ballot < a.promised || a.decided != nil {
			if a.decided != nil {
				out = append(out, Out{from, Msg{Kind: Promise, Gen: a.gen(), Ballot: m.Ballot, Layout: a.decided, Decided: true}})
			}
			break
		}
		a.promised, a.accBallot, a.accepted = m.Ballot, m.Ballot, m.Layout
		out = append(out, Out{from, Msg{Kind: Accepted, Gen: a.gen(), Ballot: m.Ballot}})
	case Decide:
		a.decide(*m.Layout)
	case Promise, Accepted:
		if m.Ballot == a.ballot && a.ballot != 0 {
			if m.Kind == Promise && m.Decided {
				a.decide(*m.Layout)
				out = append(out, a.announce()...)
				return out
			}
			if (m.Kind == Promise) == (a.phase == Prepare) {
				a.answers[from] = m
			}
		}
	}
	return append(out, a.step()...)
}

func (a *Agreement) decide(l Layout) {
	if a.decided != nil {
		return
	}
	a.decided = &l
	a.ballot = 0
	for _, s := range l.Lost {
		if s == a.self {
			a.err = codes.New(codes.PeerLost, "slot %d was declared lost by the others in generation %d", s, l.Gen)
		}
	}
}

func (a *Agreement) announce() []Out {
	var out []Out
	for _, s := range a.live {
		if s != a.self && !a.lost[s] {
			out = append(out, Out{s, Msg{Kind: Decide, Gen: a.gen(), Layout: a.decided}})
		}
	}
	return out
}

// alive is the slots of cur not known lost.
func (a *Agreement) alive() []int {
	var out []int
	for _, s := range a.live {
		if !a.lost[s] {
			out = append(out, s)
		}
	}
	return out
}

// step moves the coordinator on: starts a round when this slot has become
// the coordinator, and finishes a phase once every live slot answered.
func (a *Agreement) step() []Out {
	if a.err != nil || a.decided != nil || !a.started {
		return nil
	}
	alive := a.alive()
	if len(alive) < a.quorum() {
		a.err = codes.New(codes.PeerLost, "agreement on generation %d: %d of %d slots live, fewer than a majority", a.gen(), len(alive), len(a.live))
		return nil
	}
	if a.coordinator() != a.self {
		return nil
	}
	if a.ballot == 0 {
		return a.begin()
	}
	for _, s := range alive {
		if _, ok := a.answers[s]; !ok {
			return nil
		}
	}
	if a.phase == Prepare {
		// The value: the accepted layout of the highest ballot if any
		// slot accepted one (it may be decided somewhere), else the next
		// layout of every failed slot the answers name.
		var best *Layout
		var bestB uint64
		for _, m := range a.answers {
			if m.Layout != nil && m.AccBallot > bestB {
				best, bestB = m.Layout, m.AccBallot
			}
		}
		if best == nil {
			next, err := a.cur.Next(a.failed())
			if err != nil {
				a.err = codes.Wrap(codes.PeerLost, err, "agreement on generation %d: %v", a.gen(), err)
				return nil
			}
			best = &next
		}
		a.proposal, a.phase = best, Accept
		a.answers = map[int]Msg{a.self: {Kind: Accepted, Ballot: a.ballot}}
		a.promised, a.accBallot, a.accepted = a.ballot, a.ballot, best
		var out []Out
		for _, s := range alive {
			if s != a.self {
				out = append(out, Out{s, Msg{Kind: Accept, Gen: a.gen(), Ballot: a.ballot, Layout: best}})
			}
		}
		return append(out, a.step()...)
	}
	a.decide(*a.proposal)
	return a.announce()
}

// begin starts a round with a ballot above every one this slot has seen.
func (a *Agreement) begin() []Out {
	n := uint64(a.cur.Slots)
	a.round = max(a.round+1, a.promised/n+1)
	a.ballot = a.round*n + uint64(a.self)
	a.phase = Prepare
	a.promised = a.ballot
	self := Msg{Kind: Promise, Ballot: a.ballot, Failed: a.failed()}
	if a.accepted != nil {
		self.Layout, self.AccBallot = a.accepted, a.accBallot
	}
	a.answers = map[int]Msg{a.self: self}
	var out []Out
	for _, s := range a.alive() {
		if s != a.self {
			out = append(out, Out{s, Msg{Kind: Prepare, Gen: a.gen(), Ballot: a.ballot, Failed: a.failed()}})
		}
	}
	return append(out, a.step()...)
}
