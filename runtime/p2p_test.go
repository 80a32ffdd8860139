package runtime_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"sperli/codes"
	"sperli/runtime"
	"sperli/wire"
)

// TestOrderPerSourceAndTag: messages of one (source, tag) arrive in the
// order sent; a message of another tag waits for its own recv.
func TestOrderPerSourceAndTag(t *testing.T) {
	ctx := testCtx(t)
	comms := newFixture(t, 2).initAll(ctx)
	const n = 500
	errs := each(comms, func(c *runtime.Comm) error {
		if c.Rank() == 0 {
			for i := 0; i < n; i++ {
				for _, tag := range []int{7, 9} {
					if err := c.Send(ctx, 1, tag, binary.LittleEndian.AppendUint32(nil, uint32(i))); err != nil {
						return err
					}
				}
			}
			return c.Finish()
		}
		// All of tag 9 first, then all of tag 7: each in order.
		for _, tag := range []int{9, 7} {
			for i := 0; i < n; i++ {
				got, err := c.Recv(ctx, 0, tag)
				if err != nil {
					return err
				}
				if v := binary.LittleEndian.Uint32(got); v != uint32(i) {
					return fmt.Errorf("recv(0, %d) #%d = %d, want %d", tag, i, v, i)
				}
			}
		}
		return c.Finish()
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// TestOpenOperations: start/finish in posting order, finishing twice is
// H1617, ending with an open operation is an error naming it.
func TestOpenOperations(t *testing.T) {
	ctx := testCtx(t)
	comms := newFixture(t, 2).initAll(ctx)
	a, b := comms[0], comms[1]
	r1, err := b.StartRecv(0, 3)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := b.StartRecv(0, 3)
	if err != nil {
		t.Fatal(err)
	}
	s1, err := a.StartSend(1, 3, []byte("first"))
	if err != nil {
		t.Fatal(err)
	}
	s2, err := a.StartSend(1, 3, []byte("second"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*runtime.SendOp{s1, s2} {
		if err := a.FinishSend(ctx, s); err != nil {
			t.Fatalf("FinishSend = %v", err)
		}
	}
	// Finished in the other order: matching follows posting order.
	got2, err := b.FinishRecv(ctx, r2)
	if err != nil || string(got2) != "second" {
		t.Fatalf("FinishRecv(second posted) = %q, %v; want second", got2, err)
	}
	got1, err := b.FinishRecv(ctx, r1)
	if err != nil || string(got1) != "first" {
		t.Fatalf("FinishRecv(first posted) = %q, %v; want first", got1, err)
	}
	_, err = b.FinishRecv(ctx, r1)
	wantCode(t, "FinishRecv twice", err, codes.Finished)
	wantCode(t, "FinishSend twice", a.FinishSend(ctx, s1), codes.Finished)

	if _, err := b.StartRecv(0, 4); err != nil {
		t.Fatal(err)
	}
	errs := each(comms, func(c *runtime.Comm) error { return c.Finish() })
	if errs[0] != nil {
		t.Errorf("Finish(rank 0) = %v", errs[0])
	}
	wantCode(t, "Finish with an open receive", errs[1], codes.Finished)
	if !bytes.Contains([]byte(errs[1].Error()), []byte("recv from rank 0 tag 4")) {
		t.Errorf("Finish error %q does not name the open receive", errs[1])
	}
}

// TestRanges: rank, tag and size out of range are H1616; calls after
// finish are H1617.
func TestRanges(t *testing.T) {
	ctx := testCtx(t)
	comms := newFixture(t, 2).initAll(ctx)
	c := comms[0]
	cases := []struct {
		name string
		err  error
	}{
		{"send to rank -1", c.Send(ctx, -1, 0, nil)},
		{"send to rank 2 of 2", c.Send(ctx, 2, 0, nil)},
		{"send with tag -1", c.Send(ctx, 1, -1, nil)},
		{"send with tag 2^31", c.Send(ctx, 1, wire.MaxTag+1, nil)},
		{"send of 16 MiB + 1", c.Send(ctx, 1, 0, make([]byte, wire.MaxPayload+1))},
		{"set_silence(99)", c.SetSilence(99)},
	}
	_, err := c.Recv(ctx, 5, 0)
	cases = append(cases, struct {
		name string
		err  error
	}{"recv from rank 5", err})
	for _, tc := range cases {
		wantCode(t, tc.name, tc.err, codes.OutOfRange)
	}
	errs := each(comms, func(c *runtime.Comm) error { return c.Finish() })
	for r, err := range errs {
		if err != nil {
			t.Fatalf("Finish(rank %d) = %v", r, err)
		}
	}
	wantCode(t, "send after finish", c.Send(ctx, 1, 0, nil), codes.Finished)
	_, err = c.Recv(ctx, 1, 0)
	wantCode(t, "recv after finish", err, codes.Finished)
	wantCode(t, "barrier after finish", c.Barrier(ctx), codes.Finished)
	wantCode(t, "finish after finish", c.Finish(), codes.Finished)
}

// TestLargeAndSelf: a message of exactly 16 MiB crosses intact; a rank can
// send to itself.
func TestLargeAndSelf(t *testing.T) {
	ctx := testCtx(t)
	comms := newFixture(t, 2).initAll(ctx)
	big := make([]byte, wire.MaxPayload)
	for i := range big {
		big[i] = byte(i * 7)
	}
	want := append([]byte{}, big...)
	if err := comms[0].Send(ctx, 1, 1, big); err != nil {
		t.Fatal(err)
	}
	got, err := comms[1].Recv(ctx, 0, 1)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Recv(16 MiB) = %d bytes, %v; want the 16 MiB sent", len(got), err)
	}
	if err := comms[1].Send(ctx, 1, 2, []byte("me")); err != nil {
		t.Fatal(err)
	}
	got, err = comms[1].Recv(ctx, 1, 2)
	if err != nil || string(got) != "me" {
		t.Fatalf("self Recv = %q, %v", got, err)
	}
}

// TestBackPressure: a sender that sends far more than the receiver's
// window before any recv is held back by credits, while heartbeats keep
// flowing (no false loss with a short silence limit); everything arrives
// once the receiver drains.
func TestBackPressure(t *testing.T) {
	ctx := testCtx(t)
	f := newFixture(t, 2)
	f.spec.SilenceMS = 1000
	comms := f.initAll(ctx)
	const msg = 4 << 20
	const count = 3 * runtime.Window / msg // three windows' worth
	sent := make(chan int, count)
	go func() {
		defer close(sent)
		for i := 0; i < count; i++ {
			b := make([]byte, msg)
			b[0] = byte(i)
			if err := comms[0].Send(ctx, 1, 1, b); err != nil {
				t.Errorf("Send #%d = %v", i, err)
				return
			}
			sent <- i
		}
	}()
	// The sender stops within about one window.
	held := 0
	deadline := time.After(5 * time.Second)
wait:
	for {
		select {
		case _, ok := <-sent:
			if !ok {
				break wait
			}
			held++
		case <-deadline:
			break wait
		}
	}
	if held >= count {
		t.Fatalf("sender sent all %d messages (%d MiB) with no recv; want it held back near the %d MiB window", count, count*4, runtime.Window>>20)
	}
	// The silence limit has passed several times: nobody was declared lost.
	if err := comms[1].Heartbeat(); err != nil {
		t.Fatalf("receiver after waiting: %v", err)
	}
	for i := 0; i < count; i++ {
		got, err := comms[1].Recv(ctx, 0, 1)
		if err != nil {
			t.Fatalf("Recv #%d = %v", i, err)
		}
		if len(got) != msg || got[0] != byte(i) {
			t.Fatalf("Recv #%d: %d bytes starting %d, want %d bytes starting %d", i, len(got), got[0], msg, byte(i))
		}
	}
	for range sent {
	}
}

// TestConcurrentCalls: point-to-point calls from many goroutines at once.
func TestConcurrentCalls(t *testing.T) {
	ctx := testCtx(t)
	comms := newFixture(t, 2).initAll(ctx)
	const goroutines, each_ = 8, 50
	done := make(chan error, 2*goroutines)
	for g := 0; g < goroutines; g++ {
		go func(g int) {
			for i := 0; i < each_; i++ {
				if err := comms[0].Send(ctx, 1, g, []byte{byte(i)}); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}(g)
		go func(g int) {
			for i := 0; i < each_; i++ {
				got, err := comms[1].Recv(ctx, 0, g)
				if err != nil {
					done <- err
					return
				}
				if got[0] != byte(i) {
					done <- fmt.Errorf("tag %d message %d = %d", g, i, got[0])
					return
				}
			}
			done <- nil
		}(g)
	}
	for i := 0; i < 2*goroutines; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestContextCancelsWait: a recv nobody answers ends with ctx, and the
// operation stays usable.
func TestContextCancelsWait(t *testing.T) {
	ctx := testCtx(t)
	comms := newFixture(t, 2).initAll(ctx)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	op, err := comms[1].StartRecv(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := comms[1].FinishRecv(short, op); err != context.DeadlineExceeded {
		t.Fatalf("FinishRecv(short ctx) = %v, want deadline exceeded", err)
	}
	if err := comms[0].Send(ctx, 1, 1, []byte("late")); err != nil {
		t.Fatal(err)
	}
	got, err := comms[1].FinishRecv(ctx, op)
	if err != nil || string(got) != "late" {
		t.Fatalf("FinishRecv again = %q, %v; want late", got, err)
	}
}

// TestReleaseReuse: messages received into buffers released before hold
// exactly their own bytes, whatever sizes come and go.
func TestReleaseReuse(t *testing.T) {
	ctx := testCtx(t)
	comms := newFixture(t, 2).initAll(ctx)
	sizes := []int{5000, 9000, 4096, 8192, 6000, 1 << 20, 700 << 10, 1<<20 - 1, 4097, 100}
	pattern := func(i, n int) []byte {
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(i*31 + j%251)
		}
		return b
	}
	errs := each(comms, func(c *runtime.Comm) error {
		for round := 0; round < 3; round++ {
			for i, n := range sizes {
				if c.Rank() == 0 {
					if err := c.Send(ctx, 1, 1, pattern(round+i, n)); err != nil {
						return err
					}
					continue
				}
				got, err := c.Recv(ctx, 0, 1)
				if err != nil {
					return err
				}
				if !bytes.Equal(got, pattern(round+i, n)) {
					return fmt.Errorf("round %d message %d (%d bytes) arrived as %d different bytes", round, i, n, len(got))
				}
				c.Release(got)
			}
		}
		return c.Finish()
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}
