package runtime

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"sperli/codes"
)

// Exit statuses of a rank and of the launcher (SPEC §2, §13).
const (
	ExitOK   = 0
	ExitFail = 1
	ExitLost = 75 // the job lost a rank
)

// StatusPrefix starts the status record: the last line a launched rank
// writes on its standard error, read by the launcher and never shown.
const StatusPrefix = "\x1esperli-status "

// Status is the outcome a rank reports to its launcher.
type Status struct {
	Exit      int    `json:"exit"`
	Code      string `json:"code,omitempty"`  // "H1611", "" when none
	Cause     string `json:"cause,omitempty"` // lost, failed, aborted, launcher
	CauseRank int    `json:"cause_rank"`      // the rank the cause is about
	Msg       string `json:"msg,omitempty"`
}

// ExitStatus returns the exit status for a rank that ends with err: 0 for
// nil, 75 when the job lost a rank (H1611, or H1612 caused by a loss), 1
// otherwise.
func ExitStatus(err error) int {
	if err == nil {
		return ExitOK
	}
	e := codes.As(err)
	switch {
	case e == nil:
		return ExitFail
	case e.Code == codes.PeerLost:
		return ExitLost
	case e.Code == codes.JobEnded && e.Cause != nil && e.Cause.Kind == codes.CauseLost:
		return ExitLost
	}
	return ExitFail
}

// StatusOf builds the status record of err.
func StatusOf(err error) Status {
	s := Status{Exit: ExitStatus(err), CauseRank: -1}
	if err == nil {
		return s
	}
	s.Msg = err.Error()
	if e := codes.As(err); e != nil {
		s.Code = e.Code.String()
		if e.Cause != nil {
			s.Cause = e.Cause.Kind.String()
			s.CauseRank = e.Cause.Rank
		}
	}
	return s
}

// WriteStatus writes the status record of err to w (a launched rank's
// standard error) as one line.
func WriteStatus(w io.Writer, err error) {
	b, _ := json.Marshal(StatusOf(err))
	fmt.Fprintf(w, "%s%s\n", StatusPrefix, b)
}

// ParseStatus reads a status record line (with or without its line end).
func ParseStatus(line string) (Status, bool) {
	if !strings.HasPrefix(line, StatusPrefix) {
		return Status{}, false
	}
	var s Status
	if err := json.Unmarshal([]byte(strings.TrimRight(line[len(StatusPrefix):], "\r\n")), &s); err != nil {
		return Status{}, false
	}
	return s, true
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
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	if c == nil || c.job.Launched {
		WriteStatus(os.Stderr, err)
	}
	return ExitStatus(err)
}
