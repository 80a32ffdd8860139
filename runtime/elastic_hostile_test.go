package runtime_test

import (
	"testing"
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
	msg := func(kind byte, failed ...uint16) []byte {
		b := []byte{kind, 0, 0, 0, 0, 1}   // kind, flags, instance 1
		b = append(b, make([]byte, 16)...) // ballot, accepted ballot
		b = append(b, 0, byte(len(failed)))
		for _, s := range failed {
			b = append(b, byte(s>>8), byte(s))
		}
		return b
	}
	for _, tc := range []struct {
		name    string
		payload []byte
	}{
		{"cut short", []byte{0, 1, 0}},
		{"unknown kind", append([]byte{0}, msg(9)...)},
		{"slot outside the job", append([]byte{0}, msg(1, 40)...)},
		{"unknown purpose", append([]byte{7}, msg(1)...)},
		{"agree of comm, cut short", []byte{1, 0, 0, 0, 0, 0}},
		{"agree of comm, garbage", append([]byte{1, 0, 0, 0, 0, 0, 0, 0, 1}, 0xff, 0xff)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			comms := newFixture(t, 2).initAll(ctx)
			newHostile(t, comms[1]).write(0, rawFrame{Type: tAgree, Payload: tc.payload})
			wantViolation(t, ctx, comms[0], comms[1])
		})
	}
}
