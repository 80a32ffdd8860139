package runtime

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sperli/codes"
	"sperli/job"
	"sperli/record"
)

// The process shell: what a rank does as a process, for its launcher and
// for the embedder's main — the only file of the package that writes to
// the process's standard output and error, reads its standard input (the
// control channel), reads the environment (through package job) or ends
// the process. Init joins through the core (join) with what the process
// gives it (proc); Run and Exit end the rank with its status record. The
// core never calls into this file: it calls back what proc holds.

// Init joins the job of j (SPEC §4, §6) as this process: it listens for
// every lower rank, dials every higher one, exchanges and checks tokens,
// and returns the communicator once every peer is connected. It fails with
// the code of the first check that refused this rank, or when the join
// window ends without a peer with that peer's last refusal code (H1610 if
// there was none). Cancelling ctx cancels the join.
//
// For a rank started by a launcher (Job.Launched) the process also: writes
// its records on standard error (trace, waiting, generation reports) and
// its generation marks on standard output; answers the control channel
// (Job.Control) from the start, so that a launcher that goes while the
// rank joins ends the join at once; and, when the launcher is gone, ends
// the job, calls Job.OnLauncherLost or, without it, ends the process half
// a second later with exit status 1.
func Init(ctx context.Context, j *Job) (_ *Comm, err error) {
	pr := proc{die: killSelf, stop: stopSelf}
	if j != nil && j.Launched {
		pr.records, pr.marks, pr.pid = os.Stderr, os.Stdout, os.Getpid()
		if j.Trace {
			startTrace(os.Stderr)
			sp := traceBegin()
			defer func() {
				sp.call("join", err, targ("slot", j.Rank), targ("size", j.Size), targ("spares", j.Spares), targ("incarnation", int(j.Incarnation)))
			}()
		}
		if j.Control != nil {
			gone := make(chan struct{})
			crashed := make(chan int, maxCrashed)
			// It reads the control channel as long as there is one: the
			// process's standard input, which no Close can interrupt.
			go func() { readControl(j.Control, os.Stderr, crashed); close(crashed); close(gone) }()
			pr.ctlGone, pr.launcherLost, pr.crashed = gone, launcherLost, crashed
		}
	}
	if j != nil && j.OneProgram && j.ProgramDigest == nil {
		d, err := executableDigest()
		if err != nil {
			return nil, err
		}
		j.ProgramDigest = d[:]
	}
	return join(ctx, j, pr)
}

// executableDigest is the program digest of a Go or C rank
// (docs/protocol.md §3.1.1): the bytes of the executable the process
// runs and its arguments after the program name.
func executableDigest() ([job.DigestSize]byte, error) {
	exe, err := os.Executable()
	if err == nil {
		var d [job.DigestSize]byte
		if d, err = job.FileProgramDigest(exe, os.Args[1:]); err == nil {
			return d, nil
		}
	}
	return [job.DigestSize]byte{}, codes.Wrap(codes.ProgramMismatch, err, "the program digest of this slot cannot be made (its executable cannot be read: %v); set Job.ProgramDigest", err)
}

// launcherLost is what a launched rank does when its launcher is gone and
// the job was ended for it.
func launcherLost(c *Comm, err error) {
	if c.job.OnLauncherLost != nil {
		c.job.OnLauncherLost()
		return
	}
	// The program may be computing and never call us again: give it a
	// moment to notice, then end the process as the launcher would have.
	time.Sleep(500 * time.Millisecond)
	c.Close()
	WriteStatus(os.Stderr, err)
	os.Exit(1)
}

// killSelf ends the process with SIGKILL.
func killSelf() { syscall.Kill(os.Getpid(), syscall.SIGKILL) }

// maxControlLine bounds a line read from the control channel.
const maxControlLine = 256

// maxCrashed bounds the crashes told by the launcher that wait for the
// core, which takes them at once; past it they are dropped.
const maxCrashed = 64

// readControl reads the launcher's control channel to its end, answering
// every "waiting" line with the waiting record on w (standard error) and
// giving the slot of every "crashed SLOT" line (the launcher saw that
// slot's process end by a signal) to crashed; other lines are ignored.
func readControl(r io.Reader, w io.Writer, crashed chan<- int) {
	br := bufio.NewReaderSize(r, maxControlLine)
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// Too long for a request: skip to its end.
			for err == bufio.ErrBufferFull {
				_, err = br.ReadSlice('\n')
			}
			continue
		}
		switch cmd, arg, _ := strings.Cut(strings.TrimSpace(string(line)), " "); cmd {
		case "waiting":
			writeWaiting(w)
		case "clock":
			writeClock(w)
		case "crashed":
			// The core checks the slot against the job's.
			if slot, err := strconv.Atoi(arg); err == nil && slot >= 0 && slot <= job.MaxSize && crashed != nil {
				// Never waits: this reader must see the launcher's end
				// and answer "waiting" whatever the core does (a crash
				// told past a full channel is still seen the slow way: a
				// broken connection, the silence, the join window).
				select {
				case crashed <- slot:
				default:
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// ExitStatus returns the exit status for a rank that ends with err: 0 for
// nil, 75 when the job lost a rank (H1611, or H1612 caused by a loss), 1
// otherwise (record.ExitOK, ExitLost, ExitFail).
func ExitStatus(err error) int { return record.ExitStatus(err) }

// WriteStatus writes the status record of err, with this process's
// counters, to w (a launched rank's standard error) as one line.
func WriteStatus(w io.Writer, err error) {
	st := record.StatusOf(err)
	rs := stats()
	st.Stats = &rs
	record.WriteStatus(w, st)
}

// launched reports whether a launcher reads this rank's status record:
// the job description says so, or, when there is none (it could not be
// read), the launcher's environment variable does (job.Env.Launched). A rank started by
// hand never prints the record on its terminal.
func launched(c *Comm) bool {
	if c != nil {
		return c.job.Launched
	}
	return job.ReadEnv().Launched
}

// Exit ends a rank program: with err nil it finishes c; otherwise it ends
// the job with err as this rank's failure (peers return H1612) unless the
// job already ended. When the job was started by a launcher it writes the
// status record and, for an error, the error as the last line a user sees
// on standard error. It returns the exit status; c may be nil (the job
// description or the join failed). The embedder's main is
// os.Exit(runtime.Exit(c, err)).
func Exit(c *Comm, err error) int {
	if c != nil {
		switch {
		case err != nil:
			c.Fail(err)
		case !c.Finished():
			err = c.Finish()
		}
	}
	if !launched(c) {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		return ExitStatus(err)
	}
	traceFlush()
	if err != nil {
		record.WriteError(os.Stderr, err)
	}
	WriteStatus(os.Stderr, err)
	return ExitStatus(err)
}
