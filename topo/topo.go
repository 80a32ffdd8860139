// Package topo is the shape of a job's links (SPEC §18): the spanning tree
// and the observation ring over its slots, and how both heal around lost
// slots. It is pure: no I/O, no clock, no goroutine.
//
// The tree is a range tree of radix Radix: the slot a at the head of the
// range [a, b) is its root, and it splits (a, b) into up to Radix
// consecutive parts of near-equal size, the first slot of each part a
// child heading that part. Every subtree is a range of consecutive slots,
// so a message that flows up the tree gathers its subtree in slot order,
// and the tree's depth is about log_Radix(n). At 1,024 slots the depth is
// 4 and an inner slot has 9 tree links (a parent and 8 children).
//
// The ring watches: slot s is watched by its next Watchers live slots
// (its successors), and watches its previous Watchers (its predecessors),
// so a silent slot has that many detectors even where no one else has a
// link to it, and a ring whose slot is lost heals by linking the live
// neighbours on either side of it.
package topo

import "slices"

// Radix is the number of children of an inner slot of the tree. Eight
// keeps the tree shallow (4 levels at 1,024 slots, 6 at 100,000) while a
// slot's tree links stay few (9 at most): each is a TLS connection and
// two goroutines.
const Radix = 8

// Watchers is how many live successors watch each slot on the ring.
const Watchers = 2

// Lost reports whether a slot is known lost; nil means none is.
type Lost func(slot int) bool

func (l Lost) has(s int) bool { return l != nil && l(s) }

// Children returns the tree children of slot s in a job of n slots (the
// static tree, every slot live), in slot order.
func Children(n, s int) []int {
	lo, hi := Range(n, s)
	return split(lo, hi)
}

// split returns the heads of the parts that (lo, hi) is cut into below lo.
func split(lo, hi int) []int {
	m := hi - lo - 1 // the slots below lo
	if m <= 0 {
		return nil
	}
	k := min(Radix, m)
	out := make([]int, 0, k)
	start := lo + 1
	for i := 0; i < k; i++ {
		out = append(out, start)
		start += m / k
		if i < m%k {
			start++
		}
	}
	return out
}

// Range returns the range [lo, hi) of slots in s's subtree.
func Range(n, s int) (lo, hi int) {
	lo, hi = 0, n
	for lo != s {
		kids := split(lo, hi)
		i, _ := slices.BinarySearch(kids, s+1)
		i-- // the last head ≤ s
		lo = kids[i]
		if i+1 < len(kids) {
			hi = kids[i+1]
		}
	}
	return lo, hi
}

// Parent returns the tree parent of slot s (the static tree), or -1 for
// the root, slot 0.
func Parent(n, s int) int {
	if s == 0 {
		return -1
	}
	lo, hi, parent := 0, n, -1
	for lo != s {
		kids := split(lo, hi)
		i, _ := slices.BinarySearch(kids, s+1)
		i--
		parent = lo
		lo = kids[i]
		if i+1 < len(kids) {
			hi = kids[i+1]
		}
	}
	return parent
}

// Root returns the root of the live tree: the lowest live slot, or -1
// when every slot is lost.
func Root(n int, lost Lost) int {
	for s := 0; s < n; s++ {
		if !lost.has(s) {
			return s
		}
	}
	return -1
}

// LiveParent returns s's parent in the tree healed around the lost
// slots: its nearest live ancestor; where every ancestor is lost, the
// live root adopts it. It is -1 for the live root.
func LiveParent(n, s int, lost Lost) int {
	root := Root(n, lost)
	if s == root {
		return -1
	}
	for p := Parent(n, s); p >= 0; p = Parent(n, p) {
		if !lost.has(p) {
			return p
		}
	}
	return root
}

// LiveChildren returns s's children in the healed tree (the live slots
// whose LiveParent is s), in slot order: its live children, and in place
// of each lost child that child's own, recursively; the live root also
// adopts the live slots whose every ancestor is lost.
func LiveChildren(n, s int, lost Lost) []int {
	out := liveBelow(n, s, lost, nil)
	if root := Root(n, lost); s == root && root > 0 {
		for _, o := range liveBelow(n, 0, lost, nil) {
			if o != s {
				out = append(out, o)
			}
		}
		slices.Sort(out)
	}
	return out
}

// liveBelow appends the live slots below p reached through lost slots only.
func liveBelow(n, p int, lost Lost, out []int) []int {
	for _, c := range Children(n, p) {
		if lost.has(c) {
			out = liveBelow(n, c, lost, out)
		} else {
			out = append(out, c)
		}
	}
	return out
}

// Successors returns the next k live slots after s on the ring of n
// slots (fewer when fewer are live), nearest first.
func Successors(n, s, k int, lost Lost) []int {
	return walkRing(n, s, k, 1, lost)
}

// Predecessors returns the previous k live slots before s on the ring.
func Predecessors(n, s, k int, lost Lost) []int {
	return walkRing(n, s, k, n-1, lost)
}

func walkRing(n, s, k, step int, lost Lost) []int {
	var out []int
	for i, x := 1, (s+step)%n; i < n && len(out) < k; i, x = i+1, (x+step)%n {
		if !lost.has(x) {
			out = append(out, x)
		}
	}
	return out
}

// Neighbours returns the slots s keeps links to, healed around the lost
// slots: its live tree parent and children, and its Watchers live
// successors and predecessors on the ring; sorted, without s.
func Neighbours(n, s int, lost Lost) []int {
	var out []int
	if p := LiveParent(n, s, lost); p >= 0 {
		out = append(out, p)
	}
	out = append(out, LiveChildren(n, s, lost)...)
	out = append(out, Successors(n, s, Watchers, lost)...)
	out = append(out, Predecessors(n, s, Watchers, lost)...)
	slices.Sort(out)
	out = slices.Compact(out)
	return slices.DeleteFunc(out, func(x int) bool { return x == s })
}

// NextHop returns the slot that s passes a message for dest to, over the
// tree healed around the lost slots: the live child whose subtree holds
// dest, else its live parent; dest itself when it is one of those. It is
// -1 when dest is lost or s is the live root and dest is below no child
// (which a live dest never is). A path is at most twice the tree's depth.
func NextHop(n, s, dest int, lost Lost) int {
	if dest == s || dest < 0 || dest >= n || lost.has(dest) {
		return -1
	}
	for a := dest; a >= 0; {
		p := LiveParent(n, a, lost)
		if p == s {
			return a
		}
		a = p
	}
	return LiveParent(n, s, lost) // -1 at the root: dest is not below it
}
