package launch

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"sperli/record"
)

// `sperli run --trace FILE`: a timeline of every process of the job in
// the Trace Event Format (the JSON that Perfetto, chrome://tracing and
// speedscope open). Each rank writes trace records on its standard error
// (runtime/trace.go); the launcher checks each, gives it the process's
// track, and keeps it in a spool (memory up to spoolMem, the rest in an
// unlinked temporary file), with its own events: each process's start and
// end, and every line it says (a loss, a generation, a restart) as an
// instant across the whole timeline. When the job has ended it writes
// FILE: the spooled events with every rank's clock put on the launcher's
// (a local rank shares the launcher's clock; a remote one's offset is
// measured by clock probes on its control channel, the least round trip
// of traceProbes), in microseconds since the launch.

// traceProbes is how many clock probes a remote process gets.
const traceProbes = 4

// maxTraceLine bounds a trace record (runtime/trace.go cuts its strings).
const maxTraceLine = 4 << 10

// traceLog is the trace of one launcher.
type traceLog struct {
	path  string
	start time.Time

	mu     sync.Mutex
	events spool                 // one event a line, ts in the process's clock (ns): "l {…}" the launcher's, "r<pid> {…}" a rank's record
	buf    []byte                // what goes to events next
	procs  []*traceProc          // by pid - 1
	byKey  map[[2]int]*traceProc // (incarnation, slot)
	bad    int                   // records refused
}

// traceProc is one process's track.
type traceProc struct {
	pid     int
	name    string
	title   func() string // when not nil, the name, asked when the file is written
	remote  bool
	clock   chan int64 // clock records, as they come
	started time.Time  // when the launcher started it

	mu     sync.Mutex
	offset int64 // its clock minus the launcher's, ns
}

// traceEvent is an event as the launcher keeps it and writes it.
type traceEvent struct {
	Ph   string          `json:"ph"`
	Name string          `json:"name"`
	Ts   json.Number     `json:"ts"`
	Dur  *json.Number    `json:"dur,omitempty"`
	Pid  int             `json:"pid"`
	Tid  int             `json:"tid"`
	S    string          `json:"s,omitempty"`
	Args json.RawMessage `json:"args,omitempty"`
}

// rankEvent is a trace record as a rank writes it.
type rankEvent struct {
	Ph   string          `json:"ph"`
	Name string          `json:"name"`
	Ts   int64           `json:"ts"`
	Dur  int64           `json:"dur"`
	Tid  int             `json:"tid"`
	Args json.RawMessage `json:"args"`
}

// openTrace checks that path can be written (exit 2 before anything
// starts when not) and returns the log.
func openTrace(path string, budget *atomic.Int64) (*traceLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, usage("--trace %s: %v", path, unwrapPath(err))
	}
	f.Close()
	t := &traceLog{path: path, start: time.Now(), byKey: map[[2]int]*traceProc{}}
	t.events.budget = budget
	return t, nil
}

// proc returns the track of slot in incarnation inc, made on first use.
func (t *traceLog) proc(inc uint32, slot int, name string, remote bool) *traceProc {
	t.mu.Lock()
	defer t.mu.Unlock()
	key := [2]int{int(inc), slot}
	if p := t.byKey[key]; p != nil {
		return p
	}
	p := &traceProc{pid: len(t.procs) + 1, name: name, remote: remote, clock: make(chan int64, traceProbes)}
	t.procs = append(t.procs, p)
	t.byKey[key] = p
	return p
}

// rankRecord takes a trace record of a process (without its prefix).
// It is kept as it came, behind its pid ("r7 {…}"), and checked when the
// file is written: the run is not slowed by decoding.
func (t *traceLog) rankRecord(p *traceProc, line []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(line) > maxTraceLine || bytes.IndexByte(line, '\n') >= 0 {
		t.bad++
		return
	}
	t.buf = append(t.buf, 'r')
	t.buf = strconv.AppendInt(t.buf, int64(p.pid), 10)
	t.buf = append(t.buf, ' ')
	t.buf = append(t.buf, line...)
	t.buf = append(t.buf, '\n')
	t.spillLocked(false)
}

