package elastic

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"iter"
	"slices"
	"strings"

	"sperli/codes"
)

// Kind is the kind of an agreement message.
type Kind uint8

// The messages of the agreement (docs/protocol.md §12.3): Paxos' two
// phases with the coordinator as the proposer and every live slot an
// acceptor, then the decision.
const (
	Prepare  Kind = 1  // coordinator → all: ballot, the failed slots it knows
	Promise  Kind = 2  // → coordinator: the ballot, failed slots, the accepted layout (or the decided one)
	Accept   Kind = 3  // coordinator → all: ballot, the layout
	Accepted Kind = 4  // → coordinator: the ballot
	Decide   Kind = 5  // coordinator → all: the layout, final
	Report   Kind = 6  // a slot that began → the coordinator: begin too (the failed slots it knows)
	Nack     Kind = 7  // → coordinator: Ballot refused, AccBallot the higher ballot this slot promised
	Confirm  Kind = 8  // a slot that learnt the decision → its live ring neighbours: the value and its proof
	Checked  Kind = 9  // → its parent in the check tree: every member of its subtree confirmed the value with its ring neighbours
	Final    Kind = 10 // the check tree's root → down the tree: every live member did; act on the value
	maxKind       = Final
)

// Msg is one agreement message. Gen names the instance: for the
// agreement on a layout, the generation being agreed on (the current one
// + 1); for comm.agree, the call's number on its communicator.
type Msg struct {
	Kind      Kind
	Gen       int
	Ballot    uint64
	Failed    []int  // Prepare, Promise: slots the sender knows lost
	AccBallot uint64 // Promise: ballot of Value, when it is an accepted one; Nack: the ballot promised
	Decided   bool   // Promise: Value is decided
	Value     []byte // Promise (accepted or decided), Accept, Decide, Confirm: the value; nil when none
	Input     []byte // Promise: the sender's input (comm.agree's flag), nil when none
	Proof     *Proof // Decide, Confirm, a decided Promise: who decided Value, signed
}

// Proof is a decision's certificate: the coordinator that decided the
// value (Origin), the ballot it decided it in, and its Ed25519 signature
// of both with the instance and the value's SHA-256 (Keys.message). Any
// member may carry it on; none can make one in another's name, so a
// coordinator that decides two values has signed both.
type Proof struct {
	Origin int
	Ballot uint64
	Sig    []byte // ed25519.SignatureSize bytes
}

// Keys are what an agreement signs and verifies decisions with: this
// slot's Ed25519 key, the members' public keys (from their TLS
// certificates; nil for a slot not known), and the domain: what the
// instance numbers count (the layout's generations, one communicator's
// agree calls), so that a proof of one agreement proves nothing in
// another.
type Keys struct {
	Own    ed25519.PrivateKey
	Peer   func(slot int) ed25519.PublicKey
	Domain []byte
}

// Prove is the proof this slot (slot self) gives value v decided in
// ballot b of instance inst.
func (k Keys) Prove(self, inst int, b uint64, v []byte) *Proof {
	return &Proof{Origin: self, Ballot: b, Sig: ed25519.Sign(k.Own, k.message(inst, b, v))}
}

// message is the bytes a proof signs.
func (k Keys) message(inst int, ballot uint64, v []byte) []byte {
	h := sha256.Sum256(v)
	b := append([]byte("sperli agreement\x00"), byte(len(k.Domain)))
	b = append(b, k.Domain...)
	b = binary.BigEndian.AppendUint32(b, uint32(inst))
	b = binary.BigEndian.AppendUint64(b, ballot)
	return append(b, h[:]...)
}

// MaxValue bounds a value and an input.
const MaxValue = 1 << 15

