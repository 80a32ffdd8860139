package runtime_test

import (
	"strings"
	"testing"

	"sperli/codes"
	"sperli/runtime"
)

// TestSelfRecvNeverMatches: a receive from this rank itself with no send
// to itself pending is H1617 at once, naming it; the receive stays posted,
// so a send to itself afterwards lets it finish; with the send first it
// matches as before.
func TestSelfRecvNeverMatches(t *testing.T) {
	ctx := testCtx(t)
	comms := newFixture(t, 2).initAll(ctx)
	_, err := comms[0].Recv(ctx, 0, 5)
	wantCode(t, "Recv from itself with nothing sent", err, codes.Finished)
	if err != nil && !strings.Contains(err.Error(), "recv(source 0, tag 5) can never match") {
		t.Errorf("error %q does not name the receive", err)
	}
	op, err := comms[1].StartRecv(1, 6)
	if err != nil {
		t.Fatal(err)
	}
	_, err = comms[1].FinishRecv(ctx, op)
	wantCode(t, "FinishRecv from itself with nothing sent", err, codes.Finished)
	if err := comms[1].Send(ctx, 1, 6, []byte("late")); err != nil {
		t.Fatal(err)
	}
	if got, err := comms[1].FinishRecv(ctx, op); err != nil || string(got) != "late" {
		t.Errorf("FinishRecv after the send = %q, %v; want \"late\"", got, err)
	}
	if err := comms[0].Send(ctx, 0, 7, []byte("first")); err != nil {
		t.Fatal(err)
	}
	if got, err := comms[0].Recv(ctx, 0, 7); err != nil || string(got) != "first" {
		t.Errorf("Recv after a send to itself = %q, %v", got, err)
	}
	// The Recv refused at first is not left posted: nobody can finish it,
	// so the next message of its tag is the next Recv's, and Finish finds
	// no open operation.
	if err := comms[0].Send(ctx, 0, 5, []byte("next")); err != nil {
		t.Fatal(err)
	}
	if got, env, err := comms[0].RecvFrom(ctx, 0, runtime.AnyTag); err != nil || string(got) != "next" || env.Tag != 5 {
		t.Errorf("RecvFrom(0, AnyTag) after the refused Recv = %q, %+v, %v; want next on tag 5", got, env, err)
	}
	_, _, err = comms[0].RecvFrom(ctx, 0, runtime.AnyTag)
	wantCode(t, "RecvFrom(0, AnyTag) from itself with nothing sent", err, codes.Finished)
	// A probe from itself with nothing sent waits for nothing either, and
	// one with a message sent finds it.
	_, err = comms[0].Probe(ctx, 0, 8)
	wantCode(t, "Probe(0, 8) from itself with nothing sent", err, codes.Finished)
	if err := comms[0].Send(ctx, 0, 8, []byte("probed")); err != nil {
		t.Fatal(err)
	}
	if env, err := comms[0].Probe(ctx, 0, runtime.AnyTag); err != nil || env != (runtime.Envelope{Source: 0, Tag: 8, Length: 6}) {
		t.Errorf("Probe(0, AnyTag) after a send to itself = %+v, %v", env, err)
	}
	if got, err := comms[0].Recv(ctx, 0, 8); err != nil || string(got) != "probed" {
		t.Errorf("Recv after the probe = %q, %v", got, err)
	}
	errs := each(comms, func(c *runtime.Comm) error { return c.Finish() })
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: Finish = %v, want no open operation", r, err)
		}
	}
}
