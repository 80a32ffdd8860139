package sched

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"sperli/topo"
	"sperli/wire"
)

// The matrix: every collective at every rank count of rankCounts and data
// sizes on both sides of every switch of the table (bruckMax for all ranks'
// data together, chainMin per rank), over the fake Link, each rank's
// result checked against what the test computes by itself: the plain
// concatenations and cuts, and for reductions the sequential fold in rank
// order, ((r0 ∘ r1) ∘ r2) … (float sums included, whose bytes depend on
// the order).
//
// Not every size at every rank count: sizes around the chunk, where the
// pipelines cut their data, run at chunkRanks (the cut does not depend on
// the rank count), for the gathering calls (whose results are n times the
// data) at 2 and 3 ranks; beyond 9 ranks the gathering calls stop at a few
// KiB and the others at chainMin; min and max run at two sizes (sizes and
// folds say which). The whole product takes the race detector minutes.
//
// From treeMin ranks on (the tree and the chain) the rooted calls run at
// many roots (roots), as a root's place in the tree changes the way the
// data goes; 33 ranks run the chunk's sizes too, 33 and 40 ranks chainMin,
// where a subtree's data is more than a chunk; 257 ranks run a few KiB at
// most (8 bytes in the gathering calls) and alltoall's blocks of none and
// 8 bytes only (bruck; pairwise is the same as on fewer ranks). Under the race detector
// (raceOn) fewer roots and sizes run there.

var (
	rankCounts  = []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 32, 33, 40, 64, 100, 257}
	matrixKinds = []wire.CollKind{wire.CollBcast, wire.CollGather, wire.CollScatter, wire.CollAllgather, wire.CollAlltoall, wire.CollReduce, wire.CollAllreduce, wire.CollReduceScatter}
	chunkRanks  = []int{2, 3, 5, 33}
)

// roots are the roots a rooted call of size bytes a rank runs at on n
// ranks: n/2 below treeMin, as the star and the chain do not care; from it
// every root up to 64 ranks and 3 KiB, else the ends, the middle and the
// head of rank 0's last kid (the tree's right edge, which the chain's
// result goes up); under the race detector every root up to 40 ranks and
// beyond two of them.
func roots(n, size int) []int {
	switch {
	case n < treeMin:
		return []int{n / 2}
	case n <= 64 && size <= 3<<10+3 && !(raceOn && n > 40):
		out := make([]int, n)
		for r := range out {
			out[r] = r
		}
		return out
	case raceOn:
		return []int{1, n - 1}
	}
	kids := topo.Children(n, 0)
	out := []int{0, 1, n / 2, n - 1, kids[len(kids)-1]}
	slices.Sort(out)
	return slices.Compact(out)
}

// testFold is a reduction of 8-byte elements by op on their bits. It
// checks the alignment Fold promises.
type testFold struct {
	t    *testing.T
	name string
	op   func(a, b uint64) uint64
}

func (f *testFold) Elem() int { return 8 }

func (f *testFold) First(acc, x []byte) {
	f.aligned(acc)
	copy(acc, x)
}

func (f *testFold) Next(acc, x []byte) {
	f.aligned(acc)
	f.aligned(x)
	a, b := words(acc), words(x)
	for i := range a {
		a[i] = f.op(a[i], b[i])
	}
}

func (f *testFold) aligned(b []byte) {
	if len(b) > 0 && uintptr(unsafe.Pointer(&b[0]))%8 != 0 {
		f.t.Errorf("%s: a fold got a slice at %p, not 8-byte aligned", f.name, &b[0])
	}
}

// words is b as the machine's 8-byte words (b is aligned).
func words(b []byte) []uint64 {
	if len(b) < 8 {
		return nil
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), len(b)/8)
}

func f64(b uint64) float64 { return math.Float64frombits(b) }

