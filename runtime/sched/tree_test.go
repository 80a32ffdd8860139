package sched

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"testing"

	"sperli/topo"
	"sperli/wire"
)

// TestChooseUpTo32: on 1 to 32 ranks every call runs by the line it ran by
// before issue 21 (measured, docs/benchmarks.md), which before writes out;
// from treeMin ranks by the tree, the chain, the ring or pairwise.
func TestChooseUpTo32(t *testing.T) {
	for _, kind := range append(slices.Clone(matrixKinds), wire.CollBarrier) {
		for size := 1; size <= 40; size++ {
			for _, n := range []int{0, 8, 16 << 10 / size, 64<<10/size - 8, 64<<10/size + 8, 64<<10 - 8, 64 << 10, size * 8 << 10, size * (8<<10 + 8), 1 << 20} {
				want := before(kind, size, n)
				if size >= treeMin {
					want = beyond32(kind, size, n)
				}
				if r, ok := Choose(kind, size, n); !ok || r.Name != want {
					t.Errorf("Choose(%s, %d, %d) = %q, %v; want %q, true", kind, size, n, r.Name, ok, want)
				}
			}
		}
	}
}

// before is the table as it was before issue 21 (bruckRanks 4, bruckMax
// and chainMin 64 KiB).
func before(kind wire.CollKind, size, n int) string {
	large := size > 1 && n >= 64<<10
	small := size > 1 && size <= 4 && size*n <= 64<<10
	switch kind {
	case wire.CollBarrier:
		if size <= 4 {
			return "dissemination"
		}
		return "star"
	case wire.CollBcast:
		if large {
			return "chain"
		}
		return "star"
	case wire.CollReduce, wire.CollAllreduce, wire.CollReduceScatter, wire.CollAllgather:
		switch {
		case large && kind == wire.CollAllgather:
			return "ring"
		case large:
			return "blocks"
		case small:
			return "bruck"
		}
		return "star"
	case wire.CollAlltoall:
		return "pairwise"
	}
	return "star"
}

// beyond32 is the line of a call of n bytes a rank on size ranks, size
// treeMin or more.
func beyond32(kind wire.CollKind, size, n int) string {
	switch {
	case kind == wire.CollAlltoall && n/size <= 8<<10 && n <= 4<<20:
		return "bruck"
	case kind == wire.CollAlltoall:
		return "pairwise"
	case n >= 64<<10 && kind == wire.CollAllgather:
		return "ring"
	case n >= 64<<10 && (kind == wire.CollReduce || kind == wire.CollAllreduce || kind == wire.CollReduceScatter):
		return "chain"
	}
	return "tree"
}

// treeLines are the lines of the table that run on treeMin ranks or more,
// by their kind and name, with the most partners a rank may have in one
// call of them at any size (topo.Radix is 8): the tree's parent and kids;
// the chain's, plus its neighbours on the chain, one of which is its
// parent or first kid where it has kids; the ring's two neighbours.
// alltoall's pairwise exchange has every rank a partner, by definition.
var treeLines = []struct {
	kind     wire.CollKind
	name     string
	partners int
}{
	{wire.CollBarrier, "tree", topo.Radix + 1},
	{wire.CollBcast, "tree", topo.Radix + 1},
	{wire.CollGather, "tree", topo.Radix + 1},
	{wire.CollScatter, "tree", topo.Radix + 1},
	{wire.CollReduce, "tree", topo.Radix + 1},
	{wire.CollAllreduce, "tree", topo.Radix + 1},
	{wire.CollReduceScatter, "tree", topo.Radix + 1},
	{wire.CollAllgather, "tree", topo.Radix + 1},
	{wire.CollReduce, "chain", topo.Radix + 2},
	{wire.CollAllreduce, "chain", topo.Radix + 2},
	{wire.CollReduceScatter, "chain", topo.Radix + 2},
	{wire.CollAllgather, "ring", 2},
}

// line is the table's line of kind named name.
func line(t *testing.T, kind wire.CollKind, name string) Rule {
	t.Helper()
	for _, r := range table {
		if r.Kind == kind && r.Name == name {
			return r
		}
	}
	t.Fatalf("the table has no line %s %s", kind, name)
	return Rule{}
}

