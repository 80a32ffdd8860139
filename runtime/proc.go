package runtime

import "io"

// proc is what the core takes from the process it runs in, given by the
// shell (shell.go) when it joins: where a launcher's records go, whether
// the launcher is gone, how the process dies. The core writes to no
// stream, reads no variable and ends no process of its own; the zero proc
// is a rank that no launcher watches (tests, simulations).
type proc struct {
	// records receives the generation reports (recover.go): a launched
	// rank's standard error. nil: none are written.
	records io.Writer
	// pid is the process's id, for the generation reports.
	pid int
	// marks receives the generation marks: a launched rank's standard
	// output. nil: none are written.
	marks io.Writer
	// ctlGone is closed when the launcher's control channel ends; nil
	// when no launcher watches.
	ctlGone <-chan struct{}
	// crashed gives the slots whose processes the launcher saw end by a
	// signal (a crash, SIGKILL), as it tells them on the control
	// channel; closed when the channel ends. nil when no launcher
	// watches.
	crashed <-chan int
	// launcherLost is called on the watcher's goroutine after the job was
	// ended because the launcher is gone (watchControl).
	launcherLost func(c *Comm, err error)
	// die ends the process at once, as a crash would (the test failure
	// schedule, failures.go); nil: Job.Die must be set.
	die func()
	// stop stops the process until it is continued (SIGSTOP; the
	// failure point stop-collective-K); nil: that point dies instead.
	stop func()
}
