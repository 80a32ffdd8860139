package runtime

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"sperli/codes"
	"sperli/wire"
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

// WaitRecord is the waiting record.
type WaitRecord struct {
	Call string `json:"call"`
	MS   int64  `json:"ms"`
}

// waitInfo is one wait: what and since when.
type waitInfo struct {
	what  fmt.Stringer
	since time.Time
}

var current atomic.Pointer[waitInfo]

// enterWait records that this process waits in what; leaveWait(the
// result) ends that record. Both are cheap (one allocation, two atomic
// operations): they sit on the receive path.
func enterWait(what fmt.Stringer) *waitInfo {
	if rw, ok := what.(recvWait); ok {
		select {
		case <-rw.r.done:
			// Matched already: no wait, no clock; the message counts.
			countRecv(rw.r)
			return nil
		default:
		}
	}
	w := &waitInfo{what: what, since: time.Now()}
	current.Store(w)
	return w
}

func leaveWait(w *waitInfo) {
	if w == nil {
		return
	}
	current.CompareAndSwap(w, nil)
	countWait(w)
}

// Waiting returns the call this process waits in and for how long; ""
// when it waits in none.
func Waiting() (string, time.Duration) {
	w := current.Load()
	if w == nil {
		return "", 0
	}
	return w.what.String(), time.Since(w.since)
}

// recvWait describes a posted receive.
type recvWait struct{ r *recvOp }

func (w recvWait) String() string {
	src := fmt.Sprintf("source %d", w.r.src)
	if w.r.src == wire.AnySource {
		src = "any source"
	}
	if w.r.anyTag {
		return fmt.Sprintf("recv(%s, any tag)", src)
	}
	return fmt.Sprintf("recv(%s, tag %d)", src, w.r.tag)
}

// collWait describes a collective waiting for a peer's frame.
type collWait struct {
	k    uint64
	call wire.Call
	from int
}

func (w collWait) String() string {
	return fmt.Sprintf("%s (collective %d, waiting for rank %d)", describe(Kind(w.call.Kind), w.call), w.k, w.from)
}

// writeWaiting writes the waiting record to w.
func writeWaiting(w io.Writer) {
	call, d := Waiting()
	b, _ := json.Marshal(WaitRecord{Call: call, MS: d.Milliseconds()})
	waitOut.Lock()
	defer waitOut.Unlock()
	fmt.Fprintf(w, "%s%s\n", WaitingPrefix, b)
}

var waitOut sync.Mutex

// maxControlLine bounds a line read from the control channel.
const maxControlLine = 256

// readControl reads the launcher's control channel to its end, answering
// every "waiting" line with the waiting record on w (standard error);
// other lines are ignored.
func readControl(r io.Reader, w io.Writer) {
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
		if strings.TrimSpace(string(line)) == "waiting" {
			writeWaiting(w)
		}
		if err != nil {
			return
		}
	}
}

// ParseWaiting reads a waiting record line (with or without its line end).
func ParseWaiting(line string) (WaitRecord, bool) {
	rest, ok := strings.CutPrefix(line, WaitingPrefix)
	if !ok {
		return WaitRecord{}, false
	}
	var w WaitRecord
	if err := json.Unmarshal([]byte(strings.TrimRight(rest, "\r\n")), &w); err != nil {
		return WaitRecord{}, false
	}
	return w, true
}

// neverMatches refuses at once, with H1617, a receive that can never be
// matched: from this rank itself when no send to itself is pending (a
// send to oneself goes straight to the matcher, so it would have matched
// already). The receive stays posted: a Go program that sends to itself
// afterwards may finish it again.
func (c *Comm) neverMatches(op *RecvOp) error {
	if op.r.anySrc || op.r.src != c.worldRank(c.rank) { // src is a job rank
		return nil
	}
	select {
	case <-op.r.done:
		return nil
	default:
	}
	w := recvWait{op.r}
	return &codes.Error{Code: codes.Finished, Op: "recv", Rank: c.rank,
		Msg: fmt.Sprintf("%s can never match: it is from this rank itself and no send to itself is pending (send before you receive)", w)}
}