// MarshalBinary encodes m: kind u8, flags u8 (1: a value follows, 2:
// decided, 4: an input follows, 8: a proof follows), instance u32,
// ballot u64, accepted ballot u64, failed u32 count and u32 slots, then
// the value and the input, each a u16 length and its bytes, then the
// proof: origin u32, ballot u64, signature (64 bytes).
func (m Msg) MarshalBinary() ([]byte, error) {
	if len(m.Value) > MaxValue || len(m.Input) > MaxValue {
		return nil, fmt.Errorf("agreement: value of %d bytes, input of %d: at most %d", len(m.Value), len(m.Input), MaxValue)
	}
	if m.Proof != nil && len(m.Proof.Sig) != ed25519.SignatureSize {
		return nil, fmt.Errorf("agreement: a proof with a signature of %d bytes", len(m.Proof.Sig))
	}
	flags := byte(0)
	if m.Value != nil {
		flags |= 1
	}
	if m.Decided {
		flags |= 2
	}
	if m.Input != nil {
		flags |= 4
	}
	if m.Proof != nil {
		flags |= 8
	}
	b := []byte{byte(m.Kind), flags}
	b = binary.BigEndian.AppendUint32(b, uint32(m.Gen))
	b = binary.BigEndian.AppendUint64(b, m.Ballot)
	b = binary.BigEndian.AppendUint64(b, m.AccBallot)
	b = binary.BigEndian.AppendUint32(b, uint32(len(m.Failed)))
	for _, s := range m.Failed {
		b = binary.BigEndian.AppendUint32(b, uint32(s))
	}
	for _, v := range [][]byte{m.Value, m.Input} {
		if v != nil {
			b = binary.BigEndian.AppendUint16(b, uint16(len(v)))
			b = append(b, v...)
		}
	}
	if p := m.Proof; p != nil {
		b = binary.BigEndian.AppendUint32(b, uint32(p.Origin))
		b = binary.BigEndian.AppendUint64(b, p.Ballot)
		b = append(b, p.Sig...)
	}
	return b, nil
}

// proofLen is a proof's encoded length.
const proofLen = 4 + 8 + ed25519.SignatureSize

// UnmarshalBinary decodes a message of a job of slots slots: H1627 for
// anything an honest slot never sends.
func (m *Msg) UnmarshalBinary(b []byte, slots int) error {
	if len(b) < 26 {
		return bad("message of %d bytes, want at least 26", len(b))
	}
	k, flags := Kind(b[0]), b[1]
	if k < Prepare || k > maxKind || flags&^15 != 0 {
		return bad("message of kind %d with flags %#x", k, flags)
	}
	out := Msg{Kind: k, Gen: int(binary.BigEndian.Uint32(b[2:])), Ballot: binary.BigEndian.Uint64(b[6:]),
		AccBallot: binary.BigEndian.Uint64(b[14:]), Decided: flags&2 != 0}
	if out.Gen < 1 || out.Gen > 1<<31-1 {
		return bad("message for generation %d", out.Gen)
	}
	n := int(binary.BigEndian.Uint32(b[22:]))
	b = b[26:]
	if n > slots || len(b) < 4*n {
		return bad("message names %d failed slots (job of %d, %d bytes left)", n, slots, len(b))
	}
	for i := 0; i < n; i++ {
		s := int(binary.BigEndian.Uint32(b[4*i:]))
		if s >= slots {
			return bad("message names slot %d, job of %d slots", s, slots)
		}
		out.Failed = append(out.Failed, s)
	}
	b = b[4*n:]
	for i, dst := range []*[]byte{&out.Value, &out.Input} {
		if flags&[]byte{1, 4}[i] == 0 {
			continue
		}
		if len(b) < 2 {
			return bad("message cut short")
		}
		n := int(binary.BigEndian.Uint16(b))
		if n > MaxValue || len(b) < 2+n {
			return bad("message value of %d bytes (%d left, at most %d)", n, len(b)-2, MaxValue)
		}
		*dst = append([]byte{}, b[2:2+n]...)
		b = b[2+n:]
	}
	if flags&8 != 0 {
		if len(b) < proofLen {
			return bad("message proof cut short (%d bytes, want %d)", len(b), proofLen)
		}
		p := &Proof{Origin: int(binary.BigEndian.Uint32(b)), Ballot: binary.BigEndian.Uint64(b[4:]), Sig: append([]byte{}, b[12:proofLen]...)}
		if p.Origin >= slots {
			return bad("message proof by slot %d, job of %d slots", p.Origin, slots)
		}
		out.Proof = p
		b = b[proofLen:]
	}
	if len(b) != 0 {
		return bad("message has %d bytes after its end", len(b))
	}
	final := k == Decide || k == Confirm || k == Checked || k == Final || (k == Promise && out.Decided)
	needValue := final || k == Accept || (k == Promise && out.AccBallot != 0)
	if needValue != (out.Value != nil) || (out.Decided && k != Promise) || (out.Input != nil && k != Promise) || final != (out.Proof != nil) {
		return bad("%v message with value %v, decided %v, input %v, proof %v", k, out.Value != nil, out.Decided, out.Input != nil, out.Proof != nil)
	}
	*m = out
	return nil
}

