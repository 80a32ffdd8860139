package runtime

import (
	"reflect"
	"testing"
	"time"
)

// TestDetector runs the failure detector on a clock of its own: beats every
// interval, a peer lost only once silent past the limit, never a quiet
// (finished) peer, nothing declared once the job has ended.
func TestDetector(t *testing.T) {
	t0 := time.Unix(5000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	const every, silence = 200 * time.Millisecond, time.Second
	d := newDetector(t0)
	if got := d.wait(every, silence); got != 100*time.Millisecond {
		t.Fatalf("wait(200 ms, 1 s) = %v, want a tenth of the limit", got)
	}
	if got := d.wait(every, 5*time.Second); got != every {
		t.Fatalf("wait(200 ms, 5 s) = %v, want the beat interval", got)
	}
	steps := []struct {
		now    int // ms
		peers  []peerSeen
		detect bool
		beat   bool
		lost   []int
	}{
		{100, []peerSeen{{rank: 1, lastHeard: at(0)}}, true, false, nil},
		{200, []peerSeen{{rank: 1, lastHeard: at(0)}}, true, true, nil},
		{300, []peerSeen{{rank: 1, lastHeard: at(0)}}, true, false, nil},
		{1000, []peerSeen{{rank: 1, lastHeard: at(0)}}, true, true, nil}, // exactly the limit: not yet
		{1001, []peerSeen{{rank: 1, lastHeard: at(0)}, {rank: 2, lastHeard: at(900)}}, true, false, []int{1}},
		{3000, []peerSeen{{rank: 1, lastHeard: at(2500)}, {rank: 2, lastHeard: at(0), quiet: true}}, true, true, nil},
		{9000, []peerSeen{{rank: 1, lastHeard: at(0)}}, false, true, nil},
	}
	for _, s := range steps {
		beat, lost := d.step(at(s.now), every, silence, s.peers, s.detect)
		var ranks []int
		for _, l := range lost {
			ranks = append(ranks, l.rank)
		}
		if beat != s.beat || !reflect.DeepEqual(ranks, s.lost) {
			t.Errorf("step(+%d ms) = beat %v, lost %v; want beat %v, lost %v", s.now, beat, ranks, s.beat, s.lost)
		}
	}
	_, lost := newDetector(t0).step(at(1500), every, silence, []peerSeen{{rank: 3, lastHeard: at(0)}}, true)
	if len(lost) != 1 || lost[0].why != "no frame for 1500 ms" {
		t.Errorf("lost = %+v, want rank 3, %q", lost, "no frame for 1500 ms")
	}
}
