package launch

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/charmbracelet/lipgloss"
	"golang.org/x/sys/unix"

	"sperli/record"
)

// The status line of `sperli run --live` (and --status-every): what the
// job does now, in one line — the processes running, the generation, the
// rank the others wait for and the call it is in, the bytes the ranks
// have sent, the time since the launch:
//
//	sperli: 8/8 ranks running · slowest rank 3: allreduce (collective 41, waiting for rank 5) 1.2 s · 12.3 MB sent · 0:05
//
// Every refresh the launcher asks each running process for its waiting
// record (the line "waiting" on its control channel, runtime/waiting.go)
// and draws the line from the answers of the refresh before. On a
// terminal the line stays at the bottom, redrawn in place: every line
// the launcher writes on its standard output or error first erases it,
// and the line comes back under it. Elsewhere (a pipe, a file) each
// refresh is a plain line of its own, only with --status-every.

// statusEveryTerm is the refresh of the status line on a terminal when
// --status-every is not given.
const statusEveryTerm = 500 * time.Millisecond

// statusEvery is how often o's status line is refreshed, 0 for none.
func statusEvery(o Options) time.Duration {
	if o.StatusEvery > 0 {
		return o.StatusEvery
	}
	if o.Live && onTerminal(o.Stderr) {
		return statusEveryTerm
	}
	return 0
}

// statusLine draws the status line. Its mu is taken inside the launcher's
// output lock (outputs.mu) by the wrapped writers, never the other way.
type statusLine struct {
	term  bool      // in place, styled
	w     io.Writer // the launcher's standard error, unwrapped
	width func() int
	outMu sync.Locker // the launcher's output lock (outputs.mu)

	mu      sync.Mutex
	text    string // what the line says now; "" before the first refresh
	drawn   bool   // the line is on the terminal
	atStart bool   // the cursor is at the start of a line
	off     bool   // stopped: nothing is drawn any more
}

// onTerminal reports whether w is a terminal (not merely a character
// device such as /dev/null).
func onTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func newStatusLine(stderr io.Writer, term bool) *statusLine {
	s := &statusLine{term: term, w: stderr, atStart: true, width: func() int { return 0 }, outMu: &sync.Mutex{}}
	if f, ok := stderr.(*os.File); ok && term {
		s.width = func() int {
			ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
			if err != nil {
				return 0
			}
			return int(ws.Col)
		}
	}
	return s
}

// wrap returns w writing through the status line: on a terminal the line
// is erased before and drawn again after what is written.
func (s *statusLine) wrap(w io.Writer) io.Writer {
	if !s.term {
		return w
	}
	return &statusWriter{s, w}
}

type statusWriter struct {
	s *statusLine
	w io.Writer
}

func (sw *statusWriter) Write(p []byte) (int, error) {
	s := sw.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.eraseLocked()
	n, err := sw.w.Write(p)
	if len(p) > 0 {
		s.atStart = p[len(p)-1] == '\n'
	}
	s.drawLocked()
	return n, err
}

// eraseLocked takes the line off the terminal.
func (s *statusLine) eraseLocked() {
	if s.drawn {
		io.WriteString(s.w, "\r\x1b[2K")
		s.drawn = false
	}
}

// drawLocked puts the line on the terminal, cut to its width so that it
// never wraps (a wrapped line could not be erased in place).
func (s *statusLine) drawLocked() {
	if s.off || s.drawn || !s.atStart || s.text == "" {
		return
	}
	text := "sperli: " + s.text
	if w := s.width(); w > 1 && lipgloss.Width(text) > w-1 {
		r := []rune(text)
		text = string(r[:max(0, w-2)]) + "…"
	}
	io.WriteString(s.w, statusStyle.Render(text))
	s.drawn = true
}

var statusStyle = lipgloss.NewStyle().Faint(true)

// set changes what the line says: on a terminal it is redrawn, elsewhere
// written as a plain line.
func (s *statusLine) set(text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.off {
		return
	}
	s.text = text
	if !s.term {
		// Under the output lock, as every other line (never inside s.mu:
		// the wrapped writers take s.mu inside it).
		s.mu.Unlock()
		s.outMu.Lock()
		fmt.Fprintf(s.w, "sperli: status: %s\n", text)
		s.outMu.Unlock()
		s.mu.Lock()
		return
	}
	s.eraseLocked()
	s.drawLocked()
}

