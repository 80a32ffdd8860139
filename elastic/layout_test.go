package elastic

import (
	"encoding/binary"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"sperli/codes"
)

// refNext and refShrink are the rules of SPEC §10.2 and §10.3 on a plain
// list of the ranks' slots: what the runs must give.
func refNext(ranks, spares []int, failed []int) ([]int, []int, bool) {
	ranks, live := slices.Clone(ranks), []int{}
	for _, s := range spares {
		if !slices.Contains(failed, s) {
			live = append(live, s)
		}
	}
	any := false
	for r, s := range ranks {
		if slices.Contains(failed, s) {
			any = true
			if len(live) == 0 {
				return nil, nil, false
			}
			ranks[r], live = live[0], live[1:]
		}
	}
	return ranks, live, any
}

func refShrink(ranks, spares []int, failed []int) ([]int, []int) {
	var r, s []int
	for _, x := range ranks {
		if !slices.Contains(failed, x) {
			r = append(r, x)
		}
	}
	for _, x := range spares {
		if !slices.Contains(failed, x) {
			s = append(s, x)
		}
	}
	return r, s
}

// Generations of losses, recovered and shrunk at random, against the
// plain rule: the runs give the same slot for every rank, the same rank
// for every slot, and stay O(changes).
func TestLayoutRunsMatchTheRule(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for i := range 500 {
		n, s := 1+rng.Intn(40), rng.Intn(12)
		l := Initial(n, s)
		ranks, spares := l.Ranks(), slices.Clone(l.Spares)
		changes := 0
		for gen := 0; gen < 8 && l.Size() > 0; gen++ {
			var failed []int
			for k := 1 + rng.Intn(3); k > 0; k-- {
				failed = append(failed, rng.Intn(n+s))
			}
			var next Layout
			var err error
			if rng.Intn(3) == 0 {
				next, err = l.Shrink(failed)
				wantR, wantS := refShrink(ranks, spares, failed)
				if len(wantR) == 0 {
					if err == nil {
						t.Fatalf("case %d: shrink of every rank gave %v", i, next.Ranks())
					}
					break
				}
				if err != nil {
					t.Fatalf("case %d: shrink: %v", i, err)
				}
				ranks, spares = wantR, wantS
			} else {
				next, err = l.Next(failed)
				wantR, wantS, any := refNext(ranks, spares, failed)
				if err != nil {
					if any && wantR != nil {
						t.Fatalf("case %d: Next(%v) of %v: %v", i, failed, ranks, err)
					}
					continue
				}
				ranks, spares = wantR, wantS
			}
			changes += len(failed)
			if !slices.Equal(next.Ranks(), ranks) || !slices.Equal(next.Spares, spares) {
				t.Fatalf("case %d gen %d: ranks %v spares %v, want %v %v", i, gen, next.Ranks(), next.Spares, ranks, spares)
			}
			if next.Size() != len(ranks) || next.Runs() > 1+2*changes {
				t.Fatalf("case %d: size %d runs %d after %d losses", i, next.Size(), next.Runs(), changes)
			}
			live := append(slices.Clone(ranks), spares...)
			slices.Sort(live)
			if got := next.Live(); !slices.Equal(got, live) {
				t.Fatalf("case %d: Live() = %v, want %v", i, got, live)
			}
			for slot := -1; slot <= n+s; slot++ {
				r, ok := next.RankOf(slot)
				if want := slices.Index(ranks, slot); r != want || ok != (want >= 0) {
					t.Fatalf("case %d: RankOf(%d) = %d %v, want %d", i, slot, r, ok, want)
				}
			}
			for r := -1; r <= len(ranks); r++ {
				want := -1
				if r >= 0 && r < len(ranks) {
					want = ranks[r]
				}
				if got := next.Slot(r); got != want {
					t.Fatalf("case %d: Slot(%d) = %d, want %d", i, r, got, want)
				}
			}
			b, _ := next.MarshalBinary()
			var back Layout
			if err := back.UnmarshalBinary(b); err != nil || !back.Equal(next) {
				t.Fatalf("case %d: round trip: %v", i, err)
			}
			l = next
		}
	}
}

