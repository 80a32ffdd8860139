package runtime

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"sperli/record"
)

// The timeline of `sperli run --trace FILE` (docs/starlark.md, protocol.md
// §9.4). When the job description says "trace", a launched rank writes
// one trace record per event on its standard error:
//
//	\x1esperli-trace {"ph":"X","name":"allreduce","ts":1764750000123456789,"dur":41000,"tid":1,"args":{"k":3,"bytes":8}}
//
// ph is "X" (a call: ts its start, dur its length) or "i" (an instant);
// ts is the rank's wall clock in nanoseconds since 1970, dur nanoseconds;
// tid is 1 for the program's calls and the waits inside them, 2 for the
// recovery of a loss. The launcher gathers the records of every rank,
// puts each rank's clock on its own (the clock records below) and writes
// FILE in the Trace Event Format. A rank keeps at most traceBuf bytes of
// records before it writes them, in one write of whole lines, and at
// most traceFlushEvery after an event; what it holds when it is killed is
// lost with it.
//
// The line "clock" on the control channel is answered with the rank's
// clock now, \x1esperli-clock {"ns":1764750000123456789}: the launcher
// measures the offset of a remote rank's clock from its own from it.

// traceBuf bounds what a rank holds before it writes: under PIPE_BUF, so
// that a batch is one write no other writer of the pipe can cut into.
const traceBuf = 3 << 10

// traceFlushEvery is how long a held record waits at most.
const traceFlushEvery = 100 * time.Millisecond

type tracer struct {
	mu      sync.Mutex
	w       io.Writer
	buf     []byte
	pending bool // a flush is scheduled
}

var (
	tracing   atomic.Pointer[tracer]
	traceOnce sync.Once
)

// startTrace turns the trace records on, written to w, once per process.
func startTrace(w io.Writer) {
	traceOnce.Do(func() { tracing.Store(&tracer{w: w, buf: make([]byte, 0, traceBuf+512)}) })
}

// traceNow is this process's wall clock in nanoseconds, kept monotonic
// from the process's start (a clock step does not reorder its events).
func traceNow() int64 { return procStart.UnixNano() + int64(time.Since(procStart)) }

// writeClock writes the clock record to w.
func writeClock(w io.Writer) {
	waitOut.Lock()
	defer waitOut.Unlock()
	fmt.Fprintf(w, "%s{\"ns\":%d}\n", record.ClockPrefix, traceNow())
}

// traceArg is one argument of an event: a number, or a string when s is
// set.
type traceArg struct {
	k string
	n int64
	s *string
}

func targ(k string, n int) traceArg { return traceArg{k: k, n: int64(n)} }

func tstr(k, s string) traceArg { return traceArg{k: k, s: &s} }

// span is an event begun; its zero value (tracing off) records nothing.
type span struct {
	t     *tracer
	start int64
}

// traceBegin begins an event: one atomic load when tracing is off.
func traceBegin() span {
	t := tracing.Load()
	if t == nil {
		return span{}
	}
	return span{t, traceNow()}
}

// on reports whether the span records.
func (s span) on() bool { return s.t != nil }

// end records the span as a call of tid named name.
func (s span) end(name string, tid int, args ...traceArg) {
	if s.t == nil {
		return
	}
	s.t.add('X', name, s.start, traceNow()-s.start, tid, args)
}

// traceInstant records an instant event.
func traceInstant(name string, tid int, args ...traceArg) {
	if t := tracing.Load(); t != nil {
		t.add('i', name, traceNow(), 0, tid, args)
	}
}

// traceSpanSince records a call that began at start (a wall time).
func traceSpanSince(name string, tid int, start time.Time, args ...traceArg) {
	if t := tracing.Load(); t != nil {
		now := traceNow()
		d := time.Since(start)
		t.add('X', name, now-int64(d), int64(d), tid, args)
	}
}

func (t *tracer) add(ph byte, name string, ts, dur int64, tid int, args []traceArg) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.buf
	b = append(b, record.TracePrefix...)
	b = append(b, `{"ph":"`...)
	b = append(b, ph)
	b = append(b, `","name":`...)
	b = appendJSONString(b, name)
	b = append(b, `,"ts":`...)
	b = strconv.AppendInt(b, ts, 10)
	if ph == 'X' {
		b = append(b, `,"dur":`...)
		b = strconv.AppendInt(b, max(0, dur), 10)
	}
	b = append(b, `,"tid":`...)
	b = strconv.AppendInt(b, int64(tid), 10)
	if len(args) > 0 {
		b = append(b, `,"args":{`...)
		for i, a := range args {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, a.k)
			b = append(b, ':')
			if a.s != nil {
				b = appendJSONString(b, *a.s)
			} else {
				b = strconv.AppendInt(b, a.n, 10)
			}
		}
		b = append(b, '}')
	}
	b = append(b, "}\n"...)
	t.buf = b
	if len(b) >= traceBuf {
		t.flushLocked()
	} else if !t.pending {
		t.pending = true
		time.AfterFunc(traceFlushEvery, t.flush)
	}
}

// maxTraceString bounds a string in a record (a name, a message).
const maxTraceString = 200

// appendJSONString appends s as a JSON string, cut to maxTraceString
// bytes.
func appendJSONString(b []byte, s string) []byte {
	if len(s) > maxTraceString {
		s = record.CutMiddle(s, maxTraceString)
	}
	plain := true
	for i := 0; i < len(s) && plain; i++ {
		c := s[i]
		plain = c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	if plain {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	q, _ := json.Marshal(s)
	return append(b, q...)
}

func (t *tracer) flush() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.flushLocked()
}

func (t *tracer) flushLocked() {
	t.pending = false
	if len(t.buf) == 0 {
		return
	}
	// Whole lines of at most about traceBuf bytes per write.
	b := t.buf
	for len(b) > 0 {
		n := len(b)
		if n > traceBuf {
			n = traceBuf
			for n > 0 && b[n-1] != '\n' {
				n--
			}
			if n == 0 {
				n = len(b)
			}
		}
		t.w.Write(b[:n])
		b = b[n:]
	}
	t.buf = t.buf[:0]
}

// traceFlush writes what the process holds (its end, a scheduled death).
func traceFlush() {
	if t := tracing.Load(); t != nil {
		t.flush()
	}
}

// call records the span as a program's call; a failed one names its error.
func (s span) call(name string, err error, args ...traceArg) {
	if s.t == nil {
		return
	}
	if err != nil {
		args = append(args, tstr("error", err.Error()))
	}
	s.t.add('X', name, s.start, traceNow()-s.start, record.TraceCalls, args)
}

// traceRecv records a receive: the source and tag it got (or asked for,
// when it got nothing) and the bytes.
func (c *Comm) traceRecv(sp span, name string, op *RecvOp, err error) {
	if op == nil {
		sp.call(name, err)
		return
	}
	src, tag, n := op.r.src, int(op.r.tag), 0
	if err == nil {
		src, tag, n = op.r.gotSrc, int(op.r.gotTag), op.r.gotLen
	}
	sp.call(name, err, targ("from", src), targ("tag", tag), targ("bytes", n))
}

// worldRankOr is the job rank of rank r of c, or r itself when it is
// none of c's (a wrong argument, refused by the call).
func (c *Comm) worldRankOr(r int) int {
	if r < 0 || r >= c.size {
		return r
	}
	return c.worldRank(r)
}
