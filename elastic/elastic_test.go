package elastic

import (
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"sperli/codes"
)

func TestNext(t *testing.T) {
	for _, tc := range []struct {
		name   string
		l      Layout
		failed []int
		ranks  []int
		spares []int
		lost   []int
		err    error
	}{
		{"rank 0", Initial(4, 2), []int{0}, []int{4, 1, 2, 3}, []int{5}, []int{0}, nil},
		{"two ranks, rank order", Initial(4, 2), []int{3, 1}, []int{0, 4, 2, 5}, []int{}, []int{1, 3}, nil},
		{"spare and rank", Initial(4, 2), []int{4, 2}, []int{0, 1, 5, 3}, []int{}, []int{2, 4}, nil},
		{"duplicates and strangers", Initial(2, 1), []int{1, 1, 7}, []int{0, 2}, []int{}, []int{1}, nil},
		{"spare only", Initial(4, 2), []int{5}, nil, nil, nil, ErrNoRankLost},
		{"no spare left", Initial(4, 1), []int{1, 2}, nil, nil, nil, ErrNoSpare},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.l.Ranks()
			got, err := tc.l.Next(tc.failed)
			if !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) {
				t.Fatalf("Next(%v) error %v, want %v", tc.failed, err, tc.err)
			}
			if !slices.Equal(tc.l.Ranks(), before) {
				t.Fatalf("Next changed its layout: %v", tc.l.Ranks())
			}
			if err != nil {
				return
			}
			if got.Gen != tc.l.Gen+1 || !slices.Equal(got.Ranks(), tc.ranks) || !slices.Equal(got.Spares, tc.spares) || !slices.Equal(got.Lost, tc.lost) {
				t.Fatalf("Next(%v) = %+v, want ranks %v spares %v lost %v", tc.failed, got, tc.ranks, tc.spares, tc.lost)
			}
		})
	}
}

// The continuous scenario: slot 2 lost in generation 0, slot 3 in 1, with
// 8 ranks and 2 spares: spares 8 then 9 take the places.
func TestNextContinuous(t *testing.T) {
	g1, err := Initial(8, 2).Next([]int{2})
	if err != nil || g1.Slot(2) != 8 {
		t.Fatalf("generation 1: %+v %v", g1, err)
	}
	g2, err := g1.Next([]int{3})
	if err != nil || g2.Slot(3) != 9 || g2.Slot(2) != 8 || len(g2.Spares) != 0 || g2.Gen != 2 {
		t.Fatalf("generation 2: %+v %v", g2, err)
	}
}

func TestNextProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 2000; i++ {
		n, s := 1+rng.Intn(9), rng.Intn(5)
		l := Initial(n, s)
		var failed []int
		for k := rng.Intn(n + s + 1); k > 0; k-- {
			failed = append(failed, rng.Intn(n+s))
		}
		next, err := l.Next(failed)
		if err != nil {
			continue
		}
		seen := map[int]bool{}
		for _, x := range next.Live() {
			if seen[x] || slices.Contains(failed, x) {
				t.Fatalf("%v after %v: slot %d twice or lost", next, failed, x)
			}
			seen[x] = true
		}
		for r, x := range l.All() {
			if !slices.Contains(failed, x) && next.Slot(r) != x {
				t.Fatalf("rank %d moved from live slot %d to %d", r, x, next.Slot(r))
			}
		}
		b, _ := next.MarshalBinary()
		var back Layout
		if err := back.UnmarshalBinary(b); err != nil || !back.Equal(next) {
			t.Fatalf("round trip of %+v: %+v %v", next, back, err)
		}
	}
}