// A layout of the largest job is a few bytes on the wire while few slots
// changed (it was 2 bytes a rank, and past 16,000 ranks it did not fit an
// agreement's value): 108 bytes for a million ranks after three losses.
func TestLayoutOfALargeJobIsSmall(t *testing.T) {
	l := Initial(MaxSlots-10, 10)
	for _, s := range []int{5, 40000, 65000} {
		var err error
		if l, err = l.Next([]int{s}); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := l.MarshalBinary()
	if len(b) > 128 || len(b) > MaxValue {
		t.Fatalf("layout of %d ranks after 3 losses is %d bytes", l.Size(), len(b))
	}
	if l.Slot(40000) != MaxSlots-9 || l.Slot(5) != MaxSlots-10 || l.Slot(65000) != MaxSlots-8 || l.Slot(65001) != 65001 {
		t.Fatalf("slots %d %d %d", l.Slot(5), l.Slot(40000), l.Slot(65000))
	}
}

// What a peer may send wrong in a layout, each named (H1627).
func TestLayoutDecodeRefuses(t *testing.T) {
	enc := func(slots int, runs [][2]int, spares, lost []int) []byte {
		b := binary.BigEndian.AppendUint32(nil, 1)
		b = binary.BigEndian.AppendUint32(b, uint32(slots))
		b = binary.BigEndian.AppendUint32(b, uint32(len(runs)))
		for _, r := range runs {
			b = binary.BigEndian.AppendUint32(b, uint32(r[0]))
			b = binary.BigEndian.AppendUint32(b, uint32(r[1]))
		}
		for _, list := range [][]int{spares, lost} {
			b = binary.BigEndian.AppendUint32(b, uint32(len(list)))
			for _, s := range list {
				b = binary.BigEndian.AppendUint32(b, uint32(s))
			}
		}
		return b
	}
	good := enc(10, [][2]int{{0, 3}, {8, 1}, {4, 4}}, []int{9}, []int{3})
	var l Layout
	if err := l.UnmarshalBinary(good); err != nil || !slices.Equal(l.Ranks(), []int{0, 1, 2, 8, 4, 5, 6, 7}) {
		t.Fatalf("good layout: %v %v", l.Ranks(), err)
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"no runs", enc(10, nil, nil, nil), "no ranks"},
		{"a run of no slots", enc(10, [][2]int{{0, 0}}, nil, nil), "run 0 of ranks"},
		{"a run past the slots", enc(10, [][2]int{{8, 3}}, nil, nil), "slots 8 to 10, job of 10"},
		{"runs not merged", enc(10, [][2]int{{0, 3}, {3, 2}}, nil, nil), "not merged"},
		{"overlapping runs", enc(10, [][2]int{{0, 4}, {2, 2}}, nil, nil), "slot 2 twice"},
		{"a spare inside a run", enc(10, [][2]int{{0, 4}}, []int{2}, nil), "slot 2 twice"},
		{"a lost slot that is a rank", enc(10, [][2]int{{0, 4}}, nil, []int{1}), "slot 1 twice"},
		{"a lost slot that is a spare", enc(10, [][2]int{{0, 4}}, []int{5}, []int{5}), "slot 5 twice"},
		{"a lost slot twice", enc(10, [][2]int{{0, 4}}, nil, []int{6, 6}), "slot 6 twice"},
		{"more runs than bytes", good[:12+8*2], "runs of ranks"},
		{"a run of 2³²−1 slots", enc(10, [][2]int{{1, 1<<32 - 1}}, nil, nil), "run 0 of ranks"},
		{"slots past the most", enc(MaxSlots+1, [][2]int{{0, 1}}, nil, nil), "slots"},
		{"runs counted past the slots", enc(2, [][2]int{{0, 1}, {1, 1}, {0, 1}}, nil, nil), "3 runs"},
		{"spares out of order", enc(10, [][2]int{{0, 4}}, []int{7, 5}, nil), "not in order"},
		{"bytes after", append(slices.Clone(good), 0), "after its end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := new(Layout).UnmarshalBinary(tc.b)
			if codes.Of(err) != codes.ProtocolViolation || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want H1627 saying %q", err, tc.want)
			}
		})
	}
}
