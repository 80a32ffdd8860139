package runtime

import "testing"

// TestAloneLeft: a slot every other slot is lost to is one the job left
// (a zombie after SIGCONT), not a minority of a cut network.
func TestAloneLeft(t *testing.T) {
	for _, tc := range []struct {
		slots, self int
		failed      []int
		want        bool
	}{
		{3, 1, []int{0, 2}, true},
		{3, 1, []int{0}, false},
		{3, 0, []int{1, 2}, true},
		{5, 4, []int{0, 1, 2}, false},
		{1, 0, nil, false},
	} {
		r := &recovery{l: &links{slots: tc.slots, self: tc.self}, failed: map[int]string{}}
		for _, s := range tc.failed {
			r.failed[s] = "lost"
		}
		if got := r.aloneLeft(); got != tc.want {
			t.Errorf("slots %d, self %d, failed %v: aloneLeft = %v, want %v", tc.slots, tc.self, tc.failed, got, tc.want)
		}
	}
}
