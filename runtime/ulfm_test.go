package runtime_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"sperli/codes"
	"sperli/runtime"
)

// lossReturnJob joins n ranks that manage their losses and crashes the
// last one (Close without bye: a broken connection to everyone).
func lossReturnJob(t *testing.T, ctx context.Context, n int) []*runtime.Comm {
	t.Helper()
	comms := newFixture(t, n).initAll(ctx)
	for _, c := range comms {
		if err := c.SetOnLoss(runtime.LossReturn); err != nil {
			t.Fatal(err)
		}
	}
	comms[n-1].Close()
	return comms[:n-1]
}

// TestLossReturn: after set_on_loss("return") a loss ends nothing: a
// receive from the lost rank is H1611, the others go on; agree gives the
// AND of the flags and the same failed list everywhere.
func TestLossReturn(t *testing.T) {
	ctx := testCtx(t)
	live := lossReturnJob(t, ctx, 4)
	if _, err := live[0].Recv(ctx, 3, 1); codes.Of(err) != codes.PeerLost {
		t.Fatalf("recv from the lost rank = %v, want H1611", err)
	}
	errs := each(live, func(c *runtime.Comm) error {
		if c.Rank() == 0 {
			return c.Send(ctx, 1, 5, []byte("still here"))
		}
		if c.Rank() == 1 {
			b, err := c.Recv(ctx, 0, 5)
			if err == nil && string(b) != "still here" {
				t.Errorf("rank 1 got %q", b)
			}
			return err
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d after the loss: %v", r, err)
		}
	}
	flags := []uint64{0b111, 0b101, 0b110}
	got := make([]uint64, len(live))
	errs = each(live, func(c *runtime.Comm) error {
		v, err := c.Agree(ctx, flags[c.Rank()])
		got[c.Rank()] = v
		return err
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: agree: %v", r, err)
		}
		if got[r] != 0b100 {
			t.Fatalf("rank %d: agree = %b, want 100", r, got[r])
		}
		if f := live[r].Failed(); !slices.Equal(f, []int{3}) {
			t.Fatalf("rank %d: failed() = %v after agree, want [3]", r, f)
		}
	}
}

// TestRevoke: a revoke wakes a pending receive on every rank with H1626,
// later calls are H1626 too; agree still works.
func TestRevoke(t *testing.T) {
	ctx := testCtx(t)
	live := lossReturnJob(t, ctx, 4)
	errs := each(live, func(c *runtime.Comm) error {
		switch c.Rank() {
		case 0:
			return c.Revoke()
		default:
			_, err := c.Recv(ctx, 0, 9) // never sent: only the revoke ends it
			return err
		}
	})
	for r := 1; r < len(live); r++ {
		if codes.Of(errs[r]) != codes.Revoked {
			t.Fatalf("rank %d: pending recv = %v, want H1626", r, errs[r])
		}
	}
	if err := live[0].Barrier(ctx); codes.Of(err) != codes.Revoked {
		t.Fatalf("barrier after revoke = %v, want H1626", err)
	}
	errs = each(live, func(c *runtime.Comm) error { _, err := c.Agree(ctx, 1); return err })
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: agree after revoke: %v", r, err)
		}
	}
}

// TestShrink: the live ranks make a new communicator of themselves in
// generation 1, numbered in their old order; the old one is revoked.
func TestShrink(t *testing.T) {
	ctx := testCtx(t)
	comms := newFixture(t, 4).initAll(ctx)
	for _, c := range comms {
		c.SetOnLoss(runtime.LossReturn)
	}
	comms[1].Close() // a rank in the middle: the ranks above move down
	live := []*runtime.Comm{comms[0], comms[2], comms[3]}
	next := make([]*runtime.Comm, 4)
	errs := each(live, func(c *runtime.Comm) error {
		n, err := c.Shrink(ctx)
		next[c.Rank()] = n
		return err
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("shrink on %d: %v", i, err)
		}
	}
	for old, want := range map[int]int{0: 0, 2: 1, 3: 2} {
		n := next[old]
		if n.Rank() != want || n.Size() != 3 || n.Generation() != 1 {
			t.Fatalf("old rank %d: new rank %d size %d generation %d, want %d, 3, 1", old, n.Rank(), n.Size(), n.Generation(), want)
		}
	}
	sums := make([]byte, 3)
	errs = each([]*runtime.Comm{next[0], next[2], next[3]}, func(c *runtime.Comm) error {
		b, err := c.Allreduce(ctx, runtime.Int64, runtime.Sum, []byte{1, 0, 0, 0, 0, 0, 0, 0})
		if err == nil {
			sums[c.Rank()] = b[0]
		}
		return err
	})
	for i, err := range errs {
		if err != nil || sums[i] != 3 {
			t.Fatalf("allreduce on the shrunk communicator, rank %d: %v, sum %d", i, err, sums[i])
		}
	}
	if err := comms[0].Barrier(ctx); codes.Of(err) != codes.Revoked {
		t.Fatalf("the old communicator after shrink: %v, want H1626", err)
	}
	// Shrinking the old one again would agree in a generation the others
	// have left (its frames dropped): it is refused at once.
	if _, err := comms[0].Shrink(ctx); codes.Of(err) != codes.Finished || !strings.Contains(err.Error(), "generation 0, which the job has left") {
		t.Fatalf("a second shrink of the old communicator: %v, want H1617", err)
	}
}

// TestAgreeAgainstShrink: after a loss, rank 0 calls agree while ranks 1
// and 2 call shrink, whose first step is an agree of its own. The two
// calls are not one: every rank ends with H1613 naming both (or H1612 of
// it, from the rank that said it first) instead of going on to different
// next calls and waiting for ever.
func TestAgreeAgainstShrink(t *testing.T) {
	ctx := testCtx(t)
	live := lossReturnJob(t, ctx, 4)
	errs := each(live, func(c *runtime.Comm) error {
		if c.Rank() == 0 {
			_, err := c.Agree(ctx, 1)
			return err
		}
		_, err := c.Shrink(ctx)
		return err
	})
	for r, err := range errs {
		ce := codes.As(err)
		switch {
		case ce == nil:
			t.Errorf("rank %d: %v, want H1613", r, err)
		case ce.Code == codes.CollectiveMismatch:
			if !strings.Contains(err.Error(), "collective mismatch in agree call 1: rank 0 called agree, rank 1 called shrink") {
				t.Errorf("rank %d: %v: want it to name rank 0's agree and rank 1's shrink", r, err)
			}
		case ce.Code == codes.JobEnded && ce.Cause != nil && ce.Cause.Code == codes.CollectiveMismatch:
		default:
			t.Errorf("rank %d: %v, want H1613", r, err)
		}
	}
}
