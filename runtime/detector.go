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
	lastStep time.Time // the last look, to tell this process's own stall
	resumed  time.Time // the end of the last stall: no silence before it counts
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
func newDetector(now time.Time) *detector { return &detector{lastBeat: now, lastStep: now} }

// A look that comes more than half the silence limit after the last one
// (the monitor looks every tenth of it) means this process did not run in
// between: stopped (SIGSTOP), frozen or starved. Its peers' frames may be
// waiting unread, so their silence across that gap says nothing of them:
// silence is counted again from the end of the stall. A peer that is
// really gone is declared lost one silence limit after it instead of at
// once; a continued process does not declare every live peer lost.

// wait is how long the monitor sleeps between steps: a heartbeat interval,
// or a tenth of the silence limit when that is shorter, so that a loss is
// seen within a tenth of the limit after it.
func (d *detector) wait(every, silence time.Duration) time.Duration {
	if t := silence / 10; t < every {
		return t
	}
	return every
}

// step is one look at now: beat says to heartbeat every peer (every has
// passed since the last beat); lost are the peers silent past silence. With
// detect false (the job has ended) it only keeps the beat.
func (d *detector) step(now time.Time, every, silence time.Duration, peers []peerSeen, detect bool) (beat bool, lost []lostPeer) {
	if now.Sub(d.lastStep) > silence/2 {
		d.resumed = now
	}
	d.lastStep = now
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
