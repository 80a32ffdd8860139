package runtime_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"sperli/codes"
	"sperli/runtime"
)

// Sizes around the schedule switches (bruckMax for all ranks' data
// together, chainMin per rank) and the chunk boundaries.
const (
	bruckMax = 64 << 10
	chainMin = 64 << 10
	chunk    = 256 << 10
)

// bruckSizes are per-rank data sizes of elements of size bytes on both
// sides of the small-call switch of n ranks, whole blocks of n.
func bruckSizes(size, n int) []int {
	at := bruckMax / n
	at -= at % (size * n)
	return []int{at, at + size*n}
}

// tiled is rank r's contribution for (t, op) grown to about n bytes: the
// edge values of contribution, repeated, so every element of a large call
// is checked against the reference too.
func tiled(t mType, op runtime.Op, r, ranks, n int) []byte {
	base := contribution(t, op, r, ranks)
	n -= n % t.size
	out := make([]byte, 0, n)
	for len(out) < n {
		out = append(out, base[:min(len(base), n-len(out))]...)
	}
	return out
}

// schedSizes are data sizes that cross every switch and chunk boundary.
func schedSizes(size int) []int {
	return []int{0, size, chainMin - size, chainMin, chainMin + size, chunk + 3*size, 3*chunk - size, 3*chunk + 5*size}
}

// runAll runs fn on every rank and fails the test with every rank's error.
func runAll(t *testing.T, comms []*runtime.Comm, fn func(c *runtime.Comm) error) {
	t.Helper()
	for r, err := range each(comms, fn) {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// TestSchedulesMatchTheFold: reduce, allreduce and reduce_scatter on 2, 3
// and 5 ranks, at sizes on both sides of every schedule switch and chunk
// boundary, give byte for byte the rank-order fold of the reference — every
// (type, op) pair of SPEC §8.2 at a pipelined size, int64 and float64 sums
// (order-dependent) at every size.
func TestSchedulesMatchTheFold(t *testing.T) {
	type job struct {
		t    mType
		op   runtime.Op
		size int
	}
	for _, n := range []int{2, 3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ctx := testCtx(t)
			comms := newFixture(t, n).initAll(ctx)
			var jobs []job
			for _, ty := range mTypes {
				for _, o := range mOps {
					if validPair(ty, o.op) {
						jobs = append(jobs, job{ty, o.op, (chainMin/(ty.size*n) + 3) * ty.size * n})
					}
				}
			}
			for _, ty := range []mType{mTypes[2], mTypes[6]} {
				for _, sz := range append(schedSizes(ty.size), bruckSizes(ty.size, n)...) {
					jobs = append(jobs, job{ty, runtime.Sum, sz - sz%(ty.size*n)})
				}
			}
			runAll(t, comms, func(c *runtime.Comm) error {
				for i, j := range jobs {
					all := make([][]byte, n)
					for q := range all {
						all[q] = tiled(j.t, j.op, q, n, j.size)
					}
					want := refReduce(j.t, j.op, all)
					mine := all[c.Rank()]
					orig := bytes.Clone(mine)
					root := i % n
					got, err := c.Reduce(ctx, root, j.t.t, j.op, mine)
					if err != nil {
						return fmt.Errorf("reduce(%s, %v) of %d bytes: %v", j.t.name, j.op, j.size, err)
					}
					if w := want; c.Rank() != root && len(got) != 0 || c.Rank() == root && !bytes.Equal(got, w) {
						return fmt.Errorf("reduce(root %d, %s, %v) of %d bytes differs from the fold", root, j.t.name, j.op, j.size)
					}
					got, err = c.Allreduce(ctx, j.t.t, j.op, mine)
					if err != nil || !bytes.Equal(got, want) {
						return fmt.Errorf("allreduce(%s, %v) of %d bytes: differs from the fold (%v)", j.t.name, j.op, j.size, err)
					}
					b := len(want) / n
					got, err = c.ReduceScatter(ctx, j.t.t, j.op, mine)
					if err != nil || !bytes.Equal(got, want[c.Rank()*b:(c.Rank()+1)*b]) {
						return fmt.Errorf("reduce_scatter(%s, %v) of %d bytes: block %d differs from the fold (%v)", j.t.name, j.op, j.size, c.Rank(), err)
					}
					if !bytes.Equal(mine, orig) {
						return fmt.Errorf("%s %v of %d bytes changed the caller's data", j.t.name, j.op, j.size)
					}
				}
				return nil
			})
		})
	}
}

