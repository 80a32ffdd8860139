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
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"sperli/codes"
	"sperli/record"
)

// The launcher's rank output (SPEC §2). Every rank has two streams, its
// standard output and its standard error. A stream splits what the rank
// writes into lines and sends each line where it belongs:
//
//   - by default into a spool, shown when the ranks have ended, slot by
//     slot, prefixed "[rank i] " (roles.go: "[rank 2 · slot 8] " in a job
//     with spares);
//   - with --live to the launcher's own stream as soon as the line is
//     whole (a line is never cut in two nor mixed with another);
//   - with --output-dir appended to DIR/rank-i.out or rank-i.err.
//
// On standard error two kinds of line are the launcher's, not the user's:
// the status record (record.StatusPrefix) and the lines of the error
// the rank ended with (record.ErrorPrefix). The record is parsed and not
// shown; the error lines are kept until the record says what ended the
// rank, then shown, except the H1612 of a rank ended by another one unless
// -v is given: the launcher's last line names that cause once.
//
// Memory is bounded: a spool keeps spoolMem bytes in memory and the rest
// in a temporary file, unlinked as soon as it is made, so it is gone when
// the launcher ends whatever way it ends.

// spoolMem is how much of a spool stays in memory, and memBudget how
// much all the spools of a launcher keep in memory together (a job of
// thousands of ranks spills sooner).
const (
	spoolMem  = 64 << 10
	memBudget = 8 << 20
)

// spool is a byte buffer that spills to an unlinked temporary file.
type spool struct {
	mem    []byte
	file   *os.File
	size   int64
	err    error         // the first failure to spill: output was lost
	budget *atomic.Int64 // the memory the spools hold together; nil is none
}

// fits reports whether n more bytes may stay in memory, and takes them
// from the budget.
func (s *spool) fits(n int) bool {
	if len(s.mem)+n > spoolMem {
		return false
	}
	if s.budget == nil {
		return true
	}
	if s.budget.Add(int64(n)) > memBudget {
		s.budget.Add(-int64(n))
		return false
	}
	return true
}

func (s *spool) Write(p []byte) (int, error) {
	n := len(p)
	if s.err != nil {
		return n, nil
	}
	if s.file == nil && s.fits(n) {
		s.mem = append(s.mem, p...)
		s.size += int64(n)
		return n, nil
	}
	if s.file == nil {
		f, err := os.CreateTemp("", "sperli-output-")
		if err != nil {
			s.err = err
			return n, nil
		}
		os.Remove(f.Name())
		if _, err := f.Write(s.mem); err != nil {
			f.Close()
			s.err = err
			return n, nil
		}
		s.release()
		s.file, s.mem = f, nil
	}
	if _, err := s.file.Write(p); err != nil {
		s.err = err
		return n, nil
	}
	s.size += int64(n)
	return n, nil
}

// reader returns the spool's content from its start.
func (s *spool) reader() io.Reader {
	if s.file == nil {
		return bytes.NewReader(s.mem)
	}
	return io.NewSectionReader(s.file, 0, s.size)
}

// reset empties the spool and removes its file.
func (s *spool) reset() {
	if s.file != nil {
		s.file.Close()
		s.file = nil
	}
	s.release()
	s.mem, s.size = s.mem[:0], 0
}

// release gives the spool's memory back to the budget.
func (s *spool) release() {
	if s.budget != nil && s.file == nil {
		s.budget.Add(-int64(len(s.mem)))
	}
}

func (s *spool) Len() int64 { return s.size }

// outputs is what every stream of a job shares: where lines go.
type outputs struct {
	mu       sync.Mutex // one line at a time on the launcher's streams
	stdout   io.Writer
	stderr   io.Writer
	color    bool
	slots    bool // a job with spares: lines name the slot too (roles.go)
	live     bool
	verbose  bool
	dir      string // --output-dir
	lostErrs []string
	lineBuf  []byte       // --live: the line being written, under mu
	memUsed  atomic.Int64 // what the spools hold in memory together
	ending   atomic.Bool  // the launcher is ending the job itself
	// onWaiting receives a rank's waiting record (runtime/waiting.go).
	onWaiting func(rank int, w record.Waiting)
	// onGen receives a slot's generation report (runtime/recover.go); it
	// returns the generation the slot entered and the rank it serves there
	// (-1 a spare), or -1 and -1.
	onGen func(slot int, line []byte) (gen, rank int)
	// trace is the --trace log, nil when none.
	trace *traceLog
}