// TestPartners: at 1,024 ranks a rank sends to or takes from at most the
// line's partners in one call (the bound of treeLines) and only ranks it
// keeps links to anyway in the job's topology (topo.Neighbours: its tree
// parent and kids and two ring neighbours on each side), whatever the
// root; and over all the calls together too. The lines run their
// schedules directly at 8 bytes a rank (the chain's and the ring's
// partners do not depend on the size that chooses them).
func TestPartners(t *testing.T) {
	const n = 1024
	union := make([]map[int]bool, n)
	for r := range union {
		union[r] = make(map[int]bool)
	}
	for _, tl := range treeLines {
		if tl.name == "ring" && raceOn {
			continue // a million frames: seconds, half a minute under the race detector
		}
		rule := line(t, tl.kind, tl.name)
		rs := []int{0}
		switch {
		case rooted(tl.kind) && raceOn:
			rs = []int{555}
		case rooted(tl.kind):
			rs = []int{0, 1, 555, n - 1}
		}
		for _, root := range rs {
			links, _, errs := runBy(t, n, rule.Run, func(l *fakeLink) Call {
				c := Call{Kind: tl.kind, Root: root, Data: make([]byte, 8)}
				switch tl.kind {
				case wire.CollBarrier:
					c.Data = nil
				case wire.CollReduceScatter, wire.CollScatter:
					c.Data = make([]byte, 8*n)
				}
				if tl.kind == wire.CollReduce || tl.kind == wire.CollAllreduce || tl.kind == wire.CollReduceScatter {
					c.Fold = folds(n, 8)[0]
				}
				l.desc = descLen(tl.kind, l.rank, root, len(c.Data))
				return c
			})
			most, at := 0, 0
			for r, l := range links {
				if errs[r] != nil {
					t.Fatalf("%s %s at rank %d: %v", tl.kind, tl.name, r, errs[r])
				}
				if len(l.partners) > most {
					most, at = len(l.partners), r
				}
				nb := topo.Neighbours(n, r, nil)
				for p := range l.partners {
					union[r][p] = true
					if !slices.Contains(nb, p) {
						t.Errorf("%s %s (root %d): rank %d has rank %d as a partner, not a topo neighbour %v", tl.kind, tl.name, root, r, p, nb)
					}
				}
				checkNamed(t, fmt.Sprintf("%s %s (root %d)", tl.kind, tl.name, root), l, nb)
			}
			t.Logf("%s %s, root %d: at most %d partners (rank %d)", tl.kind, tl.name, root, most, at)
			if most > tl.partners {
				t.Errorf("%s %s (root %d): rank %d has %d partners, want at most %d", tl.kind, tl.name, root, at, most, tl.partners)
			}
		}
	}
	most := 0
	for _, u := range union {
		most = max(most, len(u))
	}
	t.Logf("all lines together: at most %d partners a rank", most)
	if most > topo.Radix+2 {
		t.Errorf("all lines together: a rank has %d partners, want at most %d", most, topo.Radix+2)
	}
}

// TestTreeSmall runs the tree's and the chain's lines on 1 to 32 ranks,
// which the table does not choose them for, so that every shape of the
// tree meets them: a rank alone, kids that are leaves, a last part
// shorter than the others. Data of none and 8 bytes a rank at every root,
// and on 3 and 10 ranks of more than a chunk at two roots; float sums in
// rank order.
func TestTreeSmall(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 9, 10, 11, 17, 24} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			t.Parallel()
			for _, tl := range treeLines {
				if tl.name == "ring" && n == 1 {
					continue // the table runs the ring on 2 ranks or more
				}
				rule := line(t, tl.kind, tl.name)
				unit := 8
				if tl.kind == wire.CollScatter || tl.kind == wire.CollReduceScatter {
					unit = 8 * n
				}
				for _, size := range []int{0, unit, (chunk/unit + 1) * unit} {
					if size > unit && n != 3 && n != 10 {
						continue
					}
					data := ranksData(n, size)
					rs := []int{0}
					switch {
					case rooted(tl.kind) && size <= unit:
						rs = make([]int, n) // every root
						for r := range rs {
							rs[r] = r
						}
					case rooted(tl.kind):
						rs = []int{n / 3, n - 1}
					}
					for _, root := range rs {
						switch tl.kind {
						case wire.CollBarrier:
							checkBarrierBy(t, rule.Run, n)
						case wire.CollReduce, wire.CollAllreduce, wire.CollReduceScatter:
							checkReduction(t, rule.Run, tl.kind, data, folds(n, size)[1], root)
						default:
							checkMoves(t, rule.Run, tl.kind, data, root)
						}
					}
				}
			}
		})
	}
}

