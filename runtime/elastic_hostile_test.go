package runtime_test

import (
	"encoding/binary"
	"strings"
	"sync"
	"testing"

	"sperli/codes"
	"sperli/runtime"
)

// Frame types of docs/protocol.md §2.3 added for elastic recovery.
const (
	tAgree  = 11
	tRevoke = 12
)

// TestHostileAgreeFrames: agreement messages that an honest slot never
// sends — cut short, of an unknown kind, of an unknown purpose, naming a
// slot outside the job — end the job with H1627 naming the liar
// (protocol.md §12.4), in a job with spares and in one without.
func TestHostileAgreeFrames(t *testing.T) {
	msgOf := func(kind byte, gen byte, ballot uint64, failed ...uint16) []byte {
		b := []byte{kind, 0, 0, 0, 0, gen} // kind, flags, instance
		b = binary.BigEndian.AppendUint64(b, ballot)
		b = append(b, make([]byte, 8)...) // accepted ballot
		b = append(b, 0, byte(len(failed)))
		for _, s := range failed {
			b = append(b, byte(s>>8), byte(s))
		}
		return b
	}
	msg := func(kind byte, failed ...uint16) []byte { return msgOf(kind, 1, 0, failed...) }
	for _, tc := range []struct {
		name    string
		payload []byte
		who     string // named in the error; "slot 1" when ""
	}{
		{"cut short", []byte{0, 1, 0}, ""},
		{"unknown kind", append([]byte{0}, msg(9)...), ""},
		{"slot outside the job", append([]byte{0}, msg(1, 40)...), ""},
		{"unknown purpose", append([]byte{7}, msg(1)...), "rank 1"},
		{"agree of comm, cut short", []byte{1, 0, 0, 0, 0, 0}, "rank 1"},
		{"agree of comm, garbage", append([]byte{1, 0, 0, 0, 0, 0, 0, 0, 1}, 0xff, 0xff), "rank 1"},
		// With nothing lost, a prepare of a ballot no honest slot reaches
		// (it would stall every honest coordinator after it), and one
		// from a slot that names nobody below it lost.
		{"huge ballot", append([]byte{0}, msgOf(1, 1, 1<<62+1, 0)...), ""},
		{"prepare of a slot not the coordinator", append([]byte{0}, msgOf(1, 1, 2*2+1)...), ""},
		{"report naming nobody lost", append([]byte{0}, msgOf(6, 1, 0)...), ""},
		// Two generations ahead needs this slot's own promise.
		{"a generation far ahead", append([]byte{0}, msgOf(6, 3, 0)...), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			comms := newFixture(t, 2).initAll(ctx)
			newHostile(t, comms[1]).write(0, rawFrame{Type: tAgree, Payload: tc.payload})
			if tc.who == "" {
				tc.who = "slot 1"
			}
			wantViolationBy(t, ctx, comms[0], comms[1], tc.who)
		})
	}
}

// TestAgreeFlood: agreement messages for the generation after the next
// are kept for it, but no more than an honest slot sends: a flood of them
// ends the job with H1627 naming the sender instead of crowding out the
// events (a loss) that come after it.
func TestAgreeFlood(t *testing.T) {
	ctx := testCtx(t)
	comms := newFixture(t, 2).initAll(ctx)
	report := []byte{0, 6, 0, 0, 0, 0, 2} // purpose layout, a report for generation 2
	report = append(report, make([]byte, 18)...)
	flood := make([]rawFrame, 200)
	for i := range flood {
		flood[i] = rawFrame{Type: tAgree, Payload: report}
	}
	newHostile(t, comms[1]).write(0, flood...)
	wantViolationBy(t, ctx, comms[0], comms[1], "slot 1")
}

// TestClaimedLossOfALiveSlot: slot 1 tells slot 0 that slot 2 is lost (a
// report for generation 1) while slot 2 lives and heartbeats. Slot 0
// believes a loss only when it sees it itself: it neither abandons its
// generation nor evicts slot 2, and once slot 2 has stayed heard from past
// twice its silence limit, it names slot 1 (H1627).
func TestClaimedLossOfALiveSlot(t *testing.T) {
	ctx := testCtx(t)
	f := newFixture(t, 4)
	f.spec.Size, f.spec.Spares, f.spec.SilenceMS = 3, 1, 200
	comms := make([]*runtime.Comm, 4)
	var wg sync.WaitGroup
	for s := range comms {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			var err error
			if comms[s], err = runtime.Init(ctx, f.job(s)); err != nil {
				t.Errorf("Init(slot %d) = %v", s, err)
			}
		}(s)
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Cleanup(func() {
		for _, c := range comms {
			c.Close()
		}
	})
	report := []byte{0, 6, 0, 0, 0, 0, 1} // purpose layout, a report for generation 1
	report = append(report, make([]byte, 16)...)
	report = append(report, 0, 1, 0, 2) // failed: slot 2
	newHostile(t, comms[1]).write(0, rawFrame{Type: tAgree, Payload: report})
	_, err := comms[0].Recv(ctx, 1, 99)
	wantCode(t, "slot 0 after slot 1's claim", err, codes.ProtocolViolation)
	if !strings.Contains(err.Error(), "protocol violation by slot 1: it named slot 2 lost") {
		t.Fatalf("error %q does not name slot 1 for its claim about slot 2", err)
	}
	if comms[0].Recovering() {
		t.Fatal("slot 0 abandoned its generation for the claim")
	}
}
