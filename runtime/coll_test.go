package runtime_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"sperli/codes"
	"sperli/runtime"
)

func i64s(v ...int64) []byte {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, uint64(x))
	}
	return b
}

// TestCollectivesBasic runs every collective on 1, 2, 3 and 5 ranks with
// results computed independently here.
func TestCollectivesBasic(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5} {
		t.Run(fmt.Sprintf("%d ranks", n), func(t *testing.T) {
			ctx := testCtx(t)
			comms := newFixture(t, n).initAll(ctx)
			root := n - 1
			errs := each(comms, func(c *runtime.Comm) error {
				r := int64(c.Rank())
				if err := c.Barrier(ctx); err != nil {
					return fmt.Errorf("barrier: %v", err)
				}
				got, err := c.Reduce(ctx, root, runtime.Int64, runtime.Sum, i64s(r+1, -r))
				if err != nil {
					return fmt.Errorf("reduce: %v", err)
				}
				var s0, s1 int64
				for i := int64(0); i < int64(n); i++ {
					s0 += i + 1
					s1 -= i
				}
				want := []byte{}
				if c.Rank() == root {
					want = i64s(s0, s1)
				}
				if !bytes.Equal(got, want) {
					return fmt.Errorf("reduce = %x, want %x", got, want)
				}
				got, err = c.Allreduce(ctx, runtime.Int64, runtime.Max, i64s(r*r))
				if err != nil || !bytes.Equal(got, i64s(int64((n-1)*(n-1)))) {
					return fmt.Errorf("allreduce max = %x, %v", got, err)
				}
				var data []byte
				if c.Rank() == root {
					data = []byte("broadcast!")
				}
				got, err = c.Bcast(ctx, root, data)
				if err != nil || string(got) != "broadcast!" {
					return fmt.Errorf("bcast = %q, %v", got, err)
				}
				got, err = c.Gather(ctx, 0, []byte{byte(c.Rank()), 0xee})
				if err != nil {
					return fmt.Errorf("gather: %v", err)
				}
				want = []byte{}
				if c.Rank() == 0 {
					for i := 0; i < n; i++ {
						want = append(want, byte(i), 0xee)
					}
				}
				if !bytes.Equal(got, want) {
					return fmt.Errorf("gather = %x, want %x", got, want)
				}
				data = nil
				if c.Rank() == root {
					for i := 0; i < n; i++ {
						data = append(data, byte(10*i), byte(10*i+1))
					}
				}
				got, err = c.Scatter(ctx, root, data)
				if err != nil || !bytes.Equal(got, []byte{byte(10 * c.Rank()), byte(10*c.Rank() + 1)}) {
					return fmt.Errorf("scatter = %x, %v", got, err)
				}
				return c.Finish()
			})
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
	}
}

// TestWrongCallGoesOn: wrong arguments seen by all ranks or by one only are
// H1618 on every rank, and the next collective succeeds.
func TestWrongCallGoesOn(t *testing.T) {
	ctx := testCtx(t)
	comms := newFixture(t, 3).initAll(ctx)
	calls := []struct {
		name string
		call func(c *runtime.Comm) error
	}{
		{"root outside the job", func(c *runtime.Comm) error {
			_, err := c.Reduce(ctx, 3, runtime.Int64, runtime.Sum, i64s(1))
			return err
		}},
		{"op that does not fit the type", func(c *runtime.Comm) error {
			_, err := c.Allreduce(ctx, runtime.Float64, runtime.Bxor, i64s(1))
			return err
		}},
		{"7 bytes of int64 on rank 1 only", func(c *runtime.Comm) error {
			d := i64s(1)
			if c.Rank() == 1 {
				d = d[:7]
			}
			_, err := c.Reduce(ctx, 0, runtime.Int64, runtime.Sum, d)
			return err
		}},
		{"data over the limit on rank 2 only", func(c *runtime.Comm) error {
			d := make([]byte, 8)
			if c.Rank() == 2 {
				d = make([]byte, runtime.MaxCollective+8)
			}
			_, err := c.Allreduce(ctx, runtime.Int64, runtime.Sum, d)
			return err
		}},
	}
	for _, tc := range calls {
		errs := each(comms, tc.call)
		for r, err := range errs {
			wantCode(t, fmt.Sprintf("%s: rank %d", tc.name, r), err, codes.WrongCollective)
		}
		errs = each(comms, func(c *runtime.Comm) error {
			got, err := c.Allreduce(ctx, runtime.Int64, runtime.Sum, i64s(int64(c.Rank())))
			if err == nil && !bytes.Equal(got, i64s(3)) {
				return fmt.Errorf("allreduce = %x, want 3", got)
			}
			return err
		})
		for r, err := range errs {
			if err != nil {
				t.Fatalf("after %s: rank %d: next allreduce = %v", tc.name, r, err)
			}
		}
	}
}

// TestMismatchEndsJob: a mismatch is H1613 on the rank that sees it and
// H1612 on every other, and the job ends.
func TestMismatchEndsJob(t *testing.T) {
	cases := []struct {
		name string
		call func(ctx context.Context, c *runtime.Comm) error
	}{
		{"contributions of different lengths", func(ctx context.Context, c *runtime.Comm) error {
			d := i64s(1)
			if c.Rank() == 2 {
				d = i64s(1, 2)
			}
			_, err := c.Reduce(ctx, 0, runtime.Int64, runtime.Sum, d)
			return err
		}},
		{"scatter of no whole number of blocks", func(ctx context.Context, c *runtime.Comm) error {
			_, err := c.Scatter(ctx, 0, []byte("seven b"))
			return err
		}},
		{"different collectives", func(ctx context.Context, c *runtime.Comm) error {
			if c.Rank() == 1 {
				return c.Barrier(ctx)
			}
			_, err := c.Allreduce(ctx, runtime.Int64, runtime.Sum, i64s(1))
			return err
		}},
		{"different roots", func(ctx context.Context, c *runtime.Comm) error {
			root := 0
			if c.Rank() == 2 {
				root = 2
			}
			_, err := c.Bcast(ctx, root, []byte("x"))
			return err
		}},
		{"different types", func(ctx context.Context, c *runtime.Comm) error {
			typ := runtime.Int64
			if c.Rank() == 1 {
				typ = runtime.Uint64
			}
			_, err := c.Allreduce(ctx, typ, runtime.Sum, i64s(1))
			return err
		}},
		{"different ops", func(ctx context.Context, c *runtime.Comm) error {
			op := runtime.Sum
			if c.Rank() == 0 {
				op = runtime.Max
			}
			_, err := c.Allreduce(ctx, runtime.Int64, op, i64s(1))
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			comms := newFixture(t, 3).initAll(ctx)
			errs := each(comms, func(c *runtime.Comm) error { return tc.call(ctx, c) })
			seen := 0
			for r, err := range errs {
				switch codes.Of(err) {
				case codes.CollectiveMismatch:
					seen++
				case codes.JobEnded:
					if e := codes.As(err); e.Cause == nil || e.Cause.Kind != codes.CauseFailed || e.Cause.Code != codes.CollectiveMismatch {
						t.Errorf("rank %d: %v has cause %+v, want a failed rank's H1613", r, err, e.Cause)
					}
				default:
					t.Errorf("rank %d: %v, want H1613 or H1612", r, err)
				}
			}
			if seen == 0 {
				t.Errorf("no rank saw H1613: %v", errs)
			}
			for r, c := range comms {
				if err := c.Barrier(ctx); codes.Of(err) != codes.CollectiveMismatch && codes.Of(err) != codes.JobEnded {
					t.Errorf("rank %d: barrier after the mismatch = %v, want the job's end", r, err)
				}
			}
		})
	}
}
