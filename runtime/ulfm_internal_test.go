package runtime

import (
	"slices"
	"testing"

	"sperli/codes"
)

// An Agree's decided value carries slots as u32: past 65,535 they come
// back whole; a peer's value naming a slot outside the job, a count past
// its bytes or a wrong tail is H1627.
func TestAgreeValueSlots(t *testing.T) {
	const slots = 200000
	mis := &agreeMismatch{A: 70000, KindA: 0, B: 199999, KindB: 1}
	b := agreeValue(6, []int{3, 65536, 150000}, mis)
	flag, failed, got, err := parseAgreeValue(b, slots)
	if err != nil || flag != 6 || !slices.Equal(failed, []int{3, 65536, 150000}) || got == nil || *got != *mis {
		t.Fatalf("parse = %d %v %+v %v", flag, failed, got, err)
	}
	if _, failed, got, err := parseAgreeValue(agreeValue(1, nil, nil), slots); err != nil || failed != nil || got != nil {
		t.Fatalf("parse of a plain value = %v %+v %v", failed, got, err)
	}
	for name, v := range map[string][]byte{
		"a slot outside the job": agreeValue(1, []int{slots}, nil),
		"a mismatch outside":     agreeValue(1, nil, &agreeMismatch{A: 1, B: slots, KindB: 1}),
		"cut short":              b[:len(b)-1],
		"a count past the bytes": append(agreeValue(1, nil, nil)[:8], 0, 0, 1, 0, 0),
	} {
		if _, _, _, err := parseAgreeValue(v, slots); codes.Of(err) != codes.ProtocolViolation {
			t.Errorf("%s: %v, want H1627", name, err)
		}
	}
}