// folds are the reductions of the matrix at size bytes: int64 and float64
// sums (the float sum's bytes depend on the order) at every size, int64
// min and float64 max at 8 bytes up to 9 ranks and chainMin up to 5.
func folds(n, size int) []*testFold {
	fs := []*testFold{
		{name: "int64-sum", op: func(a, b uint64) uint64 { return uint64(int64(a) + int64(b)) }},
		{name: "float64-sum", op: func(a, b uint64) uint64 { return math.Float64bits(f64(a) + f64(b)) }},
	}
	if size == 8 && (n <= 9 || n == 40) || size == chainMin && n <= 5 {
		fs = append(fs,
			&testFold{name: "int64-min", op: func(a, b uint64) uint64 { return uint64(min(int64(a), int64(b))) }},
			&testFold{name: "float64-max", op: func(a, b uint64) uint64 { return math.Float64bits(max(f64(a), f64(b))) }})
	}
	return fs
}

// wantFold is the sequential fold of the ranks' data in rank order,
// element by element, computed without the schedules or a Fold.
func wantFold(op func(a, b uint64) uint64, data [][]byte) []byte {
	out := make([]byte, len(data[0]))
	acc := words(out)
	copy(out, data[0])
	for _, d := range data[1:] {
		for i, x := range words(d) {
			acc[i] = op(acc[i], x)
		}
	}
	return out
}