// spillLocked moves what buf holds to the spool, in writes of traceChunk.
func (t *traceLog) spillLocked(all bool) {
	if len(t.buf) >= traceChunk || all && len(t.buf) > 0 {
		t.events.Write(t.buf)
		t.buf = t.buf[:0]
	}
}

// traceChunk is how much the log gathers before it writes to its spool.
const traceChunk = 32 << 10

// fromRank is the event of a rank's record, checked; ok is false for one
// the trace cannot show.
func fromRank(pid int, line []byte) (traceEvent, bool) {
	var e rankEvent
	if json.Unmarshal(line, &e) != nil || !validEvent(e) {
		return traceEvent{}, false
	}
	out := traceEvent{Ph: e.Ph, Name: e.Name, Ts: json.Number(strconv.FormatInt(e.Ts, 10)), Pid: pid, Tid: e.Tid, Args: e.Args}
	if e.Ph == "X" {
		d := json.Number(strconv.FormatInt(e.Dur, 10))
		out.Dur = &d
	}
	return out, true
}

// validEvent says whether a rank's record is one the trace can show.
func validEvent(e rankEvent) bool {
	return (e.Ph == "X" || e.Ph == "i") && e.Name != "" && len(e.Name) <= 256 &&
		e.Ts > 0 && e.Dur >= 0 && e.Dur < int64(365*24*time.Hour) &&
		(e.Tid == record.TraceCalls || e.Tid == record.TraceRecovery) &&
		(len(e.Args) == 0 || e.Args[0] == '{' || string(e.Args) == "null")
}

// clockRecord takes a clock record of a process.
func (t *traceLog) clockRecord(p *traceProc, line []byte) {
	var c struct {
		NS int64 `json:"ns"`
	}
	if json.Unmarshal(line, &c) != nil || c.NS <= 0 {
		return
	}
	select {
	case p.clock <- c.NS:
	default:
	}
}

// launcherEvent puts the launcher's own event on its track (pid 0): an
// instant across the timeline (s "g"), or one on a process's track.
func (t *traceLog) launcherEvent(name string, on *traceProc, args map[string]any) {
	ev := traceEvent{Ph: "i", Name: name, Ts: json.Number(fmt.Sprint(time.Now().UnixNano())), Tid: 0, S: "g", Args: rawArgs(args)}
	if on != nil {
		ev.Pid, ev.S = on.pid, "t"
	}
	t.add(ev)
}

// processEnded puts a process's life on its track (tid 0): a span from
// its start to its end, and its end as an instant named by how it ended.
func (t *traceLog) processEnded(p *traceProc, pid int, why string) {
	now := time.Now()
	if !p.started.IsZero() {
		d := json.Number(fmt.Sprint(now.Sub(p.started).Nanoseconds()))
		t.add(traceEvent{Ph: "X", Name: fmt.Sprintf("pid %d", pid), Ts: json.Number(fmt.Sprint(p.started.UnixNano())), Dur: &d, Pid: p.pid, Args: rawArgs(map[string]any{"end": why})})
	}
	t.add(traceEvent{Ph: "i", Name: "ended: " + why, Ts: json.Number(fmt.Sprint(now.UnixNano())), Pid: p.pid, S: "t"})
}

func (t *traceLog) add(ev traceEvent) {
	b, _ := json.Marshal(ev)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, "l "...)
	t.buf = append(t.buf, b...)
	t.buf = append(t.buf, '\n')
	t.spillLocked(false)
}

// probe measures a remote process's clock offset from the launcher's:
// it writes "clock" on the process's control channel and takes the
// answer whose round trip was least. A process that does not answer
// keeps offset 0.
func (p *traceProc) probe(w io.Writer, ended <-chan struct{}) {
	best := time.Duration(-1)
	for range traceProbes {
		t0 := time.Now()
		if _, err := io.WriteString(w, "clock\n"); err != nil {
			return
		}
		select {
		case ns := <-p.clock:
			t1 := time.Now()
			rtt := t1.Sub(t0)
			if best < 0 || rtt < best {
				best = rtt
				mid := t0.Add(rtt / 2)
				p.mu.Lock()
				p.offset = ns - mid.UnixNano()
				p.mu.Unlock()
			}
		case <-ended:
			return
		case <-time.After(10 * time.Second):
			return
		}
	}
}