// TestFoldAtEveryRankCount: float64 sums (whose result depends on the
// order of the fold) by allreduce, reduce and reduce_scatter on 1 to 32
// ranks, at sizes on both sides of every schedule switch and across
// chunks, are byte for byte the sequential fold in rank order.
func TestFoldAtEveryRankCount(t *testing.T) {
	f64 := mTypes[6]
	for _, n := range []int{1, 4, 7, 16, 32} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ctx := testCtx(t)
			f := newFixture(t, n)
			// Up to 32 ranks in one process under -race on a loaded
			// machine: what is tested is the fold, not liveness.
			f.spec.SilenceMS = 60000
			comms := f.initAll(ctx)
			sizes := append(bruckSizes(8, n), chainMin-8*n, chainMin+8*n)
			if n <= 7 {
				sizes = append(sizes, chunk*n+8*n) // blocks of more than a chunk
			}
			runAll(t, comms, func(c *runtime.Comm) error {
				for _, sz := range sizes {
					sz -= sz % (8 * n)
					all := make([][]byte, n)
					for q := range all {
						all[q] = orderSensitive(q, sz/8)
					}
					want := refReduce(f64, runtime.Sum, all)
					mine := all[c.Rank()]
					got, err := c.Allreduce(ctx, runtime.Float64, runtime.Sum, mine)
					if err != nil || !bytes.Equal(got, want) {
						return fmt.Errorf("allreduce of %d bytes differs from the fold (%v)", sz, err)
					}
					got, err = c.Reduce(ctx, n-1, runtime.Float64, runtime.Sum, mine)
					if err != nil || c.Rank() == n-1 && !bytes.Equal(got, want) {
						return fmt.Errorf("reduce of %d bytes differs from the fold (%v)", sz, err)
					}
					b := sz / n
					got, err = c.ReduceScatter(ctx, runtime.Float64, runtime.Sum, mine)
					if err != nil || !bytes.Equal(got, want[c.Rank()*b:(c.Rank()+1)*b]) {
						return fmt.Errorf("reduce_scatter of %d bytes: block %d differs from the fold (%v)", sz, c.Rank(), err)
					}
				}
				return nil
			})
		})
	}
}

// orderSensitive is rank r's k float64s, little-endian: huge values that
// cancel and small ones they swallow, so that any other order of the fold
// than rank order gives other bytes.
func orderSensitive(r, k int) []byte {
	out := make([]byte, 8*k)
	for i := range k {
		v := orderF64[(r+i)%len(orderF64)] * (1 + float64(i%7)/8)
		binary.LittleEndian.PutUint64(out[8*i:], math.Float64bits(v))
	}
	return out
}

