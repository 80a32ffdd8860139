package runtime_test

import (
	"context"
	"errors"
	"testing"
)

// TestCancelledRecvWithdraws: a Recv (and a FinishRecv) whose ctx ends
// withdraws its posted receive, so the next message goes to the next
// receive instead of being swallowed (issue: the cancelled receive took it,
// and Exit later failed with H1617).
func TestCancelledRecvWithdraws(t *testing.T) {
	ctx := testCtx(t)
	comms := newFixture(t, 2).initAll(ctx)
	a, b := comms[0], comms[1]

	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.Recv(gone, 0, 5); !errors.Is(err, context.Canceled) {
		t.Fatalf("Recv with a cancelled ctx = %v, want context.Canceled", err)
	}
	op, err := b.StartRecv(0, 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.FinishRecv(gone, op); !errors.Is(err, context.Canceled) {
		t.Fatalf("FinishRecv with a cancelled ctx = %v, want context.Canceled", err)
	}
	for _, m := range []string{"one", "two"} {
		if err := a.Send(ctx, 1, 5, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"one", "two"} {
		got, err := b.Recv(ctx, 0, 5)
		if err != nil || string(got) != want {
			t.Fatalf("Recv after cancelled receives = %q, %v; want %q", got, err, want)
		}
	}
	if _, err := b.FinishRecv(ctx, op); err == nil {
		t.Fatalf("FinishRecv of the withdrawn operation succeeded, want H1617")
	}
	if err := a.Finish(); err != nil {
		t.Fatalf("Finish(rank 0) = %v", err)
	}
	if err := b.Finish(); err != nil {
		t.Fatalf("Finish(rank 1) = %v (a withdrawn receive must not stay open)", err)
	}
}