func checkBarrierBy(t *testing.T, s Schedule, n int) {
	_, res, errs := runBy(t, n, s, func(l *fakeLink) Call { return Call{Kind: wire.CollBarrier} })
	for r := range n {
		if errs[r] != nil || len(res[r]) != 0 {
			t.Errorf("barrier at rank %d = %d bytes, %v; want none, nil", r, len(res[r]), errs[r])
		}
	}
}

// TestBruckAlltoall runs alltoall's bruck directly on 1 to 40 ranks (the
// table takes it from treeMin only), where the rounds' blocks are every
// shape (n a power of two or not, a last round of fewer blocks), and on
// 1,024 ranks, where a rank has at most 2⌈log2 n⌉ partners: one to send
// to and one to take from in each round.
func TestBruckAlltoall(t *testing.T) {
	rule := line(t, wire.CollAlltoall, "bruck")
	for n := 1; n <= 40; n++ {
		for _, b := range []int{0, 8, 24} {
			checkMoves(t, rule.Run, wire.CollAlltoall, ranksData(n, n*b), 0)
		}
	}
	for _, n := range []int{7, 33, 40} {
		// Blocks past the 1 KiB that bounded bruck until 2026-12-06.
		checkMoves(t, rule.Run, wire.CollAlltoall, ranksData(n, n*3000), 0)
		checkMoves(t, rule.Run, wire.CollAlltoall, ranksData(n, n*bruckBlock), 0)
	}
	const n = 1024
	links, res, errs := runBy(t, n, rule.Run, func(l *fakeLink) Call {
		data := make([]byte, 8*n)
		for j := range n {
			binary.LittleEndian.PutUint32(data[8*j:], uint32(l.rank))
			binary.LittleEndian.PutUint32(data[8*j+4:], uint32(j))
		}
		l.desc = descLen(wire.CollAlltoall, l.rank, 0, len(data))
		return Call{Kind: wire.CollAlltoall, Data: data}
	})
	rounds := bits.Len(uint(n - 1))
	for r, l := range links {
		if errs[r] != nil {
			t.Fatalf("alltoall bruck at rank %d: %v", r, errs[r])
		}
		if len(l.partners) > 2*rounds {
			t.Errorf("alltoall bruck at rank %d: %d partners, want at most %d", r, len(l.partners), 2*rounds)
		}
		checkNamed(t, "alltoall bruck", l, slices.Collect(maps.Keys(l.partners)))
		for j := range n { // block j came from rank j, and was meant for r
			from, to := binary.LittleEndian.Uint32(res[r][8*j:]), binary.LittleEndian.Uint32(res[r][8*j+4:])
			if int(from) != j || int(to) != r {
				t.Fatalf("alltoall bruck at rank %d: block %d is rank %d's block for rank %d", r, j, from, to)
			}
		}
	}
}

// checkNamed checks that l's schedule named every rank it sent to or took
// from in Partners before its first frame to or from it (the runtime
// makes the missing links of a call then, all together), and named only
// ranks among may.
func checkNamed(t *testing.T, what string, l *fakeLink, may []int) {
	t.Helper()
	for p := range l.unnamed {
		t.Errorf("%s: rank %d used rank %d before naming it a partner", what, l.rank, p)
	}
	for p := range l.named {
		if !slices.Contains(may, p) {
			t.Errorf("%s: rank %d named rank %d a partner, not one of %v", what, l.rank, p, may)
		}
	}
}