// stream is one slot's standard output or standard error in one
// incarnation.
type stream struct {
	o      *outputs
	rank   int // the slot
	isErr  bool
	gen    uint32
	prefix string // --live: of the line being read
	// roles is what the slot served (shared with its other stream); cur
	// is the index of the role the line being shown is labelled by, segs
	// where in all the lines of each later one begin, mid whether a shown
	// line has begun.
	roles *slotRoles
	cur   int
	segs  []segment
	mid   bool

	mu     sync.Mutex
	kind   lineKind
	head   []byte // the first bytes of a line not yet classified
	line   spool  // --live: the line being read
	all    spool  // the default: every shown line, raw
	errs   spool  // the rank's error lines, without their marker
	record spool  // the status record being read
	wait   []byte // the waiting record being read
	file   *os.File
	key    []byte     // the MAC key of the rank's sealed records (record.Key)
	tp     *traceProc // --trace: the process's track
	status *record.Status
	wrote  bool // a line was shown
	cut    bool // the record being read was longer than its bound
	closed bool
}

// segment is where, in a stream's spool of shown lines, the lines of
// the slot's role roles[idx] begin.
type segment struct {
	off int64
	idx int
}

type lineKind int

const (
	lineUnknown lineKind = iota
	lineShown
	lineStatus
	lineError
	lineWaiting
	lineGen
	lineMark  // the rank's own "generation g begins" on standard output
	lineTrace // a trace record (runtime/trace.go)
	lineClock // a clock record
)

// maxWaiting bounds a waiting record (and a trace or clock record).
const maxWaiting = 4 << 10

// maxGenLine bounds a generation report or mark: a layout of 4096 slots
// is some 40 kB of JSON.
const maxGenLine = 256 << 10

// maxRecord is the largest status record parsed whole; a larger one is
// read from its head (its small fields come first).
const maxRecord = 1 << 20

// newStream makes slot's stream; roles is what the slot serves, nil for
// rank slot from generation gen.
func newStream(o *outputs, slot int, isErr bool, gen uint32, file *os.File, roles *slotRoles) *stream {
	if roles == nil {
		roles = newSlotRoles(int(gen), slot)
	}
	cur, ro := roles.latest()
	s := &stream{o: o, rank: slot, isErr: isErr, gen: gen, roles: roles, cur: cur, prefix: o.prefix(slot, ro), file: file}
	for _, sp := range []*spool{&s.line, &s.all, &s.errs, &s.record} {
		sp.budget = &o.memUsed
	}
	return s
}

// setKey sets the MAC key of the rank's sealed records, which the rank
// learns from its description (it writes none before).
func (s *stream) setKey(key []byte) {
	s.mu.Lock()
	s.key = key
	s.mu.Unlock()
}

// Write takes what the rank wrote; it never fails (a rank is never
// blocked or ended because of its output).
func (s *stream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		if s.kind == lineUnknown {
			p = s.classify(p)
			if s.kind == lineUnknown {
				continue // a line of one line end, or p used up
			}
		}
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i+1]
		}
		p = p[len(chunk):]
		s.add(chunk)
		if i >= 0 {
			s.endLine()
		}
	}
	return n, nil
}

