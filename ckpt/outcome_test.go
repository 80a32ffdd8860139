package ckpt

import (
	"errors"
	"testing"

	"sperli/codes"
)

// TestRoundOutcomes: the code every rank derives from a begin or restore
// verdict, including the state over MaxState (H1616), which no test can
// make for real (a 1 TiB state).
func TestRoundOutcomes(t *testing.T) {
	own := errors.New("own")
	for _, tc := range []struct {
		name  string
		err   error
		want  codes.Code
		text  string
		isOwn bool
	}{
		{"begin ready", BeginOutcome([]byte{0, 0, 0}, 1, 1, nil), 0, "", false},
		{"begin open", BeginOutcome([]byte{0, 1, 0}, 1, 0, nil), codes.CheckpointOpen, "H1624: checkpoint of epoch 1: rank 1 still has an open send or receive", false},
		{"begin too big", BeginOutcome([]byte{0, 1, 3}, 4, 0, nil), codes.OutOfRange, "H1616: checkpoint of epoch 4: the state of rank 2 is over the limit of 1099511627776 bytes", false},
		{"begin storage, another rank", BeginOutcome([]byte{2, 3, 2}, 2, 1, nil), codes.CheckpointStorage, "H1625: checkpoint of epoch 2: rank 0, 2 cannot use its checkpoint directory", false},
		{"begin storage, this rank", BeginOutcome([]byte{2, 3, 2}, 2, 2, own), 0, "", true},
		{"restore ok", RestoreOutcome([]byte{0, 0}, 3, 0, nil), 0, "", false},
		{"restore damaged first", RestoreOutcome([]byte{0, 1, 3}, 3, 2, own), codes.CheckpointDamaged, "H1621: resume: epoch 3: rank 1's copy from its buddy is damaged", false},
		{"restore storage, another rank", RestoreOutcome([]byte{3, 0}, 3, 1, nil), codes.CheckpointStorage, "H1625: resume: epoch 3: rank 0 could not write back its file", false},
		{"restore storage, this rank", RestoreOutcome([]byte{3, 3}, 3, 1, own), 0, "", true},
	} {
		switch {
		case tc.isOwn:
			if tc.err != own {
				t.Errorf("%s: %v, want this rank's own error", tc.name, tc.err)
			}
		case tc.want == 0:
			if tc.err != nil {
				t.Errorf("%s: %v, want none", tc.name, tc.err)
			}
		case codes.Of(tc.err) != tc.want || tc.err.Error() != tc.text:
			t.Errorf("%s: %v, want %q", tc.name, tc.err, tc.text)
		}
	}
}
