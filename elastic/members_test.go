package elastic

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// The runs answer as the list of slots they stand for: length, position,
// membership and order, for random sets.
func TestMembersAsTheList(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 21))
	for trial := range 200 {
		var xs []int
		for range rng.IntN(60) {
			xs = append(xs, rng.IntN(80))
		}
		m, want := membersOf(xs), sortedSet(xs)
		if m.len() != len(want) {
			t.Fatalf("trial %d: %v has %d members, want %d", trial, xs, m.len(), len(want))
		}
		if got := slices.Collect(m.all()); !slices.Equal(got, want) {
			t.Fatalf("trial %d: all() = %v, want %v", trial, got, want)
		}
		for i, s := range want {
			if m.at(i) != s {
				t.Fatalf("trial %d: at(%d) = %d, want %d", trial, i, m.at(i), s)
			}
		}
		for s := -1; s <= 81; s++ {
			i, ok := m.index(s)
			wi, wok := slices.BinarySearch(want, s)
			if ok != wok || ok && i != wi {
				t.Fatalf("trial %d: index(%d) = %d, %v, want %d, %v", trial, s, i, ok, wi, wok)
			}
		}
	}
}

// A layout's live slots are a few runs however many slots it has, and
// they are the ranks' slots and the spares.
func TestLiveMembersAreRuns(t *testing.T) {
	cur := Initial(100000, 4)
	next, err := cur.Next([]int{3, 50000})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []Layout{cur, next} {
		m := l.liveMembers()
		want := slices.Clone(l.Spares)
		for r := range l.Size() {
			want = append(want, l.Slot(r))
		}
		slices.Sort(want)
		if got := slices.Collect(m.all()); !slices.Equal(got, want) {
			t.Fatalf("generation %d: the runs hold %d slots, Live %d", l.Gen, len(got), len(want))
		}
		if len(m.first) > 8 {
			t.Errorf("generation %d: %d runs for %d live slots, want a few", l.Gen, len(m.first), m.len())
		}
	}
}
