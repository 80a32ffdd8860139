package runtime_test

import (
	goruntime "runtime"
	"strings"
	"testing"

	"sperli/codes"
	"sperli/runtime"
)

// TestAnySourceAfterLoss: under LossReturn an any-source receive and probe
// posted before a loss raise H1611 naming the lost rank (they wait for
// ever no more); one posted after it waits for the live ranks and gets
// their message.
func TestAnySourceAfterLoss(t *testing.T) {
	ctx := testCtx(t)
	comms := newFixture(t, 4).initAll(ctx)
	for _, c := range comms {
		if err := c.SetOnLoss(runtime.LossReturn); err != nil {
			t.Fatal(err)
		}
	}
	op, err := comms[0].StartRecv(runtime.AnySource, runtime.AnyTag)
	if err != nil {
		t.Fatal(err)
	}
	probed := make(chan error, 1)
	go func() {
		_, err := comms[1].Probe(ctx, runtime.AnySource, 4)
		probed <- err
	}()
	for runtime.ProbesWaiting(comms[1]) == 0 {
		select {
		case <-ctx.Done():
			t.Fatal("the probe was never posted")
		case err := <-probed:
			t.Fatalf("the probe ended before the loss: %v", err)
		default:
			goruntime.Gosched()
		}
	}
	comms[3].Close() // lost: no bye
	_, err = comms[0].FinishRecv(ctx, op)
	if codes.Of(err) != codes.PeerLost || !strings.Contains(err.Error(), "rank 3, which could have sent it, lost") {
		t.Fatalf("any-source receive across the loss = %v, want H1611 naming rank 3", err)
	}
	if err := <-probed; codes.Of(err) != codes.PeerLost || !strings.Contains(err.Error(), "probe(any source, tag 4)") {
		t.Fatalf("any-source probe across the loss = %v, want H1611", err)
	}
	// Known now: the next one waits for the live ranks, and says which.
	op, err = comms[0].StartRecv(runtime.AnySource, 9)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := runtime.WaitText(comms[0], op), "recv(any source, tag 9), from ranks 1, 2"; got != want {
		t.Errorf("the waiting record says %q, want %q", got, want)
	}
	errs := each(comms[:3], func(c *runtime.Comm) error {
		switch c.Rank() {
		case 0:
			if _, err := c.FinishRecv(ctx, op); err != nil {
				return err
			}
			b, env, err := c.RecvFrom(ctx, runtime.AnySource, runtime.AnyTag)
			if err == nil && (string(b) != "from 2" || env.Source != 2) {
				t.Errorf("rank 0 got %q from %d", b, env.Source)
			}
			return err
		case 2:
			if err := c.Send(ctx, 0, 9, nil); err != nil {
				return err
			}
			return c.Send(ctx, 0, 6, []byte("from 2"))
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d after the loss: %v", r, err)
		}
	}
}

// TestAnySourceAllFinished: an any-source receive waiting when every
// other rank finishes raises H1617, and one posted after that raises it at
// once, as a probe does.
func TestAnySourceAllFinished(t *testing.T) {
	ctx := testCtx(t)
	comms := newFixture(t, 3).initAll(ctx)
	op, err := comms[0].StartRecv(runtime.AnySource, 2)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	for _, c := range comms[1:] {
		go func() { done <- c.Finish() }()
	}
	if _, err := comms[0].FinishRecv(ctx, op); codes.Of(err) != codes.Finished || !strings.Contains(err.Error(), "every other rank has finished") {
		t.Fatalf("any-source receive as the others finish = %v, want H1617", err)
	}
	if _, _, err := comms[0].RecvFrom(ctx, runtime.AnySource, runtime.AnyTag); codes.Of(err) != codes.Finished {
		t.Fatalf("any-source receive after the others finished = %v, want H1617", err)
	}
	if _, err := comms[0].Probe(ctx, runtime.AnySource, runtime.AnyTag); codes.Of(err) != codes.Finished {
		t.Fatalf("any-source probe after the others finished = %v, want H1617", err)
	}
	if err := comms[0].Finish(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestCollectiveAfterLoss: under LossReturn a collective on a
// communicator with a lost member raises H1611 on every live member, also
// on those whose schedule waits for a live rank (which left the call when
// it met the loss), for every kind of collective; Agree still works and
// Shrink gives a communicator whose collectives complete.
func TestCollectiveAfterLoss(t *testing.T) {
	ctx := testCtx(t)
	live := lossReturnJob(t, ctx, 5)
	calls := map[string]func(c *runtime.Comm) error{
		"barrier":   func(c *runtime.Comm) error { return c.Barrier(ctx) },
		"allgather": func(c *runtime.Comm) error { _, err := c.Allgather(ctx, []byte{byte(c.Rank())}); return err },
		"allreduce": func(c *runtime.Comm) error {
			_, err := c.Allreduce(ctx, runtime.Int64, runtime.Sum, make([]byte, 8))
			return err
		},
		"bcast": func(c *runtime.Comm) error { _, err := c.Bcast(ctx, 1, []byte("x")); return err },
	}
	for _, name := range []string{"allgather", "barrier", "allreduce", "bcast"} {
		errs := each(live, calls[name])
		for r, err := range errs {
			if codes.Of(err) != codes.PeerLost {
				t.Errorf("%s: rank %d: %v, want H1611", name, r, err)
			}
		}
	}
	errs := each(live, func(c *runtime.Comm) error {
		nc, err := c.Shrink(ctx)
		if err != nil {
			return err
		}
		return nc.Barrier(ctx)
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: shrink then barrier: %v", r, err)
		}
	}
}