// clear takes the line away until the next set.
func (s *statusLine) clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.eraseLocked()
	s.text = ""
}

// stop takes the line away for good.
func (s *statusLine) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.eraseLocked()
	s.off = true
}

// jobStatus is what the status line is drawn from.
type jobStatus struct {
	running, total int
	slots          bool // a job with spares: processes are slots
	gen            int  // the last generation said, -1 for none
	inc            uint32
	waits          map[int]record.Waiting // by slot: the running processes' latest answers
	sent           int64                  // bytes sent by every process, ended ones too
	elapsed        time.Duration
}

// statusText is the status line's text for st.
func statusText(st jobStatus) string {
	unit := "ranks"
	if st.slots {
		unit = "slots"
	}
	parts := []string{fmt.Sprintf("%d/%d %s running", st.running, st.total, unit)}
	if st.gen > 0 {
		parts = append(parts, fmt.Sprintf("generation %d", st.gen))
	}
	if st.inc > 0 {
		parts = append(parts, fmt.Sprintf("incarnation %d", st.inc))
	}
	if s := slowest(st.waits); s != "" {
		parts = append(parts, s)
	}
	parts = append(parts, humanBytes(st.sent)+" sent")
	secs := int(st.elapsed.Seconds())
	parts = append(parts, fmt.Sprintf("%d:%02d", secs/60, secs%60))
	return strings.Join(parts, " · ")
}

// slowest names the rank the most others wait for and the call it is in;
// when none waits for another, the rank that waits longest; "" when no
// rank answered or every rank computes.
func slowest(waits map[int]record.Waiting) string {
	byRank := map[int]record.Waiting{}
	awaited := map[int]int{}
	var ranks []int
	for _, w := range waits {
		if w.Rank >= 0 && w.Call != "" {
			byRank[w.Rank] = w
			ranks = append(ranks, w.Rank)
		}
		if w.Call != "" && w.For >= 0 && w.For != w.Rank {
			awaited[w.For]++
		}
	}
	best, n := -1, 0
	for r, k := range awaited {
		if k > n || k == n && r < best {
			best, n = r, k
		}
	}
	if best >= 0 {
		w, ok := byRank[best]
		if !ok {
			return fmt.Sprintf("slowest rank %d: computing (%d waiting for it)", best, n)
		}
		return fmt.Sprintf("slowest rank %d: %s %.1f s", best, w.Call, float64(w.MS)/1000)
	}
	if len(ranks) == 0 {
		return ""
	}
	slices.Sort(ranks)
	long := ranks[0]
	for _, r := range ranks {
		if byRank[r].MS > byRank[long].MS {
			long = r
		}
	}
	w := byRank[long]
	return fmt.Sprintf("longest wait rank %d: %s %.1f s", long, w.Call, float64(w.MS)/1000)
}

// humanBytes is n in B, kB, MB, GB (powers of 1000, as rates are given).
func humanBytes(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d B", n)
	case n < 1000_000:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	case n < 1000_000_000:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%.1f GB", float64(n)/1e9)
}

// statusLoop refreshes the status line every d until stop is closed:
// it draws what the ranks answered last and asks them again.
func (l *launcher) statusLoop(procs []*rankProc, inc uint32, d time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(d)
	defer t.Stop()
	l.waitMu.Lock()
	l.lastWait = map[int]record.Waiting{}
	l.waitMu.Unlock()
	for {
		st := jobStatus{total: len(procs), slots: l.o.Spares > 0, gen: l.gens.last(), inc: inc, elapsed: time.Since(l.started)}
		l.waitMu.Lock()
		st.waits = make(map[int]record.Waiting, len(l.lastWait))
		for slot, w := range l.lastWait {
			st.waits[slot] = w
			st.sent += max(0, w.SentBytes)
		}
		l.waitMu.Unlock()
		for _, p := range procs {
			if p != nil && !isEnded(p) {
				st.running++
			} else if p != nil {
				delete(st.waits, p.rank)
			}
		}
		l.status.set(statusText(st))
		for _, p := range procs {
			if p != nil && !isEnded(p) {
				io.WriteString(p.stdin, "waiting\n")
			}
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}
