package wire

import "testing"

// TestCollKindString: the names of the kinds are in messages, waiting
// reports and status records, and the numbers in call descriptors; neither
// changes.
func TestCollKindString(t *testing.T) {
	for _, tc := range []struct {
		k    CollKind
		want string
	}{
		{0, "collective(0)"},
		{1, "barrier"},
		{2, "bcast"},
		{3, "reduce"},
		{4, "allreduce"},
		{5, "gather"},
		{6, "scatter"},
		{7, "allgather"},
		{8, "alltoall"},
		{9, "reduce_scatter"},
		{10, "split"},
		{11, "agree"},
		{12, "collective(12)"},
		{63, "collective(63)"},
		{64, "checkpoint"},
		{65, "checkpoint (commit)"},
		{66, "resume"},
		{67, "resume (commit)"},
		{68, "resume (files)"},
		{69, "resume (restore)"},
		{70, "collective(70)"},
		{255, "collective(255)"},
	} {
		if got := tc.k.String(); got != tc.want {
			t.Errorf("CollKind(%d).String() = %q, want %q", uint8(tc.k), got, tc.want)
		}
	}
}
