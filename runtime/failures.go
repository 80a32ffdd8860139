package runtime

import (
	"sperli/job"
	"sperli/record"
)

// failureFor returns this rank's scheduled failure in this incarnation.
func (c *Comm) failureFor() *job.Failure {
	for i := range c.failures {
		if f := &c.failures[i]; f.Inc == c.inc && f.Rank == c.job.Rank {
			return f
		}
	}
	return nil
}

// failurePoint dies, as a crash would, if the schedule says so here.
func (c *Comm) failurePoint(point string, k int) {
	f := c.failureFor()
	if f == nil {
		return
	}
	hit := (f.Point == point || f.Point == "stop-"+point) && f.K == k
	if f.Point == "" {
		hit = (point == "after-ckpt" && k == 1) || (point == "collective" && k == 1 && !c.ckpt.used)
	}
	if hit && f.Point == "mute-agree" {
		c.links.rec.muted = true // the recovery loop calls this
		return
	}
	if hit && f.Point == "stop-collective" && c.links.proc.stop != nil {
		traceInstant("stopped by the test failure schedule", record.TraceCalls)
		traceFlush()
		c.links.proc.stop() // returns once continued
		return
	}
	if hit {
		c.die()
	}
}

// die ends the process at once, as a crash would (no bye, no flush): by
// Job.Die when set, else as the process's shell does it (proc.die).
func (c *Comm) die() {
	traceInstant("killed by the test failure schedule", record.TraceCalls)
	traceFlush()
	if c.job.Die != nil {
		c.job.Die()
		return
	}
	c.links.proc.die()
	select {}
}
