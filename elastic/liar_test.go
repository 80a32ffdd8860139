package elastic

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"sperli/codes"
)

// net is a deterministic network of engines: FIFO per pair, delivered in
// slot order until nothing is left; dropped slots receive nothing.
type net struct {
	a       map[int]*Agreement
	q       map[[2]int][]Msg
	crashed map[int]bool
	muted   map[int]bool // alive, reading, but sending nothing
}

func newNet(cur Layout) *net {
	n := &net{a: map[int]*Agreement{}, q: map[[2]int][]Msg{}, crashed: map[int]bool{}, muted: map[int]bool{}}
	for _, x := range cur.Live() {
		n.a[x] = NewAgreement(x, cur, testKeys(x))
	}
	return n
}

// send queues outs from slot from, keeping only those to slots in only
// (all when only is nil).
func (n *net) send(from int, outs []Out, only ...int) {
	if n.muted[from] {
		return
	}
	for _, o := range outs {
		if only != nil && !contains(only, o.To) {
			continue
		}
		b, err := o.Msg.MarshalBinary()
		if err != nil {
			panic(err)
		}
		var m Msg
		if err := m.UnmarshalBinary(b, 64); err != nil {
			panic(err)
		}
		n.q[[2]int{from, o.To}] = append(n.q[[2]int{from, o.To}], m)
	}
}

func contains(s []int, x int) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

// pump delivers until the network is quiet (bounded).
func (n *net) pump(t *testing.T) {
	t.Helper()
	for steps := 0; steps < 10000; steps++ {
		moved := false
		for from := 0; from < 64; from++ {
			for to := 0; to < 64; to++ {
				k := [2]int{from, to}
				if len(n.q[k]) == 0 {
					continue
				}
				m := n.q[k][0]
				n.q[k] = n.q[k][1:]
				moved = true
				if n.crashed[to] { // what a crashed slot sent before still arrives
					continue
				}
				n.send(to, n.a[to].Receive(from, m))
			}
		}
		if !moved {
			return
		}
	}
	t.Fatal("the network never went quiet")
}

