package runtime

import (
	"slices"
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
	l.pmap.Store(l.pmap.Load().with(silent).with(heard))
	lost := []lostPeer{{1, "no frame for 5500 ms"}, {2, "no frame for 5500 ms"}, {3, "no frame for 5500 ms"}}
	got := l.stillSilent(lost, 5*time.Second)
	if len(got) != 2 || got[0].rank != 2 || got[1].rank != 3 {
		t.Errorf("stillSilent = %v, want slots 2 (silent still) and 3 (no link left)", got)
	}
	if l.stillSilent(nil, 5*time.Second) != nil {
		t.Error("stillSilent(nil) is not nil")
	}
}

// TestPeerSetWith: a link added to a set lands in slot order, and the set
// it was added to is left as it was (readers hold it without a lock).
func TestPeerSetWith(t *testing.T) {
	l := &links{now: time.Now}
	l.shared.Now = l.now
	var ps *peerSet
	var sets []*peerSet
	order := []int{7, 2, 9, 0, 5, 3}
	for _, s := range order {
		ps = ps.with(newPeer(l, s))
		sets = append(sets, ps)
	}
	for i, set := range sets {
		want := slices.Sorted(slices.Values(order[:i+1]))
		var got []int
		for _, p := range set.list {
			got = append(got, p.rank)
			if set.bySlot[p.rank] != p {
				t.Errorf("set %d: bySlot[%d] is not the listed link", i, p.rank)
			}
		}
		if !slices.Equal(got, want) || len(set.bySlot) != len(want) {
			t.Errorf("set %d: list %v (map of %d), want %v", i, got, len(set.bySlot), want)
		}
	}
	// The monitor lists the links at every step: no copy, no sort.
	l.pmap.Store(ps)
	l.silenceMS.Store(5000)
	if a := testing.AllocsPerRun(20, func() { _, _ = l.peerList(), l.heartbeatEvery() }); a != 0 {
		t.Errorf("listing the links allocated %.1f objects, want none", a)
	}
}
