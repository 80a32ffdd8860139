package runtime

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"sperli/codes"
	"sperli/record"
	"sperli/wire"
)

// The waiting record (record.Waiting) of `sperli run --timeout` tells
// what this process waits in; this file keeps the current wait.

// waitInfo is one wait: what and since when, by which job rank (self)
// for which (peer, -1 for none or any).
type waitInfo struct {
	what       fmt.Stringer
	since      time.Time
	self, peer int
}

var current atomic.Pointer[waitInfo]

// enterWait records that this process waits in what; leaveWait(the
// result) ends that record. Both are cheap (one allocation, two atomic
// operations): they sit on the receive path.
func enterWait(what fmt.Stringer, self, peer int) *waitInfo {
	if rw, ok := what.(recvWait); ok {
		select {
		case <-rw.r.done:
			// Matched already: no wait, no clock; the message counts.
			countRecv(rw.r)
			return nil
		default:
		}
	}
	w := &waitInfo{what: what, since: time.Now(), self: self, peer: peer}
	current.Store(w)
	return w
}

func leaveWait(w *waitInfo) {
	if w == nil {
		return
	}
	current.CompareAndSwap(w, nil)
	countWait(w)
	if tracing.Load() != nil {
		traceSpanSince("wait", record.TraceCalls, w.since, tstr("what", w.what.String()), targ("for", w.peer))
	}
}

// currentWait returns the call this process waits in and for how long; ""
// when it waits in none.
func currentWait() (string, time.Duration) {
	w := current.Load()
	if w == nil {
		return "", 0
	}
	return w.what.String(), time.Since(w.since)
}

// recvWait describes a posted receive; c, when set, is its communicator,
// whose ranks that may still send an any-source receive names.
type recvWait struct {
	r *recvOp
	c *Comm
}

func (w recvWait) String() string {
	src := fmt.Sprintf("source %d", w.r.src)
	if w.r.src == wire.AnySource {
		src = "any source"
	}
	var s string
	if w.r.anyTag {
		s = fmt.Sprintf("recv(%s, any tag)", src)
	} else {
		s = fmt.Sprintf("recv(%s, tag %d)", src, w.r.tag)
	}
	if w.r.anySrc && w.c != nil {
		s += w.c.mayStillSend()
	}
	return s
}

// mayStillSend says which ranks of c may still send: ", from ranks 1, 2"
// (the first 8, then how many in all).
func (c *Comm) mayStillSend() string {
	c.mu.Lock()
	var rs []string
	n := 0
	for r := 0; r < c.size; r++ {
		if r != c.rank && c.canSendLocked(r) {
			if n++; n <= 8 {
				rs = append(rs, strconv.Itoa(r))
			}
		}
	}
	c.mu.Unlock()
	switch {
	case n == 0:
		return ", from no rank: every other has finished or is lost"
	case n > 8:
		return fmt.Sprintf(", from ranks %s, … (%d in all)", strings.Join(rs, ", "), n)
	case n == 1:
		return ", from rank " + rs[0]
	}
	return ", from ranks " + strings.Join(rs, ", ")
}

// collWait describes a collective waiting for a peer's frame.
type collWait struct {
	k    uint64
	call wire.Call
	from int
}

func (w collWait) String() string {
	if w.from < 0 {
		return fmt.Sprintf("%s (call %d, waiting for the agreement)", describe(w.call.Kind, w.call), w.k)
	}
	return fmt.Sprintf("%s (collective %d, waiting for rank %d)", describe(w.call.Kind, w.call), w.k, w.from)
}

// waitRecord is this process's waiting record now.
func waitRecord() record.Waiting {
	rec := record.Waiting{Rank: -1, For: -1, SentBytes: counters.sentBytes.Load(), RecvBytes: counters.recvBytes.Load()}
	if w := current.Load(); w != nil {
		rec.Call, rec.MS = w.what.String(), time.Since(w.since).Milliseconds()
		rec.Rank, rec.For = w.self, w.peer
	}
	return rec
}

// writeWaiting writes the waiting record to w.
func writeWaiting(w io.Writer) {
	line := waitRecord().Line()
	waitOut.Lock()
	defer waitOut.Unlock()
	io.WriteString(w, line)
}

var waitOut sync.Mutex

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
	w := recvWait{r: op.r}
	return &codes.Error{Code: codes.Finished, Op: "recv", Rank: c.rank,
		Msg: fmt.Sprintf("%s can never match: it is from this rank itself and no send to itself is pending (send before you receive)", w)}
}

// recvPeer is the job rank a receive waits for, -1 for any source.
func recvPeer(r *recvOp) int {
	if r.src == wire.AnySource {
		return -1
	}
	return r.src
}
