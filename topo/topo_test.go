package topo

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestStaticTree: every slot but 0 has a parent that lists it as a child;
// a subtree is the range of consecutive slots Range says; the depth is
// ⌈log_Radix⌉-like.
func TestStaticTree(t *testing.T) {
	for _, n := range []int{1, 2, 3, 8, 9, 10, 17, 64, 65, 100, 1024, 1025, 4097} {
		seen := make([]bool, n)
		maxDepth := 0
		for s := 0; s < n; s++ {
			p := Parent(n, s)
			if s == 0 {
				if p != -1 {
					t.Fatalf("Parent(%d, 0) = %d, want -1", n, p)
				}
			} else if !slices.Contains(Children(n, p), s) {
				t.Fatalf("Children(%d, %d) = %v, lacks %d whose parent it is", n, p, Children(n, p), s)
			}
			for _, c := range Children(n, s) {
				if seen[c] {
					t.Fatalf("n=%d: slot %d is a child twice", n, c)
				}
				seen[c] = true
				if Parent(n, c) != s {
					t.Fatalf("Parent(%d, %d) = %d, want %d", n, c, Parent(n, c), s)
				}
			}
			if len(Children(n, s)) > Radix {
				t.Fatalf("slot %d of %d has %d children", s, n, len(Children(n, s)))
			}
			lo, hi := Range(n, s)
			size := 1
			for _, c := range Children(n, s) {
				clo, chi := Range(n, c)
				if clo < lo || chi > hi {
					t.Fatalf("n=%d: subtree of %d is [%d,%d), outside its parent's [%d,%d)", n, c, clo, chi, lo, hi)
				}
				size += chi - clo
			}
			if lo != s || size != hi-lo {
				t.Fatalf("n=%d: Range(%d) = [%d,%d), its subtree has %d slots", n, s, lo, hi, size)
			}
			d := 0
			for x := s; x != 0; x = Parent(n, x) {
				d++
			}
			maxDepth = max(maxDepth, d)
		}
		want := 0
		for c := 1; c < n; c *= Radix {
			want++
		}
		if maxDepth > want {
			t.Errorf("n=%d: depth %d, want at most %d", n, maxDepth, want)
		}
	}
}

// TestHealedTree: for random sets of lost slots, the live slots form one
// tree: each live slot but the root has a live parent listing it as a
// child, following parents reaches the root, and no slot is anyone's
// child twice; the neighbours are symmetric, so both ends of a link
// agree that it should be.
func TestHealedTree(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for run := 0; run < 300; run++ {
		n := 1 + rng.IntN(300)
		lostSet := map[int]bool{}
		for i := rng.IntN(n); i > 0; i-- {
			if rng.IntN(3) == 0 {
				lostSet[rng.IntN(n)] = true
			}
		}
		if run%10 == 0 {
			lostSet[0] = true // the static root
		}
		lost := Lost(func(s int) bool { return lostSet[s] })
		root := Root(n, lost)
		if root < 0 {
			continue
		}
		childOf := map[int]int{}
		for s := 0; s < n; s++ {
			if lost(s) {
				continue
			}
			for _, c := range LiveChildren(n, s, lost) {
				if lost(c) {
					t.Fatalf("n=%d lost=%v: LiveChildren(%d) has lost %d", n, lostSet, s, c)
				}
				if p, dup := childOf[c]; dup {
					t.Fatalf("n=%d lost=%v: %d is a child of %d and %d", n, lostSet, c, p, s)
				}
				childOf[c] = s
			}
		}
		for s := 0; s < n; s++ {
			if lost(s) {
				continue
			}
			p := LiveParent(n, s, lost)
			if s == root {
				if p != -1 {
					t.Fatalf("n=%d lost=%v: the root %d has parent %d", n, lostSet, s, p)
				}
				continue
			}
			if q, ok := childOf[s]; !ok || q != p {
				t.Fatalf("n=%d lost=%v: LiveParent(%d) = %d, but it is a child of %d (%v)", n, lostSet, s, p, q, ok)
			}
			steps := 0
			for x := s; x != root; x = LiveParent(n, x, lost) {
				if steps++; steps > n {
					t.Fatalf("n=%d lost=%v: parents from %d do not reach the root", n, lostSet, s)
				}
			}
			for _, x := range Neighbours(n, s, lost) {
				if lost(x) || !slices.Contains(Neighbours(n, x, lost), s) {
					t.Fatalf("n=%d lost=%v: %d lists %d as a neighbour, not the other way round (or it is lost)", n, lostSet, s, x)
				}
			}
		}
	}
}