// write writes the trace file: the metadata of every track, then the
// events, each rank's on the launcher's clock in microseconds since the
// launch.
func (t *traceLog) write() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	tmp, err := os.CreateTemp(filepath.Dir(t.path), ".sperli-trace-")
	if err != nil {
		return fmt.Errorf("--trace %s: %v", t.path, unwrapPath(err))
	}
	defer os.Remove(tmp.Name())
	w := bufio.NewWriterSize(tmp, 64<<10)
	w.WriteString("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n")
	first := true
	put := func(ev traceEvent) {
		b, _ := json.Marshal(ev)
		if !first {
			w.WriteString(",\n")
		}
		first = false
		w.Write(b)
	}
	meta := func(pid, tid int, name string, args map[string]any) {
		put(traceEvent{Ph: "M", Name: name, Ts: "0", Pid: pid, Tid: tid, Args: rawArgs(args)})
	}
	meta(0, 0, "process_name", map[string]any{"name": "launcher"})
	meta(0, 0, "process_sort_index", map[string]any{"sort_index": 0})
	offsets := make([]int64, len(t.procs)+1)
	for _, p := range t.procs {
		name := p.name
		if p.title != nil {
			name = p.title()
		}
		meta(p.pid, 0, "process_name", map[string]any{"name": name})
		meta(p.pid, 0, "process_sort_index", map[string]any{"sort_index": p.pid})
		meta(p.pid, 0, "thread_name", map[string]any{"name": "process"})
		meta(p.pid, record.TraceCalls, "thread_name", map[string]any{"name": "calls"})
		meta(p.pid, record.TraceRecovery, "thread_name", map[string]any{"name": "recovery"})
		p.mu.Lock()
		offsets[p.pid] = p.offset
		p.mu.Unlock()
	}
	start := t.start.UnixNano()
	t.spillLocked(true)
	r := bufio.NewReaderSize(t.events.reader(), 32<<10)
	for {
		line, err := r.ReadBytes('\n')
		var ev traceEvent
		ok := false
		if tag, rest, cut := bytes.Cut(line, []byte{' '}); cut && len(tag) > 0 {
			if tag[0] == 'l' {
				ok = json.Unmarshal(rest, &ev) == nil
			} else if pid, perr := strconv.Atoi(string(tag[1:])); perr == nil {
				if ev, ok = fromRank(pid, rest); !ok {
					t.bad++
				}
			}
		}
		if ok {
			off := int64(0)
			if ev.Tid != 0 && ev.Pid > 0 && ev.Pid < len(offsets) {
				off = offsets[ev.Pid] // the launcher's own events are on its clock
			}
			ts, _ := ev.Ts.Int64()
			ev.Ts = usNumber(ts - off - start)
			if ev.Dur != nil {
				d, _ := ev.Dur.Int64()
				n := usNumber(d)
				ev.Dur = &n
			}
			put(ev)
		}
		if err != nil {
			break
		}
	}
	fmt.Fprintf(w, "\n],\"otherData\":{\"tool\":\"sperli\",\"refused_records\":%d}}\n", t.bad)
	if err := w.Flush(); err != nil {
		tmp.Close()
		return fmt.Errorf("--trace %s: %v", t.path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("--trace %s: %v", t.path, err)
	}
	if err := os.Rename(tmp.Name(), t.path); err != nil {
		return fmt.Errorf("--trace %s: %v", t.path, unwrapPath(err))
	}
	t.events.reset()
	return nil
}

// rawArgs is args as JSON, nil for none.
func rawArgs(args map[string]any) json.RawMessage {
	if len(args) == 0 {
		return nil
	}
	b, _ := json.Marshal(args)
	return b
}

// usNumber is ns as microseconds with three decimals.
func usNumber(ns int64) json.Number {
	neg := ns < 0
	if neg {
		ns = -ns
	}
	s := fmt.Sprintf("%d.%03d", ns/1000, ns%1000)
	if neg {
		s = "-" + s
	}
	return json.Number(s)
}