// Two coordinators crash after their prepares reached only some slots:
// the third coordinator's first ballot is below a promise one of the
// others made, and it must learn that (a nack) and go above it rather
// than wait for ever.
func TestCoordinatorsCrashAfterPartialPrepares(t *testing.T) {
	cur := Initial(3, 4) // slots 0..6: ranks 0,1,2, spares 3..6
	n := newNet(cur)
	// Rank 2 is lost; slot 0 begins, and its prepare reaches slot 1 only.
	n.send(0, n.a[0].Start([]int{2}), 1)
	n.pump(t)
	n.crashed[0] = true
	// Slot 1 coordinates next; its prepare (a higher ballot) reaches
	// slot 5 only. Slot 3, the next, has promised nothing.
	n.send(1, n.a[1].Suspect(0), 5)
	n.crashed[1] = true
	n.pump(t)
	for _, x := range []int{3, 4, 5, 6} {
		n.send(x, n.a[x].Start([]int{2}))
		n.send(x, n.a[x].Suspect(0))
		n.send(x, n.a[x].Suspect(1))
	}
	n.pump(t)
	want, err := cur.Next([]int{0, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []int{3, 4, 5, 6} {
		l, ok, err := n.a[x].DecidedLayout()
		if err != nil || n.a[x].Err() != nil {
			t.Fatalf("slot %d: %v %v", x, err, n.a[x].Err())
		}
		if !ok {
			t.Fatalf("slot %d never decided: the agreement stalled after two coordinators crashed", x)
		}
		if !l.Equal(want) {
			t.Fatalf("slot %d decided %+v, want %+v", x, l, want)
		}
	}
}

// TestAwaited: a member that lives but says nothing holds the agreement
// up, and the slots that wait on it can name it — the coordinator a muted
// acceptor (its promise missing), the others a muted coordinator (no
// prepare after their report); once everyone answered, nobody is awaited.
func TestAwaited(t *testing.T) {
	cur := Initial(3, 1) // slots 0..3: ranks 0,1,2, spare 3
	t.Run("muted acceptor", func(t *testing.T) {
		n := newNet(cur)
		n.muted[2] = true
		for _, x := range []int{0, 2, 3} {
			n.send(x, n.a[x].Start([]int{1}))
		}
		n.pump(t)
		if s, what := n.a[0].Awaited(); s != 2 || what != "promise" {
			t.Fatalf("the coordinator awaits slot %d's %q, want slot 2's promise", s, what)
		}
		if s, _ := n.a[3].Awaited(); s != -1 {
			t.Fatalf("slot 3, which heard the coordinator, awaits slot %d", s)
		}
	})
	t.Run("muted coordinator", func(t *testing.T) {
		n := newNet(cur)
		n.muted[0] = true
		for _, x := range []int{0, 2, 3} {
			n.send(x, n.a[x].Start([]int{1}))
		}
		n.pump(t)
		for _, x := range []int{2, 3} {
			if s, what := n.a[x].Awaited(); s != 0 || what != "prepare" {
				t.Fatalf("slot %d awaits slot %d's %q, want the coordinator's prepare", x, s, what)
			}
		}
	})
	t.Run("nobody muted", func(t *testing.T) {
		n := newNet(cur)
		for _, x := range []int{0, 2, 3} {
			n.send(x, n.a[x].Start([]int{1}))
		}
		n.pump(t)
		for _, x := range []int{0, 2, 3} {
			if _, ok := n.a[x].Decided(); !ok {
				t.Fatalf("slot %d did not decide", x)
			}
			if s, _ := n.a[x].Awaited(); s != -1 {
				t.Fatalf("slot %d, decided, awaits slot %d", x, s)
			}
		}
	})
}

// wantLiar checks that engine a named slot liar in an H1627.
func wantLiar(t *testing.T, a *Agreement, liar int, says string) {
	t.Helper()
	var e *codes.Error
	if err := a.Err(); !errors.As(err, &e) || e.Code != codes.ProtocolViolation {
		t.Fatalf("error %v, want H1627", a.Err())
	}
	if a.Liar() != liar || !strings.Contains(e.Msg, "slot "+string(rune('0'+liar))) {
		t.Fatalf("liar %d, error %q: want slot %d named", a.Liar(), e.Msg, liar)
	}
	if !strings.Contains(e.Msg, says) {
		t.Fatalf("error %q does not say %q", e.Msg, says)
	}
	if strings.Contains(e.Msg, "H16") || strings.Count(e.Msg, "agreement") > 1 {
		t.Fatalf("error %q quotes another error's code or prefix", e.Msg)
	}
}

// The lies of one authenticated slot that an engine can tell from the
// message itself: each is refused with H1627 naming the liar, and none
// sets the outcome.
func TestLiesNamed(t *testing.T) {
	cur := Initial(3, 2) // slots 0..4
	layout := func(l Layout) []byte { b, _ := l.MarshalBinary(); return b }
	honest, _ := cur.Next([]int{2})
	skipped := honest
	skipped.Gen = 7
	nothingLost := FromRanks(1, 5, []int{0, 1, 2}, []int{3, 4}, []int{})
	jumped := FromRanks(1, 5, []int{0, 1, 4}, []int{3}, []int{2}) // spare 4 over 3
	for _, tc := range []struct {
		name string
		from int
		m    Msg
		says string
	}{
		{"huge ballot", 3, Msg{Kind: Prepare, Gen: 1, Ballot: 1<<62 - 2}, "round"},
		{"prepare of another's ballot", 3, Msg{Kind: Prepare, Gen: 1, Ballot: 5*3 + 1, Failed: []int{2}}, "belongs to slot 1"},
		{"prepare not from the coordinator", 3, Msg{Kind: Prepare, Gen: 1, Ballot: 5*3 + 3, Failed: []int{2}}, "is the coordinator"},
		{"decide of a later generation", 4, Msg{Kind: Decide, Gen: 1, Value: layout(skipped)}, "generation 7"},
		{"decide with nothing lost", 4, Msg{Kind: Decide, Gen: 1, Value: layout(nothingLost)}, "does not make"},
		{"decide promoting a spare over a lower one", 4, Msg{Kind: Decide, Gen: 1, Value: layout(jumped)}, "does not make"},
		{"promise with an accepted ballot far ahead", 1, Msg{Kind: Promise, Gen: 1, Ballot: 5, AccBallot: 1 << 40, Value: layout(honest), Input: []byte{}}, "round"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAgreement(0, cur, testKeys(0))
			a.Start([]int{2})
			a.Receive(tc.from, tc.m)
			wantLiar(t, a, tc.from, tc.says)
			if _, ok := a.Decided(); ok {
				t.Fatal("a lie decided")
			}
		})
	}
	// The honest decide is taken, and acted on once its ring neighbours
	// (here every other live member) confirmed it and the check tree's
	// root (slot 4, the highest) said every live member did.
	a := NewAgreement(1, cur, testKeys(1))
	p := signed(0, 1, 5, layout(honest))
	a.Receive(0, Msg{Kind: Decide, Gen: 1, Value: layout(honest), Proof: p, Failed: []int{2}})
	want := map[string]bool{"confirm 0": true, "confirm 3": true, "confirm 4": true, "final 4": true}
	for len(want) > 0 {
		if _, ok, _ := a.DecidedLayout(); ok {
			t.Fatalf("decided while it still awaits %v", want)
		}
		s, what := a.Awaited()
		if !want[fmt.Sprint(what, " ", s)] {
			t.Fatalf("awaits slot %d's %s, want one of %v", s, what, want)
		}
		delete(want, fmt.Sprint(what, " ", s))
		kind := Confirm
		if what == "final" {
			kind = Final
		}
		a.Receive(s, Msg{Kind: kind, Gen: 1, Value: layout(honest), Proof: p, Failed: []int{2}})
	}
	if l, ok, err := a.DecidedLayout(); err != nil || !ok || !l.Equal(honest) || a.Err() != nil {
		t.Fatalf("honest decide: %+v %v %v %v", l, ok, err, a.Err())
	}
}

// signed is the proof slot origin gives value v in ballot b of the
// agreement on generation gen.
func signed(origin, gen int, b uint64, v []byte) *Proof {
	return testKeys(origin).Prove(origin, gen, b, v)
}

// The lies about a decision: a proof that is not its origin's, or not
// for this value, or by a slot that could not be the coordinator, and a
// coordinator that decides two layouts (the fork of a lying coordinator,
// which the confirms expose at the slots it told differently: here
// {2 lost} to slot 1, {2, 3 lost} to another, slot 3 lost during it) — each is
// H1627 naming the liar, and nothing is acted on.
func TestDecisionLiesNamed(t *testing.T) {
	cur := Initial(4, 2) // slots 0..5: ranks 0..3, spares 4, 5
	layout := func(l Layout) []byte { b, _ := l.MarshalBinary(); return b }
	one, _ := cur.Next([]int{2})
	both, _ := cur.Next([]int{2, 3})
	forged := signed(4, 1, 6, layout(one))
	forged.Origin = 0
	for _, tc := range []struct {
		name  string
		msgs  []Msg // from slot 0 first, the rest from slot 4
		liar  int
		says  string
		first bool // the first message is the lie
	}{
		{"decide signed by another", []Msg{{Kind: Decide, Gen: 1, Value: layout(one), Proof: forged, Failed: []int{2}}}, 0, "not slot 0's signature", true},
		{"decide whose proof is for another value", []Msg{{Kind: Decide, Gen: 1, Value: layout(both), Proof: signed(0, 1, 6, layout(one)), Failed: []int{2}}}, 0, "not slot 0's signature", true},
		{"decide whose proof is of another generation", []Msg{{Kind: Decide, Gen: 1, Value: layout(one), Proof: signed(0, 2, 6, layout(one)), Failed: []int{2}}}, 0, "not slot 0's signature", true},
		{"decide by a slot that is not the coordinator", []Msg{{Kind: Decide, Gen: 1, Value: layout(one), Proof: signed(3, 1, 9, layout(one)), Failed: []int{2}}}, 0, "which it does not name lost, is the coordinator", true},
		{"decide without a proof", []Msg{{Kind: Decide, Gen: 1, Value: layout(one), Failed: []int{2}}}, 0, "with a proof false", true},
		{"coordinator decides two layouts", []Msg{
			{Kind: Decide, Gen: 1, Value: layout(one), Proof: signed(0, 1, 6, layout(one)), Failed: []int{2}},
			{Kind: Confirm, Gen: 1, Value: layout(both), Proof: signed(0, 1, 6, layout(both)), Failed: []int{2, 3}},
		}, 0, "decided two different values", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := NewAgreement(1, cur, testKeys(1))
			a.Start([]int{2})
			for i, m := range tc.msgs {
				from := 0
				if i > 0 {
					from = 4
				}
				a.Receive(from, m)
				if tc.first {
					break
				}
			}
			wantLiar(t, a, tc.liar, tc.says)
			if _, ok := a.Decided(); ok {
				t.Fatal("a lie decided")
			}
		})
	}
}

