package runtime_test

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"sperli/codes"
)

// TestCancelledRecvWithdraws: a Recv whose ctx ends withdraws its posted
// receive, so the next message goes to the next receive instead of being
// swallowed (it was, and Exit later failed with H1617). FinishRecv keeps
// its operation open instead (TestBothWaits finishes one again).
func TestCancelledRecvWithdraws(t *testing.T) {
	ctx := testCtx(t)
	comms := newFixture(t, 2).initAll(ctx)
	a, b := comms[0], comms[1]

	gone, cancel := context.WithCancel(ctx)
	cancel()
	for i := 0; i < 2; i++ {
		if _, err := b.Recv(gone, 0, 5); !errors.Is(err, context.Canceled) {
			t.Fatalf("Recv with a cancelled ctx = %v, want context.Canceled", err)
		}
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
	if err := a.Finish(); err != nil {
		t.Fatalf("Finish(rank 0) = %v", err)
	}
	if err := b.Finish(); err != nil {
		t.Fatalf("Finish(rank 1) = %v (a withdrawn receive must not stay open)", err)
	}
}

// reasonPayload lays out a reason (protocol.md §3.2): code u16, cause u8,
// rank i32, message.
func reasonPayload(code uint16, cause byte, rank int32, msg string) []byte {
	b := []byte{byte(code >> 8), byte(code), cause}
	b = binary.BigEndian.AppendUint32(b, uint32(rank))
	return append(b, msg...)
}

// TestRelayedAbortNamesItsOrigin: an abort passed on by rank 1 on behalf
// of rank 2 ends rank 0 with "job ended by rank 2", not by the relay.
func TestRelayedAbortNamesItsOrigin(t *testing.T) {
	ctx := testCtx(t)
	comms := newFixture(t, 3).initAll(ctx)
	newHostile(t, comms[1]).write(0, rawFrame{Type: tAbort, Payload: reasonPayload(1612, 3, 2, "aborted")})
	_, err := comms[0].Recv(ctx, 2, 1)
	wantCode(t, "Recv after the relayed abort", err, codes.JobEnded)
	if want := "H1612: job ended by rank 2: it called abort"; err.Error() != want {
		t.Fatalf("error = %q, want %q", err, want)
	}
}

// TestAbortAboutNoRank: an abort whose rank is outside the job is a
// protocol violation (H1627) at the rank that reads it.
func TestAbortAboutNoRank(t *testing.T) {
	ctx := testCtx(t)
	comms := newFixture(t, 3).initAll(ctx)
	newHostile(t, comms[1]).write(0, rawFrame{Type: tAbort, Payload: reasonPayload(1612, 3, 9, "aborted")})
	_, err := comms[0].Recv(ctx, 2, 1)
	wantCode(t, "Recv after an abort about rank 9", err, codes.ProtocolViolation)
	if !strings.Contains(err.Error(), "rank 1") {
		t.Fatalf("error %q does not name rank 1, the liar", err)
	}
}