// classify reads the first bytes of a line until it knows its kind.
func (s *stream) classify(p []byte) []byte {
	prefixes := []string{record.StatusPrefix, record.ErrorPrefix, record.WaitingPrefix, record.GenPrefix, record.TracePrefix, record.ClockPrefix}
	kinds := []lineKind{lineStatus, lineError, lineWaiting, lineGen, lineTrace, lineClock}
	if !s.isErr {
		prefixes, kinds = []string{record.MarkPrefix}, []lineKind{lineMark}
	}
	for len(p) > 0 {
		s.head = append(s.head, p[0])
		p = p[1:]
		maybe := false
		for k, pre := range prefixes {
			if string(s.head) == pre {
				s.kind = kinds[k]
				s.head = s.head[:0]
				return p
			}
			if strings.HasPrefix(pre, string(s.head)) {
				maybe = true
			}
		}
		if !maybe || s.head[len(s.head)-1] == '\n' {
			break
		}
		if len(p) == 0 {
			return p // more to come
		}
	}
	// A shown line: its first bytes are content.
	s.kind = lineShown
	var hb [32]byte
	h := append(hb[:0], s.head...)
	s.head = s.head[:0]
	s.add(h)
	if h[len(h)-1] == '\n' {
		s.endLine()
	}
	return p
}

// add appends part of the current line.
func (s *stream) add(b []byte) {
	if len(b) == 0 {
		return
	}
	switch s.kind {
	case lineStatus:
		s.record.Write(b)
	case lineError:
		s.errs.Write(b)
	case lineWaiting, lineGen, lineMark, lineTrace, lineClock:
		limit := maxWaiting
		if s.kind == lineGen || s.kind == lineMark {
			limit = maxGenLine
		}
		if len(s.wait)+len(b) <= limit {
			s.wait = append(s.wait, b...)
		} else {
			s.cut = true
		}
	default:
		s.show(b)
	}
}

// show sends part of a shown line where shown lines go.
func (s *stream) show(b []byte) {
	if !s.mid {
		s.lineBegins()
	}
	s.mid = b[len(b)-1] != '\n'
	s.wrote = true
	switch {
	case s.file != nil:
		s.file.Write(b)
	case s.o.live:
		s.line.Write(b)
	default:
		s.all.Write(b)
	}
}

// lineBegins labels the shown line that begins by the slot's newest
// role, if that changed since the line before: with --live its prefix,
// with --output-dir a line in the file that names the role, by default a
// segment of the spool.
func (s *stream) lineBegins() {
	i, ro := s.roles.latest()
	if i == s.cur {
		return
	}
	s.cur = i
	switch {
	case s.file != nil:
		fmt.Fprintf(s.file, "--- generation %d%s\n", ro.gen, s.o.fileLabel(s.rank, ro))
	case s.o.live:
		s.prefix = s.o.prefix(s.rank, ro)
	default:
		s.segs = append(s.segs, segment{s.all.Len(), i})
	}
}

// fileLabel is what a --output-dir file's generation line says of the
// role ro of slot: nothing for the seed's rank i of slot i, else
// " · rank 2 · slot 8".
func (o *outputs) fileLabel(slot int, ro role) string {
	if plainLabel(o.slots, slot, ro) {
		return ""
	}
	return " · " + label(o.slots, slot, ro)
}

// writeAll writes every shown line of s to w, each prefixed by the role
// the slot served when it came: on standard error, which carries the
// slot's reports in order with its lines, the role known then; on
// standard output as slotRoles.shown says.
func (s *stream) writeAll(w *bufio.Writer) {
	role := s.roles.shown
	if s.isErr {
		role = s.roles.at
	}
	bounds := make([]prefixFrom, 0, len(s.segs)+1)
	bounds = append(bounds, prefixFrom{0, s.o.prefix(s.rank, role(0))})
	for _, g := range s.segs {
		bounds = append(bounds, prefixFrom{g.off, s.o.prefix(s.rank, role(g.idx))})
	}
	writeSpool(w, bounds, &s.all)
}

