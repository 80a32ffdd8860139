package elastic

import (
	"iter"
	"slices"
)

// members is an ascending set of slots kept as runs of consecutive slots,
// with the count of members before each run. An agreement's members are
// a layout's live slots, a few runs whatever the job's size: every slot
// of a job holds them, and a list of every slot made the agreements of a
// recovery n² bytes job-wide (8 GB at 10,000 slots, docs/scale.md).
type members struct {
	first  []int // each run's first slot, ascending, runs not adjacent
	before []int // the members in the runs before each run
	n      int
}

// add appends the count slots from slot on; slot is above every member.
func (m *members) add(slot, count int) {
	if count <= 0 {
		return
	}
	if k := len(m.first) - 1; k >= 0 && m.first[k]+m.n-m.before[k] == slot {
		m.n += count // adjacent: the last run grows
		return
	}
	m.first = append(m.first, slot)
	m.before = append(m.before, m.n)
	m.n += count
}

// membersOf is the set of slots xs (any order, duplicates allowed).
func membersOf(xs []int) members {
	var m members
	for _, s := range sortedSet(xs) {
		m.add(s, 1)
	}
	return m
}

func (m members) len() int { return m.n }

// runLen is the length of run k.
func (m members) runLen(k int) int {
	if k+1 < len(m.first) {
		return m.before[k+1] - m.before[k]
	}
	return m.n - m.before[k]
}

// at is the i-th member, 0 ≤ i < len.
func (m members) at(i int) int {
	k, found := slices.BinarySearch(m.before, i)
	if !found {
		k--
	}
	return m.first[k] + i - m.before[k]
}

// index is slot's position among the members, if it is one.
func (m members) index(slot int) (int, bool) {
	k, found := slices.BinarySearch(m.first, slot)
	if !found {
		k--
	}
	if k < 0 || slot-m.first[k] >= m.runLen(k) {
		return -1, false
	}
	return m.before[k] + slot - m.first[k], true
}

// all yields the members, ascending.
func (m members) all() iter.Seq[int] {
	return func(yield func(int) bool) {
		for k, f := range m.first {
			for s := f; s < f+m.runLen(k); s++ {
				if !yield(s) {
					return
				}
			}
		}
	}
}

// liveMembers is every live slot of l (Live) as runs: the ranks' runs by
// slot, merged with the spares, without a list of every slot.
func (l Layout) liveMembers() members {
	var m members
	sp := l.Spares
	for _, k := range l.bySlot {
		x := l.runs[k]
		for len(sp) > 0 && sp[0] < x.slot {
			m.add(sp[0], 1)
			sp = sp[1:]
		}
		m.add(x.slot, x.n)
	}
	for _, s := range sp {
		m.add(s, 1)
	}
	return m
}