// TestRing: each live slot's successors are the next live ones, and it is
// a predecessor of each of them.
func TestRing(t *testing.T) {
	lost := Lost(func(s int) bool { return s == 3 || s == 4 || s == 9 })
	cases := []struct {
		s          int
		succ, pred []int
	}{
		{2, []int{5, 6}, []int{1, 0}},
		{8, []int{10, 0}, []int{7, 6}},
		{0, []int{1, 2}, []int{10, 8}},
	}
	for _, c := range cases {
		if got := Successors(11, c.s, 2, lost); !slices.Equal(got, c.succ) {
			t.Errorf("Successors(11, %d) = %v, want %v", c.s, got, c.succ)
		}
		if got := Predecessors(11, c.s, 2, lost); !slices.Equal(got, c.pred) {
			t.Errorf("Predecessors(11, %d) = %v, want %v", c.s, got, c.pred)
		}
	}
	if got := Successors(2, 0, 2, nil); !slices.Equal(got, []int{1}) {
		t.Errorf("Successors(2, 0) = %v, want [1]", got)
	}
}

// TestNeighboursAtScale: a slot keeps few links however large the job:
// at most a parent, Radix children and 2·Watchers ring neighbours.
func TestNeighboursAtScale(t *testing.T) {
	for _, n := range []int{1024, 100000} {
		most := 0
		for _, s := range []int{0, 1, 2, n / 2, n - 1} {
			most = max(most, len(Neighbours(n, s, nil)))
		}
		if most > 1+Radix+2*Watchers {
			t.Errorf("n=%d: a slot has %d neighbours, want at most %d", n, most, 1+Radix+2*Watchers)
		}
	}
}

// TestNextHop: from every live slot to every other, the hops lead there
// over tree links only (each hop a parent or child in the healed tree),
// in at most twice the depth, with and without lost slots; a lost
// destination has no hop.
func TestNextHop(t *testing.T) {
	for _, n := range []int{2, 9, 77, 1000} {
		for _, lostSet := range [][]int{nil, {0}, {1, 5, 9}, {0, 1, 2, 3, 8}} {
			dead := map[int]bool{}
			for _, x := range lostSet {
				if x < n {
					dead[x] = true
				}
			}
			lost := Lost(func(s int) bool { return dead[s] })
			step := 1
			if n > 100 {
				step = 37
			}
			for s := 0; s < n; s += step {
				if dead[s] {
					continue
				}
				for d := 0; d < n; d++ {
					hop := NextHop(n, s, d, lost)
					if d == s || dead[d] {
						if hop != -1 {
							t.Fatalf("n=%d lost=%v: hop from %d to %d = %d, want -1", n, lostSet, s, d, hop)
						}
						continue
					}
					at, hops := s, 0
					for at != d {
						next := NextHop(n, at, d, lost)
						if next < 0 || dead[next] || (LiveParent(n, at, lost) != next && LiveParent(n, next, lost) != at) {
							t.Fatalf("n=%d lost=%v: from %d to %d, at %d the hop is %d, not a tree link", n, lostSet, s, d, at, next)
						}
						at, hops = next, hops+1
						if hops > 16 {
							t.Fatalf("n=%d lost=%v: from %d to %d takes more than 16 hops", n, lostSet, s, d)
						}
					}
				}
			}
		}
	}
}
