// Package elastic holds the pure parts of in-place recovery (SPEC §10):
// the layout of a generation, the rule that makes the next one, and the
// agreement by which the live slots choose it. Nothing here does I/O,
// starts a goroutine or reads a clock: runtime carries the messages and
// brings the losses; the tests run thousands of agreements on a simulated
// network (docs/protocol.md §12).
package elastic

import (
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"slices"

	"sperli/codes"
)

// MaxSlots is the most slots a layout has: slots are u32 on the wire
// (docs/protocol.md §12.2), bounded here as job.MaxSize bounds a job.
const MaxSlots = 1 << 20

// Layout is a generation's map of ranks to slots. It is a value: Next
// makes a new one and never changes or aliases the old.
//
// The ranks are held as runs — ranks r … r+n-1 at slots s … s+n-1 — so a
// layout costs O(changes), not O(ranks): generation 0 is one run, and each
// rank a spare took or a shrink dropped adds at most two. A slot of 100,000
// keeps its generation's layout in a few dozen bytes, and an agreement's
// value carries the same runs (docs/protocol.md §12.2).
type Layout struct {
	Gen    int   // the generation, 0 at launch
	Spares []int // live spare slots, ascending
	Lost   []int // slots lost since the previous generation, ascending
	Slots  int   // ranks and spares at launch, fixed for the job

	runs   []run // the ranks in rank order, adjacent runs merged
	bySlot []int // indices of runs, by their first slot
}

// run is ranks rank … rank+n-1 at slots slot … slot+n-1.
type run struct{ rank, slot, n int }

// Initial is generation 0 of a job of n ranks and s spares: slot i < n is
// rank i, slots n … n+s-1 are the spares.
func Initial(n, s int) Layout {
	l := Layout{Spares: make([]int, s), Slots: n + s}
	for i := range l.Spares {
		l.Spares[i] = n + i
	}
	l.setRuns([]run{{0, 0, n}})
	return l
}

// FromRanks is the layout of generation gen whose rank r is slot ranks[r].
// It checks nothing: UnmarshalBinary checks what a peer sent.
func FromRanks(gen, slots int, ranks, spares, lost []int) Layout {
	l := Layout{Gen: gen, Slots: slots, Spares: slices.Clone(spares), Lost: slices.Clone(lost)}
	var runs []run
	for r, s := range ranks {
		runs = append(runs, run{r, s, 1})
	}
	l.setRuns(runs)
	return l
}

// setRuns makes runs the layout's ranks: adjacent runs that continue each
// other are merged, and the index by slot is made.
func (l *Layout) setRuns(runs []run) {
	merged := make([]run, 0, len(runs))
	for _, x := range runs {
		if x.n == 0 {
			continue
		}
		if k := len(merged) - 1; k >= 0 && merged[k].slot+merged[k].n == x.slot {
			merged[k].n += x.n
			continue
		}
		merged = append(merged, x)
	}
	l.runs = merged
	l.bySlot = make([]int, len(merged))
	for i := range l.bySlot {
		l.bySlot[i] = i
	}
	slices.SortFunc(l.bySlot, func(a, b int) int { return merged[a].slot - merged[b].slot })
}

// Size is the number of ranks.
func (l Layout) Size() int {
	if len(l.runs) == 0 {
		return 0
	}
	last := l.runs[len(l.runs)-1]
	return last.rank + last.n
}

// Slot is the slot of rank r, -1 when there is no rank r.
func (l Layout) Slot(r int) int {
	if r < 0 || r >= l.Size() {
		return -1
	}
	k, _ := slices.BinarySearchFunc(l.runs, r, func(x run, r int) int {
		switch {
		case x.rank+x.n <= r:
			return -1
		case x.rank > r:
			return 1
		}
		return 0
	})
	x := l.runs[k]
	return x.slot + r - x.rank
}

// Ranks is the slot of each rank, a new slice: O(ranks), for reports.
func (l Layout) Ranks() []int {
	out := make([]int, 0, l.Size())
	for _, x := range l.runs {
		for i := range x.n {
			out = append(out, x.slot+i)
		}
	}
	return out
}

// All yields each rank and its slot, in rank order.
func (l Layout) All() iter.Seq2[int, int] {
	return func(yield func(int, int) bool) {
		for _, x := range l.runs {
			for i := range x.n {
				if !yield(x.rank+i, x.slot+i) {
					return
				}
			}
		}
	}
}

// RunList is the ranks as runs in rank order, each {first slot, count}.
func (l Layout) RunList() [][2]int {
	out := make([][2]int, len(l.runs))
	for i, x := range l.runs {
		out[i] = [2]int{x.slot, x.n}
	}
	return out
}

// Runs is the number of runs the ranks are held in (1 at launch).
func (l Layout) Runs() int { return len(l.runs) }

// ErrNoSpare is the error of Next when lost ranks outnumber the live spares.
var ErrNoSpare = errors.New("no spare left")

