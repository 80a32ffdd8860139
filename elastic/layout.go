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
	"slices"

	"sperli/codes"
)

// MaxSlots is the most slots a layout has.
const MaxSlots = 65535

// Layout is a generation's map of ranks to slots. It is a value: Next
// makes a new one and never changes or aliases the old.
type Layout struct {
	Gen    int   // the generation, 0 at launch
	Ranks  []int // Ranks[r] is the slot that is rank r
	Spares []int // live spare slots, ascending
	Lost   []int // slots lost since the previous generation, ascending
	Slots  int   // ranks and spares at launch, fixed for the job
}

// Initial is generation 0 of a job of n ranks and s spares: slot i < n is
// rank i, slots n … n+s-1 are the spares.
func Initial(n, s int) Layout {
	l := Layout{Ranks: make([]int, n), Spares: make([]int, s), Slots: n + s}
	for i := range l.Ranks {
		l.Ranks[i] = i
	}
	for i := range l.Spares {
		l.Spares[i] = n + i
	}
	return l
}

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
	dead := make(map[int]bool, len(failed))
	for _, s := range failed {
		dead[s] = true
	}
	var spares, lost []int
	for _, s := range l.Spares {
		if dead[s] {
			lost = append(lost, s)
		} else {
			spares = append(spares, s)
		}
	}
	ranks := slices.Clone(l.Ranks)
	short, any := 0, false
	for r, s := range ranks {
		if !dead[s] {
			continue
		}
		any = true
		lost = append(lost, s)
		if len(spares) == 0 {
			short++
			continue
		}
		ranks[r], spares = spares[0], spares[1:]
	}
	switch {
	case !any:
		return Layout{}, ErrNoRankLost
	case short > 0:
		return Layout{}, fmt.Errorf("%w: %d lost rank(s) cannot be filled", ErrNoSpare, short)
	}
	slices.Sort(lost)
	return Layout{Gen: l.Gen + 1, Ranks: ranks, Spares: append([]int{}, spares...), Lost: lost, Slots: l.Slots}, nil
}

// Live is every live slot of l, ascending: the ranks' and the spares'.
func (l Layout) Live() []int {
	out := append(slices.Clone(l.Ranks), l.Spares...)
	slices.Sort(out)
	return out
}

// RankOf is the rank slot is in l.
func (l Layout) RankOf(slot int) (int, bool) {
	for r, s := range l.Ranks {
		if s == slot {
			return r, true
		}
	}
	return -1, false
}

// IsSpare reports whether slot is a live spare of l.
func (l Layout) IsSpare(slot int) bool { return slices.Contains(l.Spares, slot) }

// Equal reports whether l and o are the same layout.
func (l Layout) Equal(o Layout) bool {
	return l.Gen == o.Gen && l.Slots == o.Slots && slices.Equal(l.Ranks, o.Ranks) &&
		slices.Equal(l.Spares, o.Spares) && slices.Equal(l.Lost, o.Lost)
}

// MarshalBinary encodes l (docs/protocol.md §12.2): generation u32, slots
// u16, then three lists (ranks, spares, lost), each a u16 count and u16
// slots.
func (l Layout) MarshalBinary() ([]byte, error) { return l.appendTo(nil), nil }

func (l Layout) appendTo(b []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(l.Gen))
	b = binary.BigEndian.AppendUint16(b, uint16(l.Slots))
	for _, list := range [][]int{l.Ranks, l.Spares, l.Lost} {
		b = binary.BigEndian.AppendUint16(b, uint16(len(list)))
		for _, s := range list {
			b = binary.BigEndian.AppendUint16(b, uint16(s))
		}
	}
	return b
}

// UnmarshalBinary decodes a layout a peer sent: every count bounded by the
// bytes there are, every slot in range, no slot twice, ranks not empty.
// Anything else is H1627.
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
	if len(b) < 6 {
		return nil, bad("layout of %d bytes, want at least 6", len(b))
	}
	gen := binary.BigEndian.Uint32(b)
	slots := int(binary.BigEndian.Uint16(b[4:]))
	b = b[6:]
	if gen > 1<<31-1 || slots < 1 || slots > MaxSlots {
		return nil, bad("layout of generation %d with %d slots", gen, slots)
	}
	seen := make(map[int]bool)
	var lists [3][]int
	for i := range lists {
		if len(b) < 2 {
			return nil, bad("layout cut short")
		}
		n := int(binary.BigEndian.Uint16(b))
		b = b[2:]
		if n > slots || len(b) < 2*n {
			return nil, bad("layout list of %d slots (job of %d, %d bytes left)", n, slots, len(b))
		}
		list := make([]int, n)
		for k := range list {
			s := int(binary.BigEndian.Uint16(b[2*k:]))
			if s >= slots {
				return nil, bad("layout names slot %d, job of %d slots", s, slots)
			}
			if i < 2 && seen[s] || i == 2 && seen[s] {
				return nil, bad("layout names slot %d twice", s)
			}
			seen[s] = true
			list[k] = s
		}
		b = b[2*n:]
		lists[i] = list
	}
	if len(lists[0]) == 0 {
		return nil, bad("layout has no ranks")
	}
	if !slices.IsSorted(lists[1]) || !slices.IsSorted(lists[2]) {
		return nil, bad("layout's spares or lost slots are not in order")
	}
	*l = Layout{Gen: int(gen), Slots: slots, Ranks: lists[0], Spares: lists[1], Lost: lists[2]}
	return b, nil
}

// Shrink is the layout of generation Gen+1 without the slots in failed:
// the ranks left, renumbered in their old order; lost spares dropped
// (SPEC §10.3 shrink).
func (l Layout) Shrink(failed []int) (Layout, error) {
	dead := make(map[int]bool, len(failed))
	for _, s := range failed {
		dead[s] = true
	}
	var ranks, spares, lost []int
	for _, s := range l.Ranks {
		if dead[s] {
			lost = append(lost, s)
		} else {
			ranks = append(ranks, s)
		}
	}
	for _, s := range l.Spares {
		if dead[s] {
			lost = append(lost, s)
		} else {
			spares = append(spares, s)
		}
	}
	if len(ranks) == 0 {
		return Layout{}, errors.New("shrink: no rank left")
	}
	slices.Sort(lost)
	if spares == nil {
		spares = []int{}
	}
	return Layout{Gen: l.Gen + 1, Ranks: ranks, Spares: spares, Lost: lost, Slots: l.Slots}, nil
}