func (k Kind) String() string {
	if k >= Prepare && k <= maxKind {
		return [...]string{"", "prepare", "promise", "accept", "accepted", "decide", "report", "nack", "confirm", "checked", "final"}[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Out is a message to send to slot To.
type Out struct {
	To  int
	Msg Msg
}

// Agreement is one slot's part in one agreement (consensus) among the
// slots members: on the layout of generation cur.Gen+1 (NewAgreement),
// or on the outcome of a comm.agree (NewConsensus). It is a state
// machine: each input returns the messages to send. Rules and
// invariants: docs/protocol.md §12.3.
type Agreement struct {
	self  int
	inst  int
	slots int
	live  members      // the members, ascending (as runs)
	lost  map[int]bool // slots this slot knows lost (fail-stop: never again trusted)

	// propose makes the coordinator's value from the failed members and
	// the inputs of the others (by slot).
	propose func(failed []int, inputs map[int][]byte) ([]byte, error)
	// check says whether a value a peer brings could have been proposed
	// by an honest coordinator (nil: any value); one that could not
	// names its bringer (H1627).
	check   func(v []byte) error
	input   []byte // this slot's input; nil until SetInput for a consensus that needs one
	ready   bool   // input known: this slot may promise
	waiting []Out  // prepares answered once ready (their Promise is built then)

	// Acceptor.
	promised  uint64
	accBallot uint64
	accepted  []byte
	decided   []byte
	proof     *Proof       // decided's
	confirmed map[int]bool // the members whose confirm of decided came (and this slot)
	// The check of the decision (check.go): the ring neighbours told
	// (confirmSent), the children told the final (finalSent), the check
	// tree's children whose subtree checked (checked), the parent told
	// (checkedTo, -1 none), and the root's word that every live member
	// checked (final).
	confirmSent map[int]bool
	finalSent   map[int]bool
	checked     map[int]bool
	checkedTo   int
	final       bool
	keys        Keys

	// Coordinator of ballot: the round it runs, or 0.
	ballot   uint64
	phase    Kind // Prepare (collecting promises) or Accept (collecting accepteds)
	answers  map[int]Msg
	proposal []byte
	round    uint64 // rounds this slot has started

	started    bool
	reportedTo int          // the coordinator this slot last reported to, -1 for none
	heard      map[int]bool // the members a message of this instance came from
	liar       int          // the slot that lied, or -1
	err        error
	// verified are proofs whose signature checked (checkProof): a
	// decision comes again in every confirm and final, and its signature
	// is checked once. At most maxVerified; an honest agreement has one.
	verified []verifiedProof
}

// verifiedProof is a proof whose signature checked, and its value.
type verifiedProof struct {
	origin int
	ballot uint64
	sig    string
	value  string
}

const maxVerified = 4

// NewAgreement begins this slot's part in the agreement on the layout
// after cur: the value is cur.Next of the failed slots, encoded.
func NewAgreement(self int, cur Layout, keys Keys) *Agreement {
	a := newConsensus(self, cur.liveMembers(), cur.Slots, cur.Gen+1, keys, func(failed []int, _ map[int][]byte) ([]byte, error) {
		next, err := cur.Next(failed)
		if err != nil {
			return nil, err
		}
		return next.MarshalBinary()
	})
	a.check = layoutCheck(cur, false)
	a.SetInput(nil)
	return a
}

// layoutCheck is the check of an agreement on the layout after cur: the
// value must be the layout Next (or, for a regroup, Shrink) makes of the
// slots it names lost, so a peer can bring no layout that no honest
// coordinator proposes (a spare promoted over a lower one, a generation
// skipped, a rank moved).
func layoutCheck(cur Layout, regroup bool) func([]byte) error {
	return func(v []byte) error {
		var l Layout
		if err := l.UnmarshalBinary(v); err != nil {
			return err
		}
		if l.Gen != cur.Gen+1 || l.Slots != cur.Slots {
			return bad("a layout of generation %d with %d slots, want generation %d of %d slots", l.Gen, l.Slots, cur.Gen+1, cur.Slots)
		}
		for _, s := range l.Lost {
			if !cur.IsLive(s) {
				return bad("a layout naming slot %d lost, not live in generation %d", s, cur.Gen)
			}
		}
		if next, err := cur.Next(l.Lost); err == nil && next.Equal(l) {
			return nil
		}
		if regroup {
			if next, err := cur.Shrink(l.Lost); err == nil && next.Equal(l) {
				return nil
			}
		}
		return bad("a layout (ranks %v, spares %v, lost %v) that the rule of SPEC §10.2 does not make of generation %d", l.Ranks(), l.Spares, l.Lost, cur.Gen)
	}
}

// Inputs of a regroup (NewRegroup): what the program asked for.
var (
	InputShrink = []byte("shrink")
	InputGrow   = []byte("grow")
)

// NewRegroup begins this slot's part in the agreement on the layout
// after cur that a program asks for with shrink or grow (SPEC §10.3): the
// value is cur.Shrink of the failed slots when any input asks to shrink,
// else cur.Next (the lost ranks' places taken by spares). The slot
// promises once SetInput gives its request (a spare gives an empty one).
func NewRegroup(self int, cur Layout, keys Keys) *Agreement {
	a := newConsensus(self, cur.liveMembers(), cur.Slots, cur.Gen+1, keys, func(failed []int, inputs map[int][]byte) ([]byte, error) {
		next, err := cur.Next(failed)
		for _, in := range inputs {
			if string(in) == string(InputShrink) {
				next, err = cur.Shrink(failed)
				break
			}
		}
		if err != nil {
			return nil, err
		}
		return next.MarshalBinary()
	})
	a.check = layoutCheck(cur, true)
	return a
}

// NewConsensus begins this slot's part in instance inst of a consensus
// among members (slots of a job of slots slots). It promises nothing
// until SetInput gives its input. keys sign the decision this slot makes
// and verify the ones it is brought.
func NewConsensus(self int, members []int, slots, inst int, keys Keys, propose func(failed []int, inputs map[int][]byte) ([]byte, error)) *Agreement {
	return newConsensus(self, membersOf(members), slots, inst, keys, propose)
}

func newConsensus(self int, live members, slots, inst int, keys Keys, propose func(failed []int, inputs map[int][]byte) ([]byte, error)) *Agreement {
	return &Agreement{self: self, inst: inst, slots: slots, live: live, lost: map[int]bool{}, heard: map[int]bool{}, propose: propose, reportedTo: -1, liar: -1, keys: keys}
}

// SetInput gives this slot's input and answers the prepares that waited
// for it.
func (a *Agreement) SetInput(input []byte) []Out {
	if a.ready {
		return nil
	}
	a.input, a.ready = input, true
	var out []Out
	for _, w := range a.waiting {
		if w.Msg.Ballot == a.promised {
			out = append(out, Out{w.To, a.promise(w.Msg.Ballot)})
		}
	}
	a.waiting = nil
	return append(out, a.step()...)
}

func (a *Agreement) promise(ballot uint64) Msg {
	p := Msg{Kind: Promise, Gen: a.gen(), Ballot: ballot, Failed: a.failed(), Input: a.input}
	if p.Input == nil {
		p.Input = []byte{}
	}
	switch {
	case a.decided != nil:
		p.Value, p.Decided, p.Proof = a.decided, true, a.proof
	case a.accepted != nil:
		p.Value, p.AccBallot = a.accepted, a.accBallot
	}
	return p
}

func (a *Agreement) gen() int { return a.inst }

// quorum is the promises and accepteds a coordinator needs: a majority
// of the slots live at the start, so that two sides of a partition never
// both decide.
func (a *Agreement) quorum() int { return a.live.len()/2 + 1 }

func (a *Agreement) member(s int) bool {
	_, ok := a.live.index(s)
	return ok
}

// coordinator is the lowest slot of cur this slot does not know lost.
func (a *Agreement) coordinator() int {
	for s := range a.live.all() {
		if !a.lost[s] {
			return s
		}
	}
	return -1
}

// failed is the members known lost, ascending. Only members are ever in
// lost (Suspect), so this is O(losses), not O(members): it runs at every
// message.
func (a *Agreement) failed() []int {
	var out []int
	for s := range a.lost {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// allAnswered reports whether every live member answered this phase. The
// answers come from members not known lost when they came (Receive), so
// it counts them less those lost since: O(losses) at each message, where
// walking the members made a coordinator's phase O(members²).
func (a *Agreement) allAnswered() bool {
	have := len(a.answers)
	for s := range a.lost {
		if _, ok := a.answers[s]; ok {
			have--
		}
	}
	return have == a.live.len()-len(a.lost)
}

// Failed is every slot of cur this slot knows lost, ascending.
func (a *Agreement) Failed() []int { return a.failed() }

// Decided is the decided value, once this slot knows it and every live
// member confirmed it (the same value, proved): only then may the slot
// act on it, for a lying coordinator may have decided another value for
// some of them (docs/protocol.md §12.4).
func (a *Agreement) Decided() ([]byte, bool) {
	if a.decided == nil || a.err != nil || !a.final || a.unconfirmed() >= 0 {
		return nil, false
	}
	return a.decided, true
}

// DecidedLayout is the decided layout of an agreement made by
// NewAgreement; a value that is no layout of the next generation is
// H1627 (a peer lied).
func (a *Agreement) DecidedLayout() (Layout, bool, error) {
	if _, ok := a.Decided(); !ok {
		return Layout{}, false, nil
	}
	var l Layout
	if err := l.UnmarshalBinary(a.decided); err != nil {
		return Layout{}, false, err
	}
	if l.Gen != a.inst || l.Slots != a.slots {
		return Layout{}, false, bad("decided layout of generation %d with %d slots, want generation %d of %d slots", l.Gen, l.Slots, a.inst, a.slots)
	}
	return l, true, nil
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
	if a.decided != nil {
		return a.stepCheck() // the ring and the check tree heal around it
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
		if m.Kind == Decide || m.Kind == Confirm || m.Kind == Final {
			if err := a.Plausible(from, m); err != nil {
				a.liar, a.err = from, err
				return nil
			}
			out := a.decideFrom(from, m.Value, m.Proof)
			if m.Kind == Final && a.err == nil {
				out = append(out, a.finalIn(from)...) // its root's word, sent before it was lost
			}
			return out
		}
		return nil
	}
	a.started = true
	a.heard[from] = true
	var out []Out
	for _, s := range m.Failed {
		out = append(out, a.Suspect(s)...)
	}
	if a.err != nil || a.lost[from] {
		return out
	}
	if err := a.Plausible(from, m); err != nil {
		a.liar, a.err = from, err
		return out
	}
	switch m.Kind {
	case Prepare:
		switch {
		case a.decided != nil:
			out = append(out, Out{from, a.promise(m.Ballot)})
		case m.Ballot <= a.promised:
			// A ballot below a promise: the coordinator learns the
			// promise and begins above it (a crashed coordinator's
			// ballot would otherwise stall the next one for ever).
			out = append(out, Out{from, Msg{Kind: Nack, Gen: a.gen(), Ballot: m.Ballot, AccBallot: a.promised}})
		default:
			a.promised = m.Ballot
			if !a.ready {
				a.waiting = append(a.waiting, Out{from, m})
				break
			}
			out = append(out, Out{from, a.promise(m.Ballot)})
		}
	case Accept:
		switch {
		case a.decided != nil:
			out = append(out, Out{from, Msg{Kind: Promise, Gen: a.gen(), Ballot: m.Ballot, Value: a.decided, Decided: true, Input: []byte{}, Proof: a.proof}})
		case m.Ballot < a.promised:
			out = append(out, Out{from, Msg{Kind: Nack, Gen: a.gen(), Ballot: m.Ballot, AccBallot: a.promised}})
		default:
			a.promised, a.accBallot, a.accepted = m.Ballot, m.Ballot, m.Value
			out = append(out, Out{from, Msg{Kind: Accepted, Gen: a.gen(), Ballot: m.Ballot}})
		}
	case Decide:
		out = append(out, a.decideFrom(from, m.Value, m.Proof)...)
	case Confirm:
		out = append(out, a.decideFrom(from, m.Value, m.Proof)...)
		if a.err == nil {
			a.confirmed[from] = true
			out = append(out, a.stepCheck()...)
		}
	case Checked:
		out = append(out, a.decideFrom(from, m.Value, m.Proof)...)
		if a.err == nil {
			out = append(out, a.checkedIn(from)...)
		}
	case Final:
		out = append(out, a.decideFrom(from, m.Value, m.Proof)...)
		if a.err == nil {
			out = append(out, a.finalIn(from)...)
		}
	case Report:
		// The reporter began: so does this slot (it is, or becomes, the
		// coordinator); a decided one tells it the decision.
		if a.decided != nil {
			out = append(out, Out{from, Msg{Kind: Decide, Gen: a.gen(), Value: a.decided, Proof: a.proof, Failed: a.failed()}})
		}
	case Nack:
		if m.Ballot == a.ballot && a.ballot != 0 && m.AccBallot > a.ballot {
			// Begin again above the promise it names.
			a.promised = max(a.promised, m.AccBallot)
			a.ballot, a.answers = 0, nil
		}
	case Promise, Accepted:
		if m.Ballot == a.ballot && a.ballot != 0 {
			if m.Kind == Promise && m.Decided {
				return append(out, a.decideFrom(from, m.Value, m.Proof)...)
			}
			if (m.Kind == Promise) == (a.phase == Prepare) {
				a.answers[from] = m
			}
		}
	}
	return append(out, a.step()...)
}

// maxRound bounds the round of a ballot (ballot / slots). An honest slot
// begins a round when it becomes the coordinator or learns of a higher
// promise (a nack), one above the highest it knows, so the rounds of an
// agreement stay below a few per slot; a ballot far above that is a lie,
// which would otherwise stall every honest coordinator.
func (a *Agreement) maxRound() uint64 { return uint64(4*a.slots + 64) }

// Plausible says whether an honest slot could have sent m (from slot
// from) to this one as it stands: nil, or the H1627 naming from. It
// changes nothing (Receive runs it too): a caller may ask before it acts
// on a message.
func (a *Agreement) Plausible(from int, m Msg) error {
	n := uint64(a.slots)
	switch {
	case m.Ballot/n > a.maxRound() || m.AccBallot/n > a.maxRound():
		b := max(m.Ballot, m.AccBallot)
		return a.lieErr(from, "a %v with ballot %d (round %d; an honest slot reaches at most round %d)", m.Kind, b, b/n, a.maxRound())
	case (m.Kind == Prepare || m.Kind == Accept) && int(m.Ballot%n) != from:
		return a.lieErr(from, "a %v with ballot %d, which belongs to slot %d", m.Kind, m.Ballot, m.Ballot%n)
	}
	if m.Value != nil && a.check != nil {
		if err := a.check(m.Value); err != nil {
			return a.lieErr(from, "a %v bringing %s", m.Kind, why(err))
		}
	}
	final := m.Kind == Decide || m.Kind == Confirm || m.Kind == Checked || m.Kind == Final || (m.Kind == Promise && m.Decided)
	switch {
	case final != (m.Proof != nil):
		return a.lieErr(from, "a %v with a proof %v", m.Kind, m.Proof != nil)
	case final:
		if err := a.checkProof(from, m); err != nil {
			return err
		}
	}
	if m.Kind == Prepare {
		// An honest sender is the coordinator once the slots it names
		// lost are: it names every slot below it.
		for s := range a.live.all() {
			if s == from {
				break
			}
			if !a.lost[s] && !slices.Contains(m.Failed, s) {
				return a.lieErr(from, "a prepare while slot %d, which it does not name lost, is the coordinator", s)
			}
		}
	}
	return nil
}

// checkProof says whether m's proof could be an honest coordinator's:
// signed by its origin, for this instance and m's value, and the origin
// the coordinator once the slots m names lost are (it names every slot
// below the origin).
func (a *Agreement) checkProof(from int, m Msg) error {
	p, n := m.Proof, uint64(a.slots)
	switch {
	case !a.member(p.Origin):
		return a.lieErr(from, "a %v decided by slot %d, not a member", m.Kind, p.Origin)
	case int(p.Ballot%n) != p.Origin || p.Ballot/n > a.maxRound() || p.Ballot < n:
		return a.lieErr(from, "a %v decided by slot %d in ballot %d, which it could not run", m.Kind, p.Origin, p.Ballot)
	}
	var key ed25519.PublicKey
	if a.keys.Peer != nil {
		key = a.keys.Peer(p.Origin)
	}
	if p.Origin == a.self && len(a.keys.Own) == ed25519.PrivateKeySize {
		key = a.keys.Own.Public().(ed25519.PublicKey)
	}
	seen := verifiedProof{p.Origin, p.Ballot, string(p.Sig), string(m.Value)}
	if !slices.Contains(a.verified, seen) {
		if len(key) != ed25519.PublicKeySize || !ed25519.Verify(key, a.keys.message(a.inst, p.Ballot, m.Value), p.Sig) {
			return a.lieErr(from, "a %v whose proof is not slot %d's signature of its value", m.Kind, p.Origin)
		}
		if len(a.verified) < maxVerified {
			a.verified = append(a.verified, seen)
		}
	}
	for s := range a.live.all() {
		if s == p.Origin {
			break
		}
		if !a.lost[s] && !slices.Contains(m.Failed, s) {
			return a.lieErr(from, "a %v decided by slot %d while slot %d, which it does not name lost, is the coordinator", m.Kind, p.Origin, s)
		}
	}
	return nil
}

// Awaited is the member this slot waits on, and for what: as the
// coordinator, the first live member that has not answered its phase ("a
// promise", "an accepted"); else the coordinator, when this slot reported
// to it and has heard nothing from it in this instance ("a prepare"). It
// is -1 when this slot waits on no one it could name: decided, ended, not
// begun, its own input not given, or the coordinator heard (it waits on
// someone else). A slot that knows the decision awaits the first live
// member whose confirm has not come ("a confirm"). An honest member
// answers at once, so one awaited for long while it lives holds the
// agreement up (the caller names it).
func (a *Agreement) Awaited() (int, string) {
	return a.awaited()
}

// Heard reports whether a message of this instance came from slot s.
func (a *Agreement) Heard(s int) bool { return a.heard[s] }

func (a *Agreement) awaited() (int, string) {
	if a.err != nil || !a.started {
		return -1, ""
	}
	if a.decided != nil {
		return a.awaitedCheck()
	}
	if !a.ready {
		return -1, ""
	}
	if c := a.coordinator(); c != a.self {
		if a.reportedTo == c && !a.heard[c] {
			return c, "prepare"
		}
		return -1, ""
	}
	if a.ballot == 0 {
		return -1, ""
	}
	for s := range a.alive() {
		if _, ok := a.answers[s]; !ok {
			if a.phase == Prepare {
				return s, "promise"
			}
			return s, "accepted"
		}
	}
	return -1, ""
}

// Liar is the slot this one found lying in the agreement, or -1; Err is
// then its H1627.
func (a *Agreement) Liar() int { return a.liar }

// lie ends this slot's part: slot from sent what no honest slot sends.
func (a *Agreement) lie(from int, format string, args ...any) {
	if a.err == nil {
		a.liar, a.err = from, a.lieErr(from, format, args...)
	}
}

// why is what err says, without its code and prefix (it is quoted in
// another error).
func why(err error) string { return strings.TrimPrefix(codes.Message(err), "agreement: ") }

func (a *Agreement) lieErr(from int, format string, args ...any) error {
	return &codes.Error{Code: codes.ProtocolViolation, Rank: from,
		Msg: fmt.Sprintf("protocol violation by slot %d in the agreement on %d: ", from, a.inst) + fmt.Sprintf(format, args...)}
}

// decideFrom takes a decision another slot (from) brings, its proof
// checked (Plausible). The first is this slot's; one that differs from it
// is a lie, and the proofs say whose (conflict).
func (a *Agreement) decideFrom(from int, v []byte, p *Proof) []Out {
	if a.decided != nil {
		if !bytes.Equal(v, a.decided) {
			a.conflict(from, p)
		}
		return nil
	}
	return a.decide(v, p)
}

// conflict ends this slot's part: the decision slot from brings (proof p)
// differs from the one this slot holds. A coordinator that signed two
// values lied. Two coordinators' differing decisions (which Paxos rules
// out among honest slots) are named on the later one, which should have
// carried the earlier on: it lied, or a member hid from it the value it
// had accepted (the message names both).
func (a *Agreement) conflict(from int, p *Proof) {
	old := a.proof
	if p.Origin == old.Origin {
		a.lie(p.Origin, "it decided two different values (in ballots %d and %d; the second brought by slot %d)", old.Ballot, p.Ballot, from)
		return
	}
	hi, lo := p, old
	if old.Ballot > p.Ballot {
		hi, lo = old, p
	}
	a.lie(hi.Origin, "it decided in ballot %d a value other than the one slot %d decided in ballot %d (brought by slot %d): a later coordinator carries a decided value on, so it lied, or a member hid from it the value it had accepted", hi.Ballot, lo.Origin, lo.Ballot, from)
}

// decide takes v, decided with proof p, and begins its check (check.go):
// the decision reaches all from whoever knows it, and a slot acts on it
// once the check says every live member holds the same (Decided).
func (a *Agreement) decide(v []byte, p *Proof) []Out {
	if a.decided != nil {
		return nil
	}
	a.decided, a.proof = v, p
	a.ballot = 0
	a.confirmed = map[int]bool{a.self: true}
	a.confirmSent, a.finalSent, a.checked, a.checkedTo = map[int]bool{}, map[int]bool{}, map[int]bool{}, -1
	return a.stepCheck()
}

// alive yields the members not known lost, ascending.
func (a *Agreement) alive() iter.Seq[int] {
	return func(yield func(int) bool) {
		for s := range a.live.all() {
			if !a.lost[s] && !yield(s) {
				return
			}
		}
	}
}

// step moves the coordinator on: starts a round when this slot has become
// the coordinator, and finishes a phase once every live slot answered.
func (a *Agreement) step() []Out {
	if a.err != nil || a.decided != nil || !a.started || !a.ready {
		return nil
	}
	if alive := a.live.len() - len(a.lost); alive < a.quorum() {
		a.err = codes.New(codes.PeerLost, "agreement on generation %d: %d of %d slots live, fewer than a majority (lost: %v)", a.gen(), alive, a.live.len(), a.failed())
		return nil
	}
	if c := a.coordinator(); c != a.self {
		// Tell the coordinator, once each, that this slot began: it may
		// not have seen the loss (or not in the same mode).
		if a.reportedTo != c {
			a.reportedTo = c
			return []Out{{c, Msg{Kind: Report, Gen: a.gen(), Failed: a.failed()}}}
		}
		return nil
	}
	if a.ballot == 0 {
		return a.begin()
	}
	if !a.allAnswered() {
		return nil
	}
	if a.phase == Prepare {
		// The value: the accepted layout of the highest ballot if any
		// slot accepted one (it may be decided somewhere), else the next
		// layout of every failed slot the answers name.
		var best []byte
		var bestB uint64
		inputs := map[int][]byte{}
		for s, m := range a.answers {
			if m.Value != nil && m.AccBallot > bestB {
				best, bestB = m.Value, m.AccBallot
			}
			inputs[s] = m.Input
		}
		if best == nil {
			v, err := a.propose(a.failed(), inputs)
			if err != nil {
				a.err = codes.Wrap(codes.PeerLost, err, "agreement %d: %v", a.gen(), err)
				return nil
			}
			best = v
		}
		a.proposal, a.phase = best, Accept
		a.answers = map[int]Msg{a.self: {Kind: Accepted, Ballot: a.ballot}}
		a.promised, a.accBallot, a.accepted = a.ballot, a.ballot, best
		var out []Out
		for s := range a.alive() {
			if s != a.self {
				out = append(out, Out{s, Msg{Kind: Accept, Gen: a.gen(), Ballot: a.ballot, Value: best}})
			}
		}
		return append(out, a.step()...)
	}
	if len(a.keys.Own) != ed25519.PrivateKeySize {
		a.err = codes.New(codes.JobEnded, "agreement %d: this slot has no key to sign its decision with", a.gen())
		return nil
	}
	return a.decide(a.proposal, a.keys.Prove(a.self, a.inst, a.ballot, a.proposal))
}

// begin starts a round with a ballot above every one this slot has seen.
func (a *Agreement) begin() []Out {
	n := uint64(a.slots)
	a.round = max(a.round+1, a.promised/n+1)
	a.ballot = a.round*n + uint64(a.self)
	a.phase = Prepare
	a.promised = a.ballot
	a.answers = map[int]Msg{a.self: a.promise(a.ballot)}
	var out []Out
	for s := range a.alive() {
		if s != a.self {
			out = append(out, Out{s, Msg{Kind: Prepare, Gen: a.gen(), Ballot: a.ballot, Failed: a.failed()}})
		}
	}
	return append(out, a.step()...)
}