// ErrNoRankLost is the error of Next for a failed set that holds no rank:
// a lost spare only, which makes no new generation.
var ErrNoRankLost = errors.New("no rank lost")

// Next is the layout of generation Gen+1 after the loss of the slots in
// failed (any order, duplicates and slots not live in l ignored): lost
// spares are dropped, and the lost ranks, in rank order, are taken by the
// lowest live spares (SPEC §10.2).
func (l Layout) Next(failed []int) (Layout, error) {
	dead := sortedSet(failed)
	var spares, lost []int
	for _, s := range l.Spares {
		if _, ok := slices.BinarySearch(dead, s); ok {
			lost = append(lost, s)
		} else {
			spares = append(spares, s)
		}
	}
	var lostRanks []int
	for _, s := range dead {
		if r, ok := l.RankOf(s); ok {
			lostRanks = append(lostRanks, r)
			lost = append(lost, s)
		}
	}
	switch {
	case len(lostRanks) == 0:
		return Layout{}, ErrNoRankLost
	case len(lostRanks) > len(spares):
		return Layout{}, fmt.Errorf("%w: %d lost rank(s) cannot be filled", ErrNoSpare, len(lostRanks)-len(spares))
	}
	slices.Sort(lostRanks)
	slices.Sort(lost)
	// Each lost rank is cut out of its run and the spare put in its place.
	runs := make([]run, 0, len(l.runs)+2*len(lostRanks))
	k := 0
	for _, x := range l.runs {
		at := x.rank
		for ; k < len(lostRanks) && lostRanks[k] < x.rank+x.n; k++ {
			r := lostRanks[k]
			runs = append(runs, run{at, x.slot + at - x.rank, r - at}, run{r, spares[k], 1})
			at = r + 1
		}
		runs = append(runs, run{at, x.slot + at - x.rank, x.rank + x.n - at})
	}
	next := Layout{Gen: l.Gen + 1, Spares: append([]int{}, spares[len(lostRanks):]...), Lost: lost, Slots: l.Slots}
	next.setRuns(runs)
	return next, nil
}

// sortedSet is xs sorted, without duplicates, in a new slice.
func sortedSet(xs []int) []int {
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}

// Live is every live slot of l, ascending: the ranks' and the spares'.
func (l Layout) Live() []int { return slices.Collect(l.liveMembers().all()) }

// RankOf is the rank slot is in l.
func (l Layout) RankOf(slot int) (int, bool) {
	// The last run that starts at or below slot holds it, if any does.
	i, found := slices.BinarySearchFunc(l.bySlot, slot, func(k, slot int) int { return l.runs[k].slot - slot })
	if !found {
		i--
	}
	if i < 0 {
		return -1, false
	}
	x := l.runs[l.bySlot[i]]
	if slot >= x.slot+x.n {
		return -1, false
	}
	return x.rank + slot - x.slot, true
}

// IsSpare reports whether slot is a live spare of l.
func (l Layout) IsSpare(slot int) bool {
	_, ok := slices.BinarySearch(l.Spares, slot)
	return ok
}

// IsLive reports whether slot is a rank or a live spare of l.
func (l Layout) IsLive(slot int) bool {
	_, isRank := l.RankOf(slot)
	return isRank || l.IsSpare(slot)
}

// Equal reports whether l and o are the same layout.
func (l Layout) Equal(o Layout) bool {
	return l.Gen == o.Gen && l.Slots == o.Slots && slices.Equal(l.runs, o.runs) &&
		slices.Equal(l.Spares, o.Spares) && slices.Equal(l.Lost, o.Lost)
}

// MarshalBinary encodes l (docs/protocol.md §12.2): generation u32, slots
// u32, the ranks as runs (a u32 count, then each run's first slot and
// length, u32 each), then two lists (spares, lost), each a u32 count and
// u32 slots.
func (l Layout) MarshalBinary() ([]byte, error) { return l.appendTo(nil), nil }

func (l Layout) appendTo(b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(l.Gen))
	b = binary.BigEndian.AppendUint32(b, uint32(l.Slots))
	b = binary.BigEndian.AppendUint32(b, uint32(len(l.runs)))
	for _, x := range l.runs {
		b = binary.BigEndian.AppendUint32(b, uint32(x.slot))
		b = binary.BigEndian.AppendUint32(b, uint32(x.n))
	}
	for _, list := range [][]int{l.Spares, l.Lost} {
		b = binary.BigEndian.AppendUint32(b, uint32(len(list)))
		for _, s := range list {
			b = binary.BigEndian.AppendUint32(b, uint32(s))
		}
	}
	return b
}

// UnmarshalBinary decodes a layout a peer sent: every count bounded by the
// bytes there are, every slot in range, no slot twice, ranks not empty,
// runs merged. Anything else is H1627.
func (l *Layout) UnmarshalBinary(b []byte) error {
	rest, err := l.decode(b)
	if err == nil && len(rest) != 0 {
		err = bad("layout has %d bytes after its end", len(rest))
	}
	return err
}