// markLocked puts the line that says the slot entered generation gen
// (protocol.md §12) among the standard error lines, where the report came:
// what came before it is of an earlier generation. (Standard output gets
// its line from the rank itself, record.MarkPrefix, in order with its
// output.)
func (s *stream) markLocked(gen int) {
	if !s.wrote {
		return // nothing of an earlier generation to tell apart
	}
	text := fmt.Sprintf("--- generation %d ---\n", gen)
	if s.file != nil {
		// The line names the role, so no other line for it follows.
		i, ro := s.roles.latest()
		s.cur = i
		text = fmt.Sprintf("--- generation %d%s\n", gen, s.o.fileLabel(s.rank, ro))
	}
	s.show([]byte(text))
	if s.o.live && s.file == nil {
		s.o.writeLine(s.dest(), s.prefix, &s.line)
		s.line.reset()
	}
}

// endLine ends the current line.
func (s *stream) endLine() {
	switch s.kind {
	case lineStatus:
		if st, ok := parseRecord(&s.record); ok {
			s.status = &st
		}
		s.record.reset()
		s.flushErrors()
	case lineError:
	case lineWaiting:
		if w, ok := record.ParseWaiting(record.WaitingPrefix + string(s.wait)); ok && s.o.onWaiting != nil {
			s.o.onWaiting(s.rank, w)
		}
		s.wait = s.wait[:0]
	case lineTrace, lineClock:
		if s.tp != nil && s.o.trace != nil {
			if s.kind == lineTrace {
				s.o.trace.rankRecord(s.tp, bytes.TrimSpace(s.wait))
			} else {
				s.o.trace.clockRecord(s.tp, bytes.TrimSpace(s.wait))
			}
		}
		s.wait = s.wait[:0]
	case lineMark, lineGen:
		prefix := record.MarkPrefix
		if s.kind == lineGen {
			prefix = record.GenPrefix
		}
		body, ok := record.Open(s.key, prefix, strings.TrimRight(string(s.wait), "\r\n"))
		switch {
		case !ok || s.cut:
			// Not the runtime's record (its MAC does not hold): a line
			// of the program that starts like one, shown as written.
			s.kind = lineShown
			s.add([]byte(prefix))
			s.add(s.wait)
			if !bytes.HasSuffix(s.wait, []byte("\n")) {
				s.add([]byte("\n")) // cut short, or the last line without its end
			}
			s.wait, s.cut = s.wait[:0], false
			s.endLine()
			return
		case s.kind == lineMark:
			if g, err := strconv.Atoi(body); err == nil && g >= 0 {
				s.markLocked(g)
			}
		case s.o.onGen != nil:
			if g, rank := s.o.onGen(s.rank, []byte(body)); g >= 0 {
				s.roles.add(g, rank)
				s.markLocked(g)
			}
		}
		s.wait = s.wait[:0]
	default:
		if s.o.live && s.file == nil {
			s.o.writeLine(s.dest(), s.prefix, &s.line)
			s.line.reset()
		}
	}
	s.kind = lineUnknown
}

func (s *stream) dest() io.Writer {
	if s.isErr {
		return s.o.stderr
	}
	return s.o.stdout
}

// flushErrors shows the error lines the rank ended with, unless they are
// the H1612 of a rank ended by another (shown only with -v).
func (s *stream) flushErrors() {
	if s.errs.Len() == 0 {
		return
	}
	// Hidden without -v: the H1612 of a rank ended by another, and the
	// errors of ranks that saw their peers go as the launcher ended the job.
	hide := s.file == nil && !s.o.verbose && (s.o.ending.Load() || s.status != nil && s.status.Code == codes.JobEnded.String())
	if !hide {
		// Each line as a shown line.
		r := bufio.NewReaderSize(s.errs.reader(), 32<<10)
		for {
			b, err := r.ReadSlice('\n')
			if len(b) > 0 {
				s.kind = lineShown
				s.show(b)
				if b[len(b)-1] == '\n' {
					s.endLine()
				}
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			if err != nil {
				break
			}
		}
		if s.kind == lineShown {
			s.show([]byte{'\n'})
			s.endLine()
		}
	}
	s.errs.reset()
}

// close ends the stream when the rank has ended: a last line without its
// line end is ended, error lines without a record are shown.
func (s *stream) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	if s.kind == lineUnknown && len(s.head) > 0 {
		s.kind = lineShown
		h := append([]byte(nil), s.head...)
		s.head = s.head[:0]
		s.add(h)
	}
	switch s.kind {
	case lineShown:
		s.show([]byte{'\n'})
		s.endLine()
	case lineError:
		s.errs.Write([]byte{'\n'})
		s.kind = lineUnknown
	case lineStatus, lineGen, lineMark:
		s.endLine()
	}
	s.flushErrors()
}