// sizes are the bytes per rank of kind at n ranks: on both sides of every
// switch, whole multiples of unit (8, or 8n where the data is n blocks of
// elements).
func sizes(kind wire.CollKind, n int) []int {
	unit := 8
	if kind == wire.CollAlltoall || kind == wire.CollScatter || kind == wire.CollReduceScatter {
		unit = 8 * n
	}
	gathers := kind == wire.CollGather || kind == wire.CollAllgather // results n times the data
	bytesOnly := gathers || kind == wire.CollBcast
	reduces := kind == wire.CollReduce || kind == wire.CollAllreduce || kind == wire.CollReduceScatter
	targets := []int{0, 8, 3 << 10, chainMin - 8, chainMin, chainMin + 8}
	switch {
	case n >= treeMin && n <= 40:
		// chainMin: the tree's subtrees of more than a chunk, and the
		// reductions on both sides of the chain.
		targets = []int{0, 8, 3 << 10}
		if kind == wire.CollGather || !gathers {
			targets = append(targets, chainMin-8, chainMin)
		}
		if !gathers {
			targets = append(targets, chainMin+8)
		}
	case n > 100 && kind == wire.CollAlltoall:
		// bruck at 8 bytes a block and none; pairwise is as on fewer
		// ranks (n² frames).
		targets = targets[:2]
	case n > 100 && gathers:
		targets = targets[:2] // a few KiB a rank are MiBs a result
	case n > 100 || gathers && n > 9 || raceOn && n > 64:
		targets = targets[:3]
	case n > 9:
		targets = targets[:5]
	}
	if n > 1 && n <= bruckRanks {
		targets = append(targets, bruckMax/n, bruckMax/n+8)
	}
	switch {
	case !slices.Contains(chunkRanks, n) || gathers && n > 3 || kind == wire.CollAlltoall && n >= treeMin:
	case raceOn && n >= treeMin:
		targets = append(targets, chunk+8)
	default:
		targets = append(targets, chunk, chunk+8, 300<<10)
	}
	if reduces && n == 2 {
		targets = append(targets, 2*chunk+16) // blocks of more than a chunk
	}
	if bytesOnly {
		targets = append(targets, 5, 3<<10+3) // no whole elements
		if n > 100 && gathers {
			targets = targets[:len(targets)-1]
		}
	}
	var out []int
	for _, x := range targets {
		if bytesOnly {
			out = append(out, x)
			continue
		}
		lo := x - x%unit
		out = append(out, lo)
		if lo < x {
			out = append(out, lo+unit)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// ranksData is every rank's data for the matrix at n ranks, max bytes
// each; a case takes the first bytes of it. The elements are random floats
// of magnitudes from 2^-30 to 2^31 and both signs, so that their sum
// depends on the order.
func ranksData(n, max int) [][]byte {
	rng := rand.New(rand.NewPCG(uint64(n), 20))
	data := make([][]byte, n)
	for r := range data {
		data[r] = make([]byte, max)
		w := words(data[r])
		for i := range w {
			m := rng.Uint64()
			exp := 1023 - 30 + (m>>52&0x7ff)%61
			w[i] = m&(1<<63|1<<52-1) | exp<<52
		}
	}
	return data
}

// prefix is the first size bytes of every rank's data.
func prefix(data [][]byte, size int) [][]byte {
	out := make([][]byte, len(data))
	for r := range data {
		out[r] = data[r][:size:size]
	}
	return out
}

func TestMatrix(t *testing.T) {
	for _, n := range rankCounts {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			t.Parallel()
			most := 0
			for _, kind := range matrixKinds {
				most = max(most, slices.Max(append(sizes(kind, n), 0)))
			}
			all := ranksData(n, most)
			t.Run("barrier", func(t *testing.T) { checkBarrier(t, n) })
			for _, kind := range []wire.CollKind{wire.CollBcast, wire.CollGather, wire.CollScatter, wire.CollAllgather, wire.CollAlltoall} {
				for _, size := range sizes(kind, n) {
					t.Run(fmt.Sprintf("%s/%dB", kind, size), func(t *testing.T) {
						t.Parallel()
						for _, root := range roots(n, size) {
							checkMoves(t, Run, kind, prefix(all, size), root)
							if !rooted(kind) {
								break
							}
						}
					})
				}
			}
			for _, kind := range []wire.CollKind{wire.CollReduce, wire.CollAllreduce, wire.CollReduceScatter} {
				for _, size := range sizes(kind, n) {
					for _, f := range folds(n, size) {
						t.Run(fmt.Sprintf("%s/%dB/%s", kind, size, f.name), func(t *testing.T) {
							t.Parallel()
							f.t = t
							for _, root := range roots(n, size) {
								checkReduction(t, Run, kind, prefix(all, size), f, root)
								if !rooted(kind) {
									break
								}
							}
						})
					}
				}
			}
		})
	}
}

func checkBarrier(t *testing.T, n int) {
	_, res, errs := run(t, n, func(l *fakeLink) Call { return Call{Kind: wire.CollBarrier} })
	for r := range n {
		if errs[r] != nil || len(res[r]) != 0 {
			t.Errorf("barrier at rank %d = %d bytes, %v; want none, nil", r, len(res[r]), errs[r])
		}
	}
}

// rooted reports whether a call of kind has a root.
func rooted(kind wire.CollKind) bool {
	return kind == wire.CollBcast || kind == wire.CollReduce || kind == wire.CollGather || kind == wire.CollScatter
}

// checkMoves runs a collective that moves data without folding it, by s.
func checkMoves(t *testing.T, s Schedule, kind wire.CollKind, data [][]byte, root int) {
	n, size := len(data), len(data[0])
	_, res, errs := runBy(t, n, s, func(l *fakeLink) Call {
		c := Call{Kind: kind, Data: data[l.rank]}
		switch kind {
		case wire.CollBcast, wire.CollScatter:
			c.Root = root
			if l.rank != root { // their data is ignored: give none
				c.Data = nil
			}
		case wire.CollGather:
			c.Root = root
		}
		l.desc = descLen(kind, l.rank, root, len(c.Data))
		return c
	})
	for r := range n {
		var want []byte
		switch kind {
		case wire.CollBcast:
			want = data[root]
		case wire.CollScatter:
			b := size / n
			want = data[root][r*b : (r+1)*b]
		case wire.CollGather:
			if r == root {
				want = bytes.Join(data, nil)
			}
		case wire.CollAllgather:
			want = bytes.Join(data, nil)
		case wire.CollAlltoall:
			b := size / n
			for j := range n {
				want = append(want, data[j][r*b:(r+1)*b]...)
			}
		}
		checkResult(t, kind, r, res[r], errs[r], want)
	}
}

// checkReduction runs a reduction of every rank's data by f, by s.
func checkReduction(t *testing.T, s Schedule, kind wire.CollKind, data [][]byte, f *testFold, root int) {
	n, size := len(data), len(data[0])
	sum := wantFold(f.op, data)
	if f.name == "float64-sum" && n >= 3 && size >= 64 {
		// The check has teeth: another order gives other bytes.
		rev := slices.Clone(data)
		slices.Reverse(rev)
		if bytes.Equal(wantFold(f.op, rev), sum) {
			t.Fatalf("the test data's float sum does not depend on the order")
		}
	}
	_, res, errs := runBy(t, n, s, func(l *fakeLink) Call {
		l.desc = size
		c := Call{Kind: kind, Data: data[l.rank], Fold: f}
		if kind == wire.CollReduce {
			c.Root = root
		}
		return c
	})
	for r := range n {
		var want []byte
		switch kind {
		case wire.CollReduce:
			if r == root {
				want = sum
			}
		case wire.CollAllreduce:
			want = sum
		case wire.CollReduceScatter:
			b := size / n
			want = sum[r*b : (r+1)*b]
		}
		checkResult(t, kind, r, res[r], errs[r], want)
	}
}

func checkResult(t *testing.T, kind wire.CollKind, r int, got []byte, err error, want []byte) {
	t.Helper()
	if err != nil {
		t.Errorf("%s at rank %d: %v", kind, r, err)
		return
	}
	if !bytes.Equal(got, want) {
		i := 0
		for i < min(len(got), len(want)) && got[i] == want[i] {
			i++
		}
		t.Errorf("%s at rank %d = %d bytes, want %d; first difference at byte %d", kind, r, len(got), len(want), i)
	}
}

// TestBlocksSendAsFolded: the block schedule of a large reduction sends
// each folded chunk of a rank's block on (to every rank, or to the root)
// before it has taken the contributions of its block's later chunks, so
// that the results' sealing overlaps the opening and folding of the rest;
// the results stay the rank-order fold.
func TestBlocksSendAsFolded(t *testing.T) {
	const n = 3
	size := n * 3 * chunk // three chunks a block
	fold := &testFold{t: t, name: "float64-sum", op: func(a, b uint64) uint64 { return math.Float64bits(f64(a) + f64(b)) }}
	for _, kind := range []wire.CollKind{wire.CollAllreduce, wire.CollReduce} {
		t.Run(kind.String(), func(t *testing.T) {
			data := make([][]byte, n)
			for r := range data {
				data[r] = AlignedBytes(size)
				w := words(data[r])
				for i := range w {
					w[i] = math.Float64bits(1/float64(1+r+i%97) + float64(r))
				}
			}
			links, res, errs := run(t, n, func(l *fakeLink) Call {
				l.desc = size
				return Call{Kind: kind, Root: 1, Data: data[l.rank], Fold: fold}
			})
			want := wantFold(fold.op, data)
			for r, l := range links {
				if errs[r] != nil {
					t.Fatalf("rank %d: %v", r, errs[r])
				}
				if kind == wire.CollAllreduce || r == 1 {
					if !bytes.Equal(res[r], want) {
						t.Errorf("rank %d: the result is not the rank-order fold", r)
					}
				}
				if kind == wire.CollReduce && r == 1 {
					continue // the root sends no result
				}
				if l.firstResult == 0 || l.firstResult > l.lastData {
					t.Errorf("rank %d: first result sent at event %d, last contribution taken at %d: want the result first", r, l.firstResult, l.lastData)
				}
			}
		})
	}
}