// TestScheduledMovers: bcast from every root, allgather and alltoall on 1,
// 2, 3, 5 and 8 ranks at sizes across the switches give what a plain
// reference says, results are new bytes, and the data is not changed.
func TestScheduledMovers(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 8} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ctx := testCtx(t)
			comms := newFixture(t, n).initAll(ctx)
			pattern := func(r, k int) []byte {
				b := make([]byte, k)
				for i := range b {
					b[i] = byte(i*7 + r*31 + i>>9)
				}
				return b
			}
			sizes := []int{0, 5, bruckMax / max(n, 1), bruckMax/max(n, 1) + 1, chainMin - 1, chainMin, chunk + 1, 3*chunk + 7}
			if n == 8 {
				sizes = []int{0, 5, bruckMax / n, bruckMax/n + 1, chainMin, chunk + 1}
			}
			runAll(t, comms, func(c *runtime.Comm) error {
				me := c.Rank()
				for _, k := range sizes {
					for root := 0; root < n; root++ {
						var data []byte
						if me == root {
							data = pattern(root, k)
						}
						got, err := c.Bcast(ctx, root, data)
						if err != nil || !bytes.Equal(got, pattern(root, k)) {
							return fmt.Errorf("bcast(root %d) of %d bytes = %d bytes, %v", root, k, len(got), err)
						}
						if me == root && k > 0 {
							got[0] ^= 1
							if data[0] != pattern(root, k)[0] {
								return fmt.Errorf("bcast returned the root's own bytes")
							}
						}
					}
					mine := pattern(me, k)
					got, err := c.Allgather(ctx, mine)
					var want []byte
					for r := 0; r < n; r++ {
						want = append(want, pattern(r, k)...)
					}
					if err != nil || !bytes.Equal(got, want) {
						return fmt.Errorf("allgather of %d bytes = %d bytes, %v", k, len(got), err)
					}
					blocks := k - k%n
					mine = pattern(me, blocks)
					got, err = c.Alltoall(ctx, mine)
					if err != nil {
						return fmt.Errorf("alltoall of %d bytes: %v", blocks, err)
					}
					b := blocks / n
					for r := 0; r < n; r++ {
						if w := pattern(r, blocks)[me*b : (me+1)*b]; !bytes.Equal(got[r*b:(r+1)*b], w) {
							return fmt.Errorf("alltoall of %d bytes: block from rank %d differs", blocks, r)
						}
					}
					if !bytes.Equal(mine, pattern(me, blocks)) {
						return fmt.Errorf("alltoall changed the caller's data")
					}
				}
				return nil
			})
		})
	}
}

// TestScheduleRules: on every schedule a wrong argument on one rank is
// H1618 on every rank and the job goes on; different lengths are H1613.
func TestScheduleRules(t *testing.T) {
	for _, size := range []int{16, 8000, chainMin + 16} { // bruck, star, blocks
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			ctx := testCtx(t)
			comms := newFixture(t, 3).initAll(ctx)
			calls := []struct {
				name string
				call func(c *runtime.Comm, data []byte) error
			}{
				{"allreduce", func(c *runtime.Comm, d []byte) error {
					_, err := c.Allreduce(ctx, runtime.Int64, runtime.Sum, d)
					return err
				}},
				{"reduce", func(c *runtime.Comm, d []byte) error {
					_, err := c.Reduce(ctx, 2, runtime.Int64, runtime.Sum, d)
					return err
				}},
				{"reduce_scatter", func(c *runtime.Comm, d []byte) error {
					_, err := c.ReduceScatter(ctx, runtime.Int64, runtime.Sum, d)
					return err
				}},
				{"allgather", func(c *runtime.Comm, d []byte) error {
					if len(d)%8 != 0 {
						d = make([]byte, runtime.MaxCollective+1) // the allgather's own wrong argument
					}
					_, err := c.Allgather(ctx, d)
					return err
				}},
				{"alltoall", func(c *runtime.Comm, d []byte) error { _, err := c.Alltoall(ctx, d); return err }},
			}
			for _, cl := range calls {
				good := make([]byte, size*3) // whole int64 elements, 3 whole blocks
				errs := each(comms, func(c *runtime.Comm) error {
					d := good
					if c.Rank() == 1 {
						d = good[:len(good)-1] // 7 bytes short of an element and of a block
					}
					return cl.call(c, d)
				})
				for r, err := range errs {
					if !isCode(err, codes.WrongCollective) {
						t.Fatalf("%s with rank 1 wrong: rank %d = %v, want H1618", cl.name, r, err)
					}
				}
				runAll(t, comms, func(c *runtime.Comm) error { return cl.call(c, good) })
			}
			errs := each(comms, func(c *runtime.Comm) error {
				d := make([]byte, size*3)
				if c.Rank() == 2 {
					d = make([]byte, size*3+24*3) // whole elements and blocks, but more
				}
				_, err := c.Allreduce(ctx, runtime.Int64, runtime.Sum, d)
				return err
			})
			seen := 0
			for r, err := range errs {
				switch {
				case isCode(err, codes.CollectiveMismatch):
					seen++
				case isCode(err, codes.JobEnded):
				default:
					t.Errorf("allreduce of different lengths: rank %d = %v, want H1613 or H1612", r, err)
				}
			}
			if seen == 0 {
				t.Errorf("allreduce of different lengths: no rank saw H1613: %v", errs)
			}
		})
	}
}

var _ = context.Background