// release frees the stream's spools.
func (s *stream) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.all.reset()
	s.line.reset()
	s.errs.reset()
	s.record.reset()
}

// writeLine writes one whole line with its prefix to w, alone.
func (o *outputs) writeLine(w io.Writer, prefix string, line *spool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if line.file == nil {
		b := append(append(o.lineBuf[:0], prefix...), line.mem...)
		if len(b) == 0 || b[len(b)-1] != '\n' {
			b = append(b, '\n')
		}
		w.Write(b)
		if cap(b) <= spoolMem+1024 {
			o.lineBuf = b[:0] // kept for the next line: no garbage per line
		}
		return
	}
	bw := bufio.NewWriterSize(w, 32<<10)
	bw.WriteString(prefix)
	io.Copy(bw, line.reader())
	bw.Flush()
}

// prefixFrom is the prefix of the lines of a spool from offset off on.
type prefixFrom struct {
	off    int64
	prefix string
}

// writeSpool writes every line of sp to w, each prefixed by the prefix of
// the last of bounds (sorted, the first at 0) that begins at or before it.
func writeSpool(w *bufio.Writer, bounds []prefixFrom, sp *spool) {
	r := bufio.NewReaderSize(sp.reader(), 32<<10)
	start := true
	var off int64
	k := 0
	for {
		b, err := r.ReadSlice('\n')
		if len(b) > 0 {
			if start {
				for k+1 < len(bounds) && bounds[k+1].off <= off {
					k++
				}
				w.WriteString(bounds[k].prefix)
			}
			w.Write(b)
			off += int64(len(b))
			start = b[len(b)-1] == '\n'
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			break
		}
	}
	if !start {
		w.WriteByte('\n')
	}
}

// parseRecord reads a status record (without its prefix). A record of
// any size is read: one over maxRecord from its head, where the small
// fields come first, its message cut.
func parseRecord(sp *spool) (record.Status, bool) {
	if sp.Len() <= maxRecord {
		b, _ := io.ReadAll(sp.reader())
		return record.ParseStatus(record.StatusPrefix + string(b))
	}
	head := make([]byte, maxRecord)
	n, _ := io.ReadFull(sp.reader(), head)
	head = head[:n]
	const key = `,"msg":"`
	i := bytes.Index(head, []byte(key))
	if i < 0 {
		return record.Status{}, false
	}
	var st record.Status
	if err := json.Unmarshal(append(head[:i:i], '}'), &st); err != nil {
		return record.Status{}, false
	}
	msg := head[i+len(key):]
	msg = msg[:min(len(msg), 64<<10)]
	// Drop a cut escape at the end.
	if j := bytes.LastIndexByte(msg, '\\'); j >= 0 && j >= len(msg)-6 {
		msg = msg[:j]
	}
	var m string
	if json.Unmarshal(append(append([]byte{'"'}, msg...), '"'), &m) == nil {
		st.Msg = m + "…"
	}
	return st, true
}

// openOutputFile opens DIR/rank-i.out or rank-i.err for appending, emptied
// first when truncate (--output-mode overwrite); a symbolic link is refused.
func openOutputFile(dir string, rank int, ext string, truncate bool) (*os.File, error) {
	path := filepath.Join(dir, fmt.Sprintf("rank-%d.%s", rank, ext))
	flags := os.O_WRONLY | os.O_APPEND | os.O_CREATE | syscall.O_NOFOLLOW
	if truncate {
		flags |= os.O_TRUNC
	}
	return os.OpenFile(path, flags, 0o644)
}
