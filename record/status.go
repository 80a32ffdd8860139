package record

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

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

// ErrorPrefix starts every line of the error a launched rank ends with,
// written just before its status record: the launcher shows these lines
// (without the prefix) or, for the H1612 of a rank ended by another one,
// leaves them out unless asked (`sperli run -v`).
const ErrorPrefix = "\x1esperli-error "

// LaunchedEnv is set to "1" by the launcher in the environment of every
// rank it starts, so that a rank whose job description could not be read
// still knows whether a launcher reads its status record.
const LaunchedEnv = "SPERLI_LAUNCHED"

// maxStatusMsg bounds the message in a status record: the whole error is
// on the rank's standard error already (ErrorPrefix lines); the record
// keeps its head and its tail, where the cause is.
const maxStatusMsg = 64 << 10

// Status is the outcome a rank reports to its launcher.
type Status struct {
	Exit      int    `json:"exit"`
	Code      string `json:"code,omitempty"`  // "H1611", "" when none
	Cause     string `json:"cause,omitempty"` // lost, failed, aborted, launcher
	CauseRank int    `json:"cause_rank"`      // the rank the cause is about
	Msg       string `json:"msg,omitempty"`
	// Stats are the rank's counters, for --stats.
	Stats *RankStats `json:"stats,omitempty"`
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

// StatusOf builds the status record of err, without counters.
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

// WriteStatus writes st to w (a launched rank's standard error) as one
// line, its message cut in the middle past 64 KiB.
func WriteStatus(w io.Writer, st Status) {
	st.Msg = CutMiddle(st.Msg, maxStatusMsg)
	b, _ := json.Marshal(st)
	fmt.Fprintf(w, "%s%s\n", StatusPrefix, b)
}

// CutMiddle returns s or, when it is longer than max bytes its first
// eighth and its end joined by " … ", cut at UTF-8 character boundaries.
func CutMiddle(s string, max int) string {
	if len(s) <= max {
		return s
	}
	head, tail := max/8, max-max/8-8
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	t := len(s) - tail
	for t < len(s) && !utf8.RuneStart(s[t]) {
		t++
	}
	return s[:head] + " … " + s[t:]
}

// WriteError writes err as the lines a launched rank ends with, each
// line prefixed ErrorPrefix.
func WriteError(w io.Writer, err error) {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(err.Error(), "\n"), "\n") {
		b.WriteString(ErrorPrefix)
		b.WriteString(line)
		b.WriteByte('\n')
	}
	io.WriteString(w, b.String())
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
