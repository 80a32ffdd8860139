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
	d := newDetector(t0, t0)
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
		{700, []peerSeen{{rank: 1, lastHeard: at(0)}}, true, true, nil},
		{1000, []peerSeen{{rank: 1, lastHeard: at(0)}}, true, true, nil}, // exactly the limit: not yet
		{1001, []peerSeen{{rank: 1, lastHeard: at(0)}, {rank: 2, lastHeard: at(900)}}, true, false, []int{1}},
		{1400, []peerSeen{{rank: 1, lastHeard: at(1300)}, {rank: 2, lastHeard: at(0), quiet: true}}, true, true, nil},
		{9000, []peerSeen{{rank: 1, lastHeard: at(0)}}, false, true, nil},
	}
	for _, s := range steps {
		beat, lost := d.step(at(s.now), at(s.now), every, silence, s.peers, s.detect)
		var ranks []int
		for _, l := range lost {
			ranks = append(ranks, l.rank)
		}
		if beat != s.beat || !reflect.DeepEqual(ranks, s.lost) {
			t.Errorf("step(+%d ms) = beat %v, lost %v; want beat %v, lost %v", s.now, beat, ranks, s.beat, s.lost)
		}
	}
	d = newDetector(t0, t0)
	var lost []lostPeer
	for _, ms := range []int{400, 800, 1200, 1500} {
		_, lost = d.step(at(ms), at(ms), every, silence, []peerSeen{{rank: 3, lastHeard: at(0)}}, true)
	}
	if len(lost) != 1 || lost[0].why != "no frame for 1500 ms" {
		t.Errorf("lost = %+v, want rank 3, %q", lost, "no frame for 1500 ms")
	}
}

// TestDetectorOwnStall: a process that did not run for longer than half
// its silence limit in real time (stopped, then continued) declares no
// peer lost for the silence it could not see; a peer that stays silent
// after it is declared lost one silence limit after the stall. A job's
// clock that moves on is no stall.
func TestDetectorOwnStall(t *testing.T) {
	t0 := time.Unix(5000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	const every, silence = 200 * time.Millisecond, time.Second
	d := newDetector(t0, t0)
	for ms := 100; ms <= 900; ms += 100 {
		if _, lost := d.step(at(ms), at(ms), every, silence, []peerSeen{{rank: 1, lastHeard: at(0)}, {rank: 2, lastHeard: at(0)}}, true); lost != nil {
			t.Fatalf("at +%d ms: lost %+v before the limit", ms, lost)
		}
	}
	// Stopped from +900 ms to +3500 ms: rank 1 speaks again once this
	// process reads, rank 2 never does.
	for ms := 3500; ms <= 4500; ms += 100 {
		_, lost := d.step(at(ms), at(ms), every, silence, []peerSeen{{rank: 1, lastHeard: at(ms)}, {rank: 2, lastHeard: at(0)}}, true)
		if lost != nil {
			t.Fatalf("at +%d ms, %d ms after the stall: lost %+v", ms, ms-3500, lost)
		}
	}
	if d.stalled != 2600*time.Millisecond {
		t.Fatalf("stall of %v recorded, want the 2.6 s this process did not run", d.stalled)
	}
	_, lost := d.step(at(4501), at(4501), every, silence, []peerSeen{{rank: 1, lastHeard: at(4500)}, {rank: 2, lastHeard: at(0)}}, true)
	if len(lost) != 1 || lost[0].rank != 2 || lost[0].why != "no frame for 4501 ms" {
		t.Fatalf("a silence limit after the stall: lost %+v, want rank 2, \"no frame for 4501 ms\"", lost)
	}
	// The job's clock moved on two minutes while this process ran (real
	// time went 100 ms): no stall, the silent peer is lost at once.
	d = newDetector(t0, t0)
	d.step(at(100), at(100), every, silence, []peerSeen{{rank: 1, lastHeard: at(0)}}, true)
	if _, lost := d.step(at(120000), at(200), every, silence, []peerSeen{{rank: 1, lastHeard: at(0)}}, true); len(lost) != 1 || d.stalled != 0 {
		t.Fatalf("the job's clock two minutes on: lost %+v, stall %v; want rank 1 at once, no stall", lost, d.stalled)
	}
}

// TestDetectorUntil: the monitor's next look is a wait after its last
// look, however often it is woken in between (a limit changed: a link
// attached, a peer announced its silence limit). Waking it every few
// milliseconds used to start the wait anew each time, and a slot that
// made links one after another neither heartbeat nor looked until it
// stopped; its peers took it for lost.
func TestDetectorUntil(t *testing.T) {
	t0 := time.Unix(5000, 0)
	const every, silence = time.Second, 5 * time.Second
	d := newDetector(t0, t0)
	want := d.wait(every, silence)
	for ms := 0; ms < 3000; ms += 7 { // woken every 7 ms, far past the wait
		now := t0.Add(time.Duration(ms) * time.Millisecond)
		got := d.until(now, every, silence)
		if due := now.Add(got); !due.Equal(t0.Add(want)) {
			t.Fatalf("woken at +%d ms: next look at +%v, want +%v (a wait after the last look)", ms, due.Sub(t0), want)
		}
	}
	// A shorter limit learnt after the last look brings the look forward,
	// to now if its wait has passed already.
	if got := d.until(t0.Add(300*time.Millisecond), every, time.Second); got != -200*time.Millisecond {
		t.Errorf("until with a 1 s limit at +300 ms = %v, want -200ms (at once)", got)
	}
	d.step(t0.Add(2*time.Second), t0.Add(2*time.Second), every, silence, nil, true)
	if got := d.until(t0.Add(2*time.Second), every, silence); got != want {
		t.Errorf("until right after a look = %v, want %v", got, want)
	}
}
