package record

import (
	"encoding/json"
	"strings"
)

// What a rank waits in, for the launcher's report when a job is ended by
// `sperli run --timeout D` or by an interrupt (SPEC §2): the launcher
// writes the line "waiting" on a rank's control channel, and the rank
// answers with one line on its standard error, the waiting record:
//
//	\x1esperli-waiting {"call":"recv(source 0, tag 7)","ms":5012}
//
// "call" is "" when the rank is in no Sperli call (it computes). The
// record is of the process: with several goroutines waiting at once it
// tells the latest wait.

// WaitingPrefix starts the waiting record.
const WaitingPrefix = "\x1esperli-waiting "

// Waiting is the waiting record. Rank and For are job ranks, -1 when
// unknown: the rank of the process that waits (when it waits in a call)
// and the one it waits for (a named source, a collective's peer; -1 for
// any source). The byte counters are the process's, for the --live
// status line.
type Waiting struct {
	Call      string `json:"call"`
	MS        int64  `json:"ms"`
	Rank      int    `json:"rank"`
	For       int    `json:"for"`
	SentBytes int64  `json:"sent_bytes"`
	RecvBytes int64  `json:"recv_bytes"`
}

// Line is the record's line, its line end included.
func (w Waiting) Line() string {
	b, _ := json.Marshal(w)
	return WaitingPrefix + string(b) + "\n"
}

// ParseWaiting reads a waiting record line (with or without its line end).
func ParseWaiting(line string) (Waiting, bool) {
	rest, ok := strings.CutPrefix(line, WaitingPrefix)
	if !ok {
		return Waiting{}, false
	}
	var w Waiting
	if err := json.Unmarshal([]byte(strings.TrimRight(rest, "\r\n")), &w); err != nil {
		return Waiting{}, false
	}
	return w, true
}
