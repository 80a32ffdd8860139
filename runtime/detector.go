package runtime

import (
	"fmt"
	"time"
)

// detector is the failure detector's decision (SPEC §7) as a pure state
// machine: no clock, no goroutine, no I/O. The monitor goroutine feeds it
// the time and what it knows of each peer, and does what it says. Its
// tests run on a clock of their own.
type detector struct {
	lastBeat time.Time
	lastLook time.Time     // the real time of the last look, to tell this process's own stall
	resumed  time.Time     // the end of the last stall (the job's clock): no silence before it counts
	stalled  time.Duration // how long the last stall lasted (real time), 0 if none yet
}

// peerSeen is what the detector needs to know of one peer.
type peerSeen struct {
	rank      int
	lastHeard time.Time
	quiet     bool // finished or gone: silence is no loss
}

// lostPeer is a peer the detector declares lost, and why.
type lostPeer struct {
	rank int
	why  string
}

// newDetector starts the heartbeat clock at now.
func newDetector(now, real time.Time) *detector {
	return &detector{lastBeat: now, lastLook: real}
}

// A look that comes more than half the silence limit after the last one
// in real time (the monitor looks every tenth of it) means this process
// did not run in between: stopped (SIGSTOP), frozen or starved. Its
// peers' frames may be waiting unread, so their silence across that gap
// says nothing of them: silence is counted again from the end of the
// stall. A peer that is really gone is declared lost one silence limit
// after it instead of at once; a continued process does not declare every
// live peer lost.

// wait is how long the monitor sleeps between steps: a heartbeat interval,
// or a tenth of the silence limit when that is shorter, so that a loss is
// seen within a tenth of the limit after it.
func (d *detector) wait(every, silence time.Duration) time.Duration {
	if t := silence / 10; t < every {
		return t
	}
	return every
}

// until is how long from real the monitor sleeps before its next step:
// a wait after the last look. It is counted from the last look, not from
// the call, so that waking the monitor early (a limit changed) never puts
// the step off: a slot that makes a link every few milliseconds, or a
// peer that announces its silence limit again and again, would otherwise
// keep this slot from heartbeating and from looking at all.
func (d *detector) until(real time.Time, every, silence time.Duration) time.Duration {
	return d.lastLook.Add(d.wait(every, silence)).Sub(real)
}

// step is one look at now (the job's clock; real is the real time, which
// tells a stall of this process from a clock the job moved on): beat says
// to heartbeat every peer (every has passed since the last beat); lost are
// the peers silent past silence. With detect false (the job has ended) it
// only keeps the beat.
func (d *detector) step(now, real time.Time, every, silence time.Duration, peers []peerSeen, detect bool) (beat bool, lost []lostPeer) {
	if gap := real.Sub(d.lastLook); gap > silence/2 {
		d.resumed, d.stalled = now, gap
	}
	d.lastLook = real
	if now.Sub(d.lastBeat) >= every {
		beat = true
		d.lastBeat = now
	}
	if !detect {
		return beat, nil
	}
	for _, p := range peers {
		if p.quiet {
			continue
		}
		if q := now.Sub(p.lastHeard); q > silence && now.Sub(d.resumed) > silence {
			lost = append(lost, lostPeer{p.rank, fmt.Sprintf("no frame for %d ms", q.Milliseconds())})
		}
	}
	return beat, lost
}