func bad(format string, args ...any) error {
	return codes.New(codes.ProtocolViolation, "agreement: "+format, args...)
}

func (l *Layout) decode(b []byte) ([]byte, error) {
	if len(b) < 12 {
		return nil, bad("layout of %d bytes, want at least 12", len(b))
	}
	gen := binary.BigEndian.Uint32(b)
	slots := int(binary.BigEndian.Uint32(b[4:]))
	nruns := int(binary.BigEndian.Uint32(b[8:]))
	b = b[12:]
	if gen > 1<<31-1 || slots < 1 || slots > MaxSlots {
		return nil, bad("layout of generation %d with %d slots", gen, slots)
	}
	if nruns == 0 {
		return nil, bad("layout has no ranks")
	}
	if nruns > slots || len(b) < 8*nruns {
		return nil, bad("layout of %d runs of ranks (job of %d slots, %d bytes left)", nruns, slots, len(b))
	}
	// Every run, spare and lost slot is a span of slots; no two may meet.
	spans := make([]run, 0, nruns)
	runs := make([]run, nruns)
	ranks := 0
	for k := range runs {
		s, n := int(binary.BigEndian.Uint32(b[8*k:])), int(binary.BigEndian.Uint32(b[8*k+4:]))
		if n == 0 || n > slots || s >= slots || s+n > slots {
			return nil, bad("layout's run %d of ranks is slots %d to %d, job of %d slots", k, s, s+n-1, slots)
		}
		if k > 0 && runs[k-1].slot+runs[k-1].n == s {
			return nil, bad("layout's runs %d and %d of ranks are not merged", k-1, k)
		}
		runs[k] = run{ranks, s, n}
		spans = append(spans, runs[k])
		ranks += n
	}
	b = b[8*nruns:]
	var lists [2][]int
	for i := range lists {
		if len(b) < 4 {
			return nil, bad("layout cut short")
		}
		n := int(binary.BigEndian.Uint32(b))
		b = b[4:]
		if n > slots || len(b) < 4*n {
			return nil, bad("layout list of %d slots (job of %d, %d bytes left)", n, slots, len(b))
		}
		list := make([]int, n)
		for k := range list {
			s := int(binary.BigEndian.Uint32(b[4*k:]))
			if s >= slots {
				return nil, bad("layout names slot %d, job of %d slots", s, slots)
			}
			list[k] = s
			if i == 0 {
				spans = append(spans, run{-1, s, 1})
			}
		}
		b = b[4*n:]
		lists[i] = list
	}
	if !slices.IsSorted(lists[0]) || !slices.IsSorted(lists[1]) {
		return nil, bad("layout's spares or lost slots are not in order")
	}
	slices.SortFunc(spans, func(x, y run) int { return x.slot - y.slot })
	for k := 1; k < len(spans); k++ {
		if spans[k-1].slot+spans[k-1].n > spans[k].slot {
			return nil, bad("layout names slot %d twice", spans[k].slot)
		}
	}
	// A lost slot is neither a rank nor a spare of this generation.
	*l = Layout{}
	l.setRuns(runs)
	for k, s := range lists[1] {
		if _, isRank := l.RankOf(s); isRank || k > 0 && lists[1][k-1] == s {
			return nil, bad("layout names slot %d twice", s)
		}
		if _, isSpare := slices.BinarySearch(lists[0], s); isSpare {
			return nil, bad("layout names slot %d twice", s)
		}
	}
	l.Gen, l.Slots, l.Spares, l.Lost = int(gen), slots, lists[0], lists[1]
	return b, nil
}

// Shrink is the layout of generation Gen+1 without the slots in failed:
// the ranks left, renumbered in their old order; lost spares dropped
// (SPEC §10.3 shrink).
func (l Layout) Shrink(failed []int) (Layout, error) {
	dead := sortedSet(failed)
	var spares, lost []int
	for _, s := range l.Spares {
		if _, ok := slices.BinarySearch(dead, s); ok {
			lost = append(lost, s)
		} else {
			spares = append(spares, s)
		}
	}
	var runs []run
	rank := 0
	for _, x := range l.runs {
		// The dead slots of this run, ascending, cut it into pieces.
		i, _ := slices.BinarySearch(dead, x.slot)
		at := x.slot
		for ; i < len(dead) && dead[i] < x.slot+x.n; i++ {
			runs = append(runs, run{rank, at, dead[i] - at})
			rank += dead[i] - at
			lost = append(lost, dead[i])
			at = dead[i] + 1
		}
		runs = append(runs, run{rank, at, x.slot + x.n - at})
		rank += x.slot + x.n - at
	}
	if rank == 0 {
		return Layout{}, errors.New("shrink: no rank left")
	}
	slices.Sort(lost)
	if spares == nil {
		spares = []int{}
	}
	if lost == nil {
		lost = []int{}
	}
	next := Layout{Gen: l.Gen + 1, Spares: spares, Lost: lost, Slots: l.Slots}
	next.setRuns(runs)
	return next, nil
}
