package runtime_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"sperli/codes"
	"sperli/runtime"
)

// TestSplit: on 1, 2, 3, 5 and 8 ranks, split by parity (key reversing the
// order) makes communicators of their own: ranks and sizes as MPI_Comm_split
// gives them, collectives and point-to-point within each (at sizes across
// the schedule switch), messages of one never matching the other's or the
// job's, several at once, nested splits, color -1 getting none.
func TestSplit(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 8} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ctx := testCtx(t)
			comms := newFixture(t, n).initAll(ctx)
			runAll(t, comms, func(c *runtime.Comm) error {
				me := c.Rank()
				color := me % 2
				sub, err := c.Split(ctx, color, -me) // key: higher job rank first
				if err != nil {
					return err
				}
				var group []int // job ranks of my color, by key
				for r := n - 1; r >= 0; r-- {
					if r%2 == color {
						group = append(group, r)
					}
				}
				if sub.Size() != len(group) || group[sub.Rank()] != me {
					return fmt.Errorf("split: rank %d of %d, want %d of %d (group %v)", sub.Rank(), sub.Size(), indexOf(group, me), len(group), group)
				}
				// The same tag on the job and on the sub-communicator: each
				// receive gets its own communicator's message.
				if n > 1 {
					next := (me + 1) % n
					if err := c.Send(ctx, next, 4, []byte("job")); err != nil {
						return err
					}
				}
				right := (sub.Rank() + 1) % sub.Size()
				if err := sub.Send(ctx, right, 4, []byte(fmt.Sprintf("sub %d", color))); err != nil {
					return err
				}
				got, env, err := sub.RecvFrom(ctx, runtime.AnySource, 4)
				left := (sub.Rank() - 1 + sub.Size()) % sub.Size()
				if err != nil || string(got) != fmt.Sprintf("sub %d", color) || env.Source != left {
					return fmt.Errorf("sub recv = %q from %d, %v; want sub %d from %d", got, env.Source, err, color, left)
				}
				if n > 1 {
					if got, err := c.Recv(ctx, (me-1+n)%n, 4); err != nil || string(got) != "job" {
						return fmt.Errorf("job recv = %q, %v", got, err)
					}
				}
				for _, k := range []int{8, chainMin + 8*sub.Size()} {
					data := make([]byte, k)
					binary.LittleEndian.PutUint64(data, uint64(me))
					sum, err := sub.Allreduce(ctx, runtime.Int64, runtime.Sum, data)
					if err != nil {
						return err
					}
					want := uint64(0)
					for _, r := range group {
						want += uint64(r)
					}
					if binary.LittleEndian.Uint64(sum) != want {
						return fmt.Errorf("sub allreduce of %d bytes = %d, want %d", k, binary.LittleEndian.Uint64(sum), want)
					}
					all, err := sub.Allgather(ctx, data[:8])
					if err != nil {
						return err
					}
					for i, r := range group {
						if binary.LittleEndian.Uint64(all[8*i:]) != uint64(r) {
							return fmt.Errorf("sub allgather = %x, want the group %v in its order", all, group)
						}
					}
				}
				// A nested split and color -1; then the job's own calls
				// still work.
				half, err := sub.Split(ctx, sub.Rank()%2-1, 0) // even sub ranks get -1
				if err != nil {
					return err
				}
				if (sub.Rank()%2 == 0) != (half == nil) {
					return fmt.Errorf("color -1 gave %v", half)
				}
				if half != nil {
					if err := half.Barrier(ctx); err != nil {
						return err
					}
				}
				b, err := c.Bcast(ctx, 0, bytes.Repeat([]byte{7}, 3))
				if err != nil || !bytes.Equal(b, []byte{7, 7, 7}) {
					return fmt.Errorf("job bcast after the splits = %v, %v", b, err)
				}
				if err := sub.Finish(); err != nil {
					return err
				}
				if err := sub.Barrier(ctx); codes.Of(err) != codes.Finished {
					return fmt.Errorf("barrier on a finished sub-communicator = %v, want H1617", err)
				}
				if err := sub.Checkpoint(ctx, nil); codes.Of(err) != codes.Finished {
					return fmt.Errorf("checkpoint on a sub-communicator = %v, want H1617", err)
				}
				return c.Barrier(ctx)
			})
		})
	}
}

func indexOf(s []int, x int) int {
	for i, v := range s {
		if v == x {
			return i
		}
	}
	return -1
}

// TestSplitWrongColor: a color below -1 on one rank is H1618 on every rank
// and the job goes on.
func TestSplitWrongColor(t *testing.T) {
	ctx := testCtx(t)
	comms := newFixture(t, 3).initAll(ctx)
	errs := each(comms, func(c *runtime.Comm) error {
		color := 0
		if c.Rank() == 2 {
			color = -5
		}
		_, err := c.Split(ctx, color, 0)
		return err
	})
	for r, err := range errs {
		if !isCode(err, codes.WrongCollective) {
			t.Fatalf("rank %d: split with rank 2's color -5 = %v, want H1618", r, err)
		}
	}
	runAll(t, comms, func(c *runtime.Comm) error { return c.Barrier(ctx) })
}

// TestSubRecvRanks: a receive on a sub-communicator names its source by
// its rank there, which is not its job rank: split reverses the order of 3
// ranks (job rank 0 is rank 2 there, rank 2 is rank 0). A receive on job
// rank 2 from sub-rank 2 (job rank 0) whose message is not here yet waits
// for it, though 2 is this rank's own job rank, and a receive from a
// finished sub-rank leaves the job's receives of the job rank of the same
// number alone.
func TestSubRecvRanks(t *testing.T) {
	ctx := testCtx(t)
	comms := newFixture(t, 3).initAll(ctx)
	runAll(t, comms, func(c *runtime.Comm) error {
		me := c.Rank()
		sub, err := c.Split(ctx, 0, -me)
		if err != nil {
			return err
		}
		if sub.Rank() != 2-me {
			return fmt.Errorf("split: rank %d, want %d", sub.Rank(), 2-me)
		}
		switch me {
		case 0:
			if _, err := c.Recv(ctx, 2, 1); err != nil {
				return err
			}
			if err := sub.Send(ctx, 0, 2, []byte("to sub-rank 0")); err != nil {
				return err
			}
			return c.Finish()
		case 2:
			// The message comes only after this rank asked for it.
			if err := c.Send(ctx, 0, 1, nil); err != nil {
				return err
			}
			got, err := sub.Recv(ctx, 2, 2)
			if err != nil || string(got) != "to sub-rank 0" {
				return fmt.Errorf("sub recv from sub-rank 2 = %q, %v; want the message of job rank 0", got, err)
			}
			// Rank 0 has finished once a receive from it is H1617.
			if _, err := c.Recv(ctx, 0, 3); !isCode(err, codes.Finished) {
				return fmt.Errorf("recv from finished rank 0 = %v, want H1617", err)
			}
			self, err := c.StartRecv(2, 9)
			if err != nil {
				return err
			}
			gone, err := sub.StartRecv(2, 9) // sub-rank 2 is job rank 0: finished
			if err != nil {
				return err
			}
			if _, err := sub.FinishRecv(ctx, gone); !isCode(err, codes.Finished) {
				return fmt.Errorf("sub recv from finished sub-rank 2 = %v, want H1617", err)
			}
			if err := c.Send(ctx, 2, 9, []byte("self")); err != nil {
				return err
			}
			if got, err := c.FinishRecv(ctx, self); err != nil || string(got) != "self" {
				return fmt.Errorf("recv from this rank itself = %q, %v; want self", got, err)
			}
			return c.Finish()
		}
		return c.Finish()
	})
}
