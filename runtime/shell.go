package runtime

import (
	"fmt"
	"io"
	"os"

	"sperli/job"
	"sperli/record"
)

// The process shell: what a rank launched by `sperli run` does at its end
// for its launcher (the records of package record on its standard error)
// and what an embedder's main returns as the exit status. The core never
// calls into this file.

// Exit statuses of a rank and of the launcher (SPEC §2, §13).
const (
	ExitOK   = record.ExitOK
	ExitFail = record.ExitFail
	ExitLost = record.ExitLost // the job lost a rank
)

// ExitStatus returns the exit status for a rank that ends with err: 0 for
// nil, 75 when the job lost a rank (H1611, or H1612 caused by a loss), 1
// otherwise.
func ExitStatus(err error) int { return record.ExitStatus(err) }

// WriteStatus writes the status record of err, with this process's
// counters, to w (a launched rank's standard error) as one line.
func WriteStatus(w io.Writer, err error) {
	st := record.StatusOf(err)
	rs := Stats()
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