func FuzzLayout(f *testing.F) {
	b, _ := Initial(3, 2).MarshalBinary()
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		var l Layout
		if l.UnmarshalBinary(b) != nil {
			return
		}
		c, _ := l.MarshalBinary()
		var back Layout
		if err := back.UnmarshalBinary(c); err != nil || !back.Equal(l) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

func FuzzMsg(f *testing.F) {
	l := Initial(3, 2)
	v, _ := FromRanks(1, l.Slots, []int{0, 3, 2}, []int{4}, []int{1}).MarshalBinary()
	p := testKeys(0).Prove(0, 1, 5, v)
	for _, m := range []Msg{{Kind: Prepare, Gen: 1, Ballot: 5, Failed: []int{1}}, {Kind: Decide, Gen: 1, Value: v, Proof: p}, {Kind: Confirm, Gen: 1, Value: v, Proof: p, Failed: []int{1}}, {Kind: Checked, Gen: 1, Value: v, Proof: p}, {Kind: Final, Gen: 1, Value: v, Proof: p, Failed: []int{1}}, {Kind: Promise, Gen: 2, Ballot: 9, Input: []byte{1}}} {
		b, _ := m.MarshalBinary()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m Msg
		if m.UnmarshalBinary(b, 5) != nil {
			return
		}
		c, _ := m.MarshalBinary()
		var back Msg
		if err := back.UnmarshalBinary(c, 5); err != nil {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// TestMsgProofDecoding: the proof field of an agree message as a liar
// may send it — cut short, naming a slot outside the job, missing where
// a decision needs one, present where none belongs — is refused before
// use (H1627), and a good one decodes back.
func TestMsgProofDecoding(t *testing.T) {
	v, _ := Initial(3, 2).MarshalBinary()
	good, _ := Msg{Kind: Confirm, Gen: 1, Value: v, Proof: testKeys(0).Prove(0, 1, 5, v)}.MarshalBinary()
	var back Msg
	if err := back.UnmarshalBinary(good, 5); err != nil || back.Proof == nil || back.Proof.Origin != 0 || back.Proof.Ballot != 5 || len(back.Proof.Sig) != 64 {
		t.Fatalf("a good proof: %+v, %v", back.Proof, err)
	}
	noProof, _ := Msg{Kind: Decide, Gen: 1, Value: v}.MarshalBinary()
	finalNoProof, _ := Msg{Kind: Final, Gen: 1, Value: v}.MarshalBinary()
	checkedNoValue, _ := Msg{Kind: Checked, Gen: 1, Proof: testKeys(0).Prove(0, 1, 5, v)}.MarshalBinary()
	prepare, _ := Msg{Kind: Prepare, Gen: 1, Ballot: 5}.MarshalBinary()
	withProof := append(append([]byte{}, prepare...), good[len(good)-proofLen:]...)
	withProof[1] |= 8
	outside := append([]byte{}, good...)
	outside[len(outside)-proofLen] = 0x01 // origin 256 + …
	for _, tc := range []struct {
		name string
		b    []byte
		says string
	}{
		{"proof cut short", good[:len(good)-10], "proof cut short"},
		{"origin outside the job", outside, "proof by slot"},
		{"decide without a proof", noProof, "proof false"},
		{"final without a proof", finalNoProof, "proof false"},
		{"checked without a value", checkedNoValue, "value false"},
		{"prepare with a proof", withProof, "proof true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m Msg
			err := m.UnmarshalBinary(tc.b, 5)
			if codes.Of(err) != codes.ProtocolViolation || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("error %v, want H1627 saying %q", err, tc.says)
			}
		})
	}
}

// sim is a network of slots running agreements: per-pair FIFO queues,
// delivered in an order chosen by a seeded random source; slots crash at
// random points, and the others learn of each crash at a random later
// step (the detector).
type sim struct {
	rng     *rand.Rand
	agr     map[int]*Agreement
	queues  map[[2]int][]Msg
	crashed map[int]bool
	notice  []pending // crashes not yet told to a slot
	decided map[int]Layout
	sent    int
	// checks counts the messages of the decision's check (confirm,
	// checked, final) each slot sent.
	checks map[int]int
}

type pending struct{ to, slot int }

var traceSim = false

func (s *sim) deliver(from int, outs []Out) {
	if s.crashed[from] {
		return
	}
	for _, o := range outs {
		// A real message goes through the codec.
		b, _ := o.Msg.MarshalBinary()
		var m Msg
		if err := m.UnmarshalBinary(b, len(s.agr)); err != nil {
			panic(fmt.Sprintf("message does not decode: %v", err))
		}
		k := [2]int{from, o.To}
		s.queues[k] = append(s.queues[k], m)
		s.sent++
		if m.Kind == Confirm || m.Kind == Checked || m.Kind == Final {
			if s.checks == nil {
				s.checks = map[int]int{}
			}
			s.checks[from]++
		}
	}
}

func (s *sim) crash(x int) {
	if s.crashed[x] {
		return
	}
	s.crashed[x] = true
	// What it sent and the network had not delivered yet may be lost, any
	// of it (a prepare then reaches only some slots).
	for y := 0; y < len(s.agr); y++ { // in slot order: the seed decides
		if k := [2]int{x, y}; len(s.queues[k]) > 0 && s.rng.Intn(2) == 0 {
			s.queues[k] = nil
		}
	}
	for y := 0; y < len(s.agr); y++ {
		if !s.crashed[y] {
			s.notice = append(s.notice, pending{y, x})
		}
	}
}

// run plays one agreement after cur with crashes: before lists the slots
// lost before the start (slot 0 … of live sees them), chaos the chance of
// a crash per step.
func runSim(t *testing.T, seed int64, cur Layout, before []int, chaos float64) (map[int]Layout, map[int]bool, map[int]error) {
	decided, crashed, errs := runEngines(t, seed, cur, before, chaos, func(x int) *Agreement { return NewAgreement(x, cur, testKeys(x)) })
	layouts := map[int]Layout{}
	for x, v := range decided {
		var l Layout
		if err := l.UnmarshalBinary(v); err != nil {
			t.Fatalf("slot %d decided no layout: %v", x, err)
		}
		layouts[x] = l
	}
	return layouts, crashed, errs
}

// runEngines plays one agreement of the engines made by mk on the
// simulated network and returns the decided values of the live slots.
func runEngines(t *testing.T, seed int64, cur Layout, before []int, chaos float64, mk func(slot int) *Agreement) (map[int][]byte, map[int]bool, map[int]error) {
	return runEnginesOn(t, &sim{}, seed, cur, before, chaos, mk)
}

// runEnginesOn is runEngines on s, which keeps its counts.
func runEnginesOn(t *testing.T, s *sim, seed int64, cur Layout, before []int, chaos float64, mk func(slot int) *Agreement) (map[int][]byte, map[int]bool, map[int]error) {
	rng := rand.New(rand.NewSource(seed))
	s.rng, s.agr, s.queues, s.crashed = rng, map[int]*Agreement{}, map[[2]int][]Msg{}, map[int]bool{}
	for x := 0; x < cur.Slots; x++ {
		s.agr[x] = mk(x)
	}
	for x := 0; x < cur.Slots; x++ {
		if !slices.Contains(cur.Live(), x) {
			s.crashed[x] = true
		}
	}
	for _, x := range before {
		s.crash(x)
	}
	// Whoever notices first starts; the others start from the messages.
	for steps := 0; steps < 20000; steps++ {
		var keys [][2]int
		for k, q := range s.queues {
			if len(q) > 0 {
				keys = append(keys, k)
			}
		}
		slices.SortFunc(keys, func(a, b [2]int) int { return a[0]*1000 + a[1] - b[0]*1000 - b[1] })
		if len(keys) == 0 && len(s.notice) == 0 {
			break
		}
		if chaos > 0 && rng.Float64() < chaos {
			live := []int{}
			for _, x := range cur.Live() {
				if !s.crashed[x] {
					live = append(live, x)
				}
			}
			if len(live) > 0 {
				s.crash(live[rng.Intn(len(live))])
			}
		}
		if len(s.notice) > 0 && (len(keys) == 0 || rng.Intn(3) == 0) {
			i := rng.Intn(len(s.notice))
			p := s.notice[i]
			s.notice = append(s.notice[:i], s.notice[i+1:]...)
			if !s.crashed[p.to] {
				a := s.agr[p.to]
				var outs []Out
				if !a.started {
					outs = a.Start([]int{p.slot})
				} else {
					outs = a.Suspect(p.slot)
				}
				s.deliver(p.to, outs)
			}
			continue
		}
		k := keys[rng.Intn(len(keys))]
		if len(s.queues[k]) == 0 {
			continue // lost with its sender's crash this step
		}
		m := s.queues[k][0]
		s.queues[k] = s.queues[k][1:]
		if s.crashed[k[1]] {
			continue
		}
		if traceSim {
			fmt.Printf("%d -> %d %v b%d acc%d dec%v value%x failed%v crashed%v\n", k[0], k[1], m.Kind, m.Ballot, m.AccBallot, m.Decided, m.Value, m.Failed, s.crashed)
		}
		s.deliver(k[1], s.agr[k[1]].Receive(k[0], m))
	}
	decided, errs := map[int][]byte{}, map[int]error{}
	for x, a := range s.agr {
		if s.crashed[x] {
			continue
		}
		if v, ok := a.Decided(); ok {
			decided[x] = v
		}
		if err := a.Err(); err != nil {
			errs[x] = err
		}
	}
	return decided, s.crashed, errs
}

// TestAgreementProperty runs thousands of agreements with random crashes
// (the coordinator among them) and checks: no two slots decide different
// layouts; every live slot decides or some slot fails (which ends the
// job everywhere); the layout
// drops every slot lost before the start.
func TestAgreementProperty(t *testing.T) {
	runs := 3000
	if testing.Short() {
		runs = 300
	}
	var sawDecided, sawFailed, sawCrashMid int
	defer func() {
		// The runs must reach what the test is for: decisions, endings
		// without a decision, and losses after the start.
		if sawDecided == 0 || sawFailed == 0 || sawCrashMid == 0 {
			t.Errorf("runs decided %d, failed %d, lost a slot after the start %d: want all above 0", sawDecided, sawFailed, sawCrashMid)
		}
	}()
	for seed := int64(0); seed < int64(runs); seed++ {
		rng := rand.New(rand.NewSource(seed))
		n, sp := 2+rng.Intn(7), 1+rng.Intn(3)
		cur := Initial(n, sp)
		before := []int{rng.Intn(n)}
		chaos := []float64{0, 0.01, 0.05}[seed%3]
		decided, crashed, errs := runSim(t, seed, cur, before, chaos)
		if len(decided) > 0 {
			sawDecided++
		}
		if len(errs) > 0 {
			sawFailed++
		}
		if len(crashed) > len(before)+cur.Slots-len(cur.Live()) {
			sawCrashMid++
		}
		var first *Layout
		for x, l := range decided {
			if first == nil {
				l := l
				first = &l
			} else if !first.Equal(l) {
				t.Fatalf("seed %d: slot %d decided %+v, another %+v", seed, x, l, *first)
			}
		}
		live := 0
		for _, x := range cur.Live() {
			if !crashed[x] {
				live++
				// A slot that cannot finish ends the job for all (the
				// runtime tells every slot); else every live slot decides.
				if _, ok := decided[x]; !ok && len(errs) == 0 {
					t.Fatalf("seed %d: live slot %d neither decided nor failed (decided %v, errs %v)", seed, x, decided, errs)
				}
			}
		}
		if first != nil {
			for _, b := range before {
				if slices.Contains(first.Live(), b) {
					t.Fatalf("seed %d: slot %d lost before the start is live in %+v", seed, b, *first)
				}
			}
		}
	}
}

// TestAgreementPropertyLarge: the property of TestAgreementProperty in
// jobs of 20 to 150 slots, where the check of the decision runs on a ring
// and a tree of several levels (check.go) and heals around slots lost
// during it; and each slot sends a few check messages, not one per member.
func TestAgreementPropertyLarge(t *testing.T) {
	runs := 60
	if testing.Short() {
		runs = 20
	}
	for seed := int64(0); seed < int64(runs); seed++ {
		rng := rand.New(rand.NewSource(seed))
		n, sp := 20+rng.Intn(130), 1+rng.Intn(3)
		cur := Initial(n, sp)
		before := []int{rng.Intn(n)}
		chaos := []float64{0, 0.0005, 0.002}[seed%3]
		s := &sim{}
		decided, crashed, errs := runEnginesOn(t, s, seed, cur, before, chaos, func(x int) *Agreement { return NewAgreement(x, cur, testKeys(x)) })
		var first []byte
		for x, v := range decided {
			if first == nil {
				first = v
			} else if string(first) != string(v) {
				t.Fatalf("seed %d: slot %d decided another value", seed, x)
			}
		}
		for _, x := range cur.Live() {
			if _, ok := decided[x]; !ok && !crashed[x] && len(errs) == 0 {
				t.Fatalf("seed %d (%d slots): live slot %d neither decided nor failed", seed, n+sp, x)
			}
		}
		lostHere := len(crashed) - (cur.Slots - len(cur.Live()))
		for x, c := range s.checks {
			// Four ring neighbours, a parent, up to eight children; each
			// loss may add ring neighbours, a parent, and the children of
			// a lost child to tell.
			if bound := 4 + 1 + 8 + 11*lostHere; c > bound {
				t.Fatalf("seed %d (%d slots): slot %d sent %d check messages, want at most %d", seed, n+sp, x, c, bound)
			}
		}
	}
}

// The coordinator dies after it decided, its confirm reaching one slot
// only: that slot's confirms bring the others the same layout.
func TestCoordinatorDiesAfterOneDecided(t *testing.T) {
	cur := Initial(3, 2) // slots 0..4, coordinator 0
	n := newNet(cur)
	n.crashed[2] = true
	a := n.a
	outs := a[0].Start([]int{2})
	// Everyone promises, accepts; only slot 1 gets the decision.
	for round := 0; round < 2; round++ {
		var replies []Out
		for _, o := range outs {
			for _, r := range a[o.To].Receive(0, o.Msg) {
				replies = append(replies, Out{o.To, r.Msg})
			}
		}
		outs = nil
		for _, r := range replies {
			outs = append(outs, a[0].Receive(r.To, r.Msg)...)
		}
	}
	if a[0].decided == nil {
		t.Fatal("coordinator did not decide")
	}
	var want Layout
	if err := want.UnmarshalBinary(a[0].decided); err != nil {
		t.Fatal(err)
	}
	n.send(0, outs, 1)
	n.crashed[0] = true
	n.pump(t)
	// Slot 0 dies: slots 1, 3 and 4 see it.
	for _, x := range []int{1, 3, 4} {
		n.send(x, a[x].Suspect(2))
		n.send(x, a[x].Suspect(0))
	}
	n.pump(t)
	for _, x := range []int{1, 3, 4} {
		l, ok, err := a[x].DecidedLayout()
		if err != nil || !ok || !l.Equal(want) {
			t.Fatalf("slot %d: decided %+v (%v, %v), want %+v", x, l, ok, err, want)
		}
	}
}

// TestConsensusProperty: the consensus of comm.agree — every slot's input
// a flag, the value the AND of the inputs the coordinator heard — with
// random crashes: one value decided, and it is the AND of a set of
// inputs that holds every slot live at the end.
func TestConsensusProperty(t *testing.T) {
	for seed := int64(0); seed < 1500; seed++ {
		rng := rand.New(rand.NewSource(seed))
		n := 3 + rng.Intn(6)
		cur := Initial(n, 0)
		flags := make([]byte, n)
		for i := range flags {
			flags[i] = byte(rng.Intn(256))
		}
		mk := func(x int) *Agreement {
			a := NewConsensus(x, cur.Live(), n, 7, testKeys(x), func(failed []int, inputs map[int][]byte) ([]byte, error) {
				and := byte(0xff)
				var from []byte
				for s := 0; s < n; s++ {
					if in, ok := inputs[s]; ok {
						and &= in[0]
						from = append(from, byte(s))
					}
				}
				return append([]byte{and}, from...), nil
			})
			a.SetInput([]byte{flags[x]})
			return a
		}
		decided, crashed, errs := runEngines(t, seed, cur, []int{rng.Intn(n)}, []float64{0, 0.02}[seed%2], mk)
		var first []byte
		for x, v := range decided {
			if first == nil {
				first = v
			} else if string(first) != string(v) {
				t.Fatalf("seed %d: slot %d decided %x, another %x", seed, x, v, first)
			}
		}
		live := 0
		for x := 0; x < n; x++ {
			if !crashed[x] {
				live++
			}
		}
		if first == nil {
			if live > 0 && len(errs) == 0 {
				t.Fatalf("seed %d: nobody decided and nobody failed", seed)
			}
			continue
		}
		and := byte(0xff)
		for _, s := range first[1:] {
			and &= flags[s]
		}
		if and != first[0] {
			t.Fatalf("seed %d: value %x is not the AND of the inputs it names", seed, first)
		}
		for x := 0; x < n; x++ {
			if !crashed[x] && !slices.Contains(first[1:], byte(x)) {
				if _, ok := decided[x]; ok {
					t.Fatalf("seed %d: live slot %d decided a value without its input: %x", seed, x, first)
				}
			}
		}
	}
}