// A lying coordinator forks: with slot 2 lost and slot 3 lost during the
// agreement, it decides {2 lost} to slot 1 and {2, 3 lost} to slots 4
// and 5, both valid layouts with valid proofs. The confirms bring each
// slot the other value: every honest slot names the coordinator, and
// none acts on a layout.
func TestLyingCoordinatorCannotFork(t *testing.T) {
	cur := Initial(4, 2) // slots 0..5: ranks 0..3, spares 4, 5
	layout := func(l Layout) []byte { b, _ := l.MarshalBinary(); return b }
	one, _ := cur.Next([]int{2})
	both, _ := cur.Next([]int{2, 3})
	n := newNet(cur)
	n.crashed[2] = true
	n.muted[0] = true // its own engine says nothing; its lies are sent below
	for _, x := range []int{1, 3, 4, 5} {
		n.send(x, n.a[x].Start([]int{2}))
	}
	n.pump(t)
	n.crashed[3] = true
	for _, x := range []int{1, 4, 5} {
		n.send(x, n.a[x].Suspect(3))
	}
	n.pump(t)
	n.q[[2]int{0, 1}] = append(n.q[[2]int{0, 1}], Msg{Kind: Decide, Gen: 1, Value: layout(one), Proof: signed(0, 1, 6, layout(one)), Failed: []int{2}})
	for _, x := range []int{4, 5} {
		n.q[[2]int{0, x}] = append(n.q[[2]int{0, x}], Msg{Kind: Decide, Gen: 1, Value: layout(both), Proof: signed(0, 1, 6, layout(both)), Failed: []int{2, 3}})
	}
	n.pump(t)
	for _, x := range []int{1, 4, 5} {
		wantLiar(t, n.a[x], 0, "decided two different values")
		if _, ok := n.a[x].Decided(); ok {
			t.Fatalf("slot %d acts on a layout", x)
		}
	}
}
