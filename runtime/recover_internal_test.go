package runtime

import (
	"testing"
	"time"
)

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

// TestStillSilent: a peer the detector found silent is declared lost only
// if it is silent still at the monitor's second look: one heard from
// meanwhile (its reader ran once the monitor let it) is not.
func TestStillSilent(t *testing.T) {
	now := time.Unix(1000, 0)
	l := &links{now: func() time.Time { return now }}
	l.shared.Now = l.now
	heard, silent := newPeer(l, 1), newPeer(l, 2)
	heard.SetLastHeard(now.Add(-time.Second).UnixNano())
	silent.SetLastHeard(now.Add(-6 * time.Second).UnixNano())
	l.pmap.Store(&map[int]*peer{1: heard, 2: silent})
	lost := []lostPeer{{1, "no frame for 5500 ms"}, {2, "no frame for 5500 ms"}, {3, "no frame for 5500 ms"}}
	got := l.stillSilent(lost, 5*time.Second)
	if len(got) != 2 || got[0].rank != 2 || got[1].rank != 3 {
		t.Errorf("stillSilent = %v, want slots 2 (silent still) and 3 (no link left)", got)
	}
	if l.stillSilent(nil, 5*time.Second) != nil {
		t.Error("stillSilent(nil) is not nil")
	}
}
