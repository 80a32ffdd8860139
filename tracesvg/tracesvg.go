// Package tracesvg draws a trace in the Trace Event Format (what `sperli
// run --trace` writes) as an SVG timeline: one row per process and
// thread, a box per call (nested calls, such as the waits inside a call,
// below their parent), the launcher's instants (a loss, a generation) as
// lines across every row. `sperli trace FILE` is its command.
package tracesvg

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// Event is one event of a trace; ts and dur are in microseconds.
type Event struct {
	Ph   string         `json:"ph"`
	Name string         `json:"name"`
	Ts   float64        `json:"ts"`
	Dur  float64        `json:"dur"`
	Pid  int            `json:"pid"`
	Tid  int            `json:"tid"`
	S    string         `json:"s"`
	Args map[string]any `json:"args"`
}

// MaxEvents bounds the events drawn: a bigger trace is refused with a
// word on how to cut it (Options.From, To).
const MaxEvents = 200_000

// Options choose the window and the width.
type Options struct {
	From, To float64 // ms on the trace's clock (sperli's: since the launch); 0 is its first event, its end
	Width    int     // of the plot in pixels; 0 is 1100
	Title    string
}

// Read reads a trace file: an object with "traceEvents", or a bare array.
func Read(r io.Reader) ([]Event, error) {
	dec := json.NewDecoder(r)
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("not a trace: %v", err)
	}
	var evs []Event
	if t := strings.TrimSpace(string(raw)); strings.HasPrefix(t, "[") {
		if err := json.Unmarshal(raw, &evs); err != nil {
			return nil, fmt.Errorf("not a trace: %v", err)
		}
		return evs, nil
	}
	var doc struct {
		TraceEvents *[]Event `json:"traceEvents"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("not a trace: %v", err)
	}
	if doc.TraceEvents == nil {
		return nil, fmt.Errorf("not a trace: no traceEvents")
	}
	return *doc.TraceEvents, nil
}

type trackKey struct{ pid, tid int }

type track struct {
	key   trackKey
	label string
	boxes []box
	marks []Event // instants of the track
	depth int
	y     float64 // top
}

type box struct {
	ev    Event
	depth int
}

// Layout.
const (
	labelW   = 230.0
	rowH     = 13.0
	trackGap = 6.0
	top      = 64.0
	margin   = 12.0
)

// Render draws evs as SVG on w.
func Render(w io.Writer, evs []Event, o Options) error {
	if o.Width <= 0 {
		o.Width = 1100
	}
	in, err := read(evs)
	if err != nil {
		return err
	}
	pic := in.window(o)
	order, err := pic.tracks(in)
	if err != nil {
		return err
	}
	p := &printer{w: w}
	pic.draw(p, order, in.globals, o)
	return p.err
}

// events is a trace read for drawing: its names, its spans and instants
// (by track), its global instants (the launcher's lines) and its first
// time.
type events struct {
	procName   map[int]string
	threadName map[trackKey]string
	spans      []Event
	globals    []Event
	t0         float64
}

// read sorts evs out, refusing a time that is not a number.
func read(evs []Event) (*events, error) {
	in := &events{procName: map[int]string{}, threadName: map[trackKey]string{}, t0: math.Inf(1)}
	for _, e := range evs {
		switch e.Ph {
		case "M":
			name, _ := e.Args["name"].(string)
			switch e.Name {
			case "process_name":
				in.procName[e.Pid] = name
			case "thread_name":
				in.threadName[trackKey{e.Pid, e.Tid}] = name
			}
			continue
		case "X", "i", "I":
		default:
			continue
		}
		if math.IsNaN(e.Ts) || math.IsInf(e.Ts, 0) || e.Dur < 0 || math.IsNaN(e.Dur) || math.IsInf(e.Dur, 0) {
			return nil, fmt.Errorf("event %q: bad ts or dur", e.Name)
		}
		in.t0 = min(in.t0, e.Ts)
		if e.Ph != "X" && e.S == "g" {
			in.globals = append(in.globals, e)
		} else {
			in.spans = append(in.spans, e)
		}
	}
	if len(in.spans)+len(in.globals) == 0 {
		return nil, fmt.Errorf("the trace has no events to draw")
	}
	return in, nil
}

// picture is the time window drawn.
type picture struct {
	from, to float64
}

// window is the time window of the picture: the trace's clock is the axis
// (sperli's: µs since the launch); the picture starts at the first event,
// or at From, and ends at the last one's end, or at To.
func (in *events) window(o Options) picture {
	from := in.t0
	if o.From > 0 {
		from = o.From * 1000
	}
	to := math.Inf(-1)
	for _, e := range append(in.spans, in.globals...) {
		to = max(to, e.Ts+e.Dur)
	}
	if o.To > 0 {
		to = min(to, o.To*1000)
	}
	if to <= from {
		to = from + 1
	}
	return picture{from: from, to: to}
}

func (pic picture) in(e Event) bool { return e.Ts+e.Dur >= pic.from && e.Ts <= pic.to }

// tracks puts the spans in the window on their tracks (one per process
// and thread, in that order), each call a row below the one it is inside.
func (pic picture) tracks(in *events) ([]*track, error) {
	tracks := map[trackKey]*track{}
	n := 0
	for _, e := range in.spans {
		if !pic.in(e) {
			continue
		}
		n++
		k := trackKey{e.Pid, e.Tid}
		tr := tracks[k]
		if tr == nil {
			label := in.procName[e.Pid]
			if label == "" {
				label = fmt.Sprintf("pid %d", e.Pid)
			}
			if tn := in.threadName[k]; tn != "" {
				label += " · " + tn
			} else if e.Tid != 0 {
				label += fmt.Sprintf(" · tid %d", e.Tid)
			}
			tr = &track{key: k, label: label}
			tracks[k] = tr
		}
		if e.Ph == "X" {
			tr.boxes = append(tr.boxes, box{ev: e})
		} else {
			tr.marks = append(tr.marks, e)
		}
	}
	if n > MaxEvents {
		return nil, fmt.Errorf("%d events in the window, at most %d are drawn: choose a shorter window (--from, --to)", n, MaxEvents)
	}
	order := make([]*track, 0, len(tracks))
	for _, tr := range tracks {
		order = append(order, tr)
	}
	slices.SortFunc(order, func(a, b *track) int {
		if a.key.pid != b.key.pid {
			return a.key.pid - b.key.pid
		}
		return a.key.tid - b.key.tid
	})
	for _, tr := range order {
		tr.stack()
	}
	return order, nil
}

// stack gives each box of tr its depth: a call inside another (by time)
// goes a row below it.
func (tr *track) stack() {
	slices.SortStableFunc(tr.boxes, func(a, b box) int {
		if a.ev.Ts != b.ev.Ts {
			return cmpF(a.ev.Ts, b.ev.Ts)
		}
		return cmpF(b.ev.Dur, a.ev.Dur)
	})
	var ends []float64
	for i := range tr.boxes {
		b := &tr.boxes[i]
		for len(ends) > 0 && ends[len(ends)-1] <= b.ev.Ts {
			ends = ends[:len(ends)-1]
		}
		b.depth = len(ends)
		ends = append(ends, b.ev.Ts+b.ev.Dur)
		tr.depth = max(tr.depth, b.depth+1)
	}
	tr.depth = max(tr.depth, 1)
}

// draw writes the picture of the tracks in order and the global instants
// on p.
func (pic picture) draw(p *printer, order []*track, globals []Event, o Options) {
	y := top
	for _, tr := range order {
		tr.y = y
		y += float64(tr.depth)*rowH + trackGap
	}
	plotH := y - top
	W := labelW + float64(o.Width) + margin
	from, to := pic.from, pic.to
	scale := float64(o.Width) / (to - from)
	xOf := func(ts float64) float64 { return labelW + (ts-from)*scale }

	// Legend and the launcher's lines below the plot.
	legendY := y + 22
	notesY := legendY + 26
	var notes []Event
	for _, g := range globals {
		if pic.in(g) {
			notes = append(notes, g)
		}
	}
	H := notesY + float64(len(notes))*15 + margin
	p.f(`<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="10">`+"\n", W, H, W, H)
	p.f(`<rect width="100%%" height="100%%" fill="#ffffff"/>` + "\n")
	title := o.Title
	if title == "" {
		title = "sperli trace"
	}
	p.f(`<text x="%.0f" y="18" font-size="13" font-weight="bold">%s</text>`+"\n", margin, esc(title))
	// Time axis.
	step := niceStep((to - from) / 1000 / 8) // ms
	p.f(`<g stroke="#e3e3e3">` + "\n")
	first := math.Ceil(from/1000/step) * step
	for ms := first; ms*1000 <= to; ms += step {
		x := xOf(ms * 1000)
		p.f(`<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f"/>`+"\n", x, top-6, x, top+plotH)
	}
	p.f("</g>\n")
	for ms := first; ms*1000 <= to; ms += step {
		x := xOf(ms * 1000)
		p.f(`<text x="%.1f" y="%.0f" text-anchor="middle" fill="#555">%s</text>`+"\n", x, top-10, msLabel(ms, step))
	}
	p.f(`<text x="%.0f" y="%.0f" fill="#555">ms</text>`+"\n", margin, top-10)
	// Tracks.
	for i, tr := range order {
		if i%2 == 0 {
			p.f(`<rect x="0" y="%.1f" width="%.0f" height="%.1f" fill="#f7f7f7"/>`+"\n", tr.y-trackGap/2, W, float64(tr.depth)*rowH+trackGap)
		}
		p.f(`<text x="%.0f" y="%.1f" fill="#222">%s</text>`+"\n", margin, tr.y+rowH-3, esc(cut(tr.label, 40)))
	}
	for _, tr := range order {
		p.f(`<g class="track" data-pid="%d" data-tid="%d">`+"\n", tr.key.pid, tr.key.tid)
		for _, b := range tr.boxes {
			e := b.ev
			x0, x1 := xOf(max(e.Ts, from)), xOf(min(e.Ts+e.Dur, to))
			wpx := max(x1-x0, 0.6)
			cat := Category(e.Name)
			bh := rowH - 2
			p.f(`<rect class="%s" x="%.2f" y="%.1f" width="%.2f" height="%.1f" fill="%s"><title>%s</title></rect>`+"\n",
				cat, x0, tr.y+float64(b.depth)*rowH, wpx, bh, colors[cat], esc(tooltip(e)))
			if wpx > 7*float64(len(e.Name))*0.62 && wpx > 30 {
				p.f(`<text x="%.2f" y="%.1f" fill="#fff" font-size="8.5" pointer-events="none">%s</text>`+"\n", x0+2, tr.y+float64(b.depth)*rowH+bh-2.5, esc(e.Name))
			}
		}
		for _, m := range tr.marks {
			x := xOf(m.Ts)
			yy := tr.y
			p.f(`<path class="instant" d="M%.1f %.1f l4 -6 h-8 z" transform="translate(0 %.1f)" fill="#c0392b"><title>%s</title></path>`+"\n", x, yy, rowH-2, esc(tooltip(m)))
		}
		p.f("</g>\n")
	}
	// The launcher's lines across every row, numbered; their text below.
	for i, g := range notes {
		x := xOf(g.Ts)
		p.f(`<line class="global" x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#c0392b" stroke-width="1" stroke-dasharray="3 2"><title>%s</title></line>`+"\n", x, top-4, x, top+plotH, esc(g.Name))
		p.f(`<text x="%.1f" y="%.0f" fill="#c0392b" font-weight="bold" text-anchor="middle">%d</text>`+"\n", x, top+plotH+11, i+1)
	}
	// Legend.
	x := margin
	for _, cat := range legend {
		p.f(`<rect x="%.0f" y="%.0f" width="10" height="10" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`+"\n", x, legendY-9, colors[cat], x+14, legendY, cat)
		x += 14 + float64(len(cat))*6.2 + 16
	}
	for i, g := range notes {
		p.f(`<text class="note" x="%.0f" y="%.0f" fill="#333"><tspan fill="#c0392b" font-weight="bold">%d</tspan>  %.1f ms  %s</text>`+"\n", margin, notesY+float64(i)*15, i+1, g.Ts/1000, esc(cut(g.Name, 170)))
	}
	p.f("</svg>\n")
}

// Category is the kind of call an event's name says, which gives its
// colour.
func Category(name string) string {
	base, _, _ := strings.Cut(name, " ")
	switch base {
	case "send", "recv", "recv_from", "sendrecv", "probe", "finish_send", "finish_recv":
		return "p2p"
	case "wait":
		return "wait"
	case "barrier", "bcast", "reduce", "allreduce", "gather", "scatter", "allgather", "alltoall", "reduce_scatter", "split":
		return "collective"
	case "checkpoint", "resume":
		return "checkpoint"
	case "join":
		return "join"
	case "agree", "shrink", "grow", "revoke":
		return "ulfm"
	case "recovery":
		return "recovery"
	case "pid":
		return "process"
	}
	return "other"
}

var legend = []string{"process", "join", "p2p", "collective", "wait", "checkpoint", "recovery", "ulfm", "other"}

var colors = map[string]string{
	"p2p":        "#4e79a7",
	"wait":       "#b9b1ac",
	"collective": "#59a14f",
	"checkpoint": "#9c6fa0",
	"join":       "#f28e2b",
	"ulfm":       "#d4a72c",
	"recovery":   "#e15759",
	"process":    "#cfd8dc",
	"other":      "#76b7b2",
}

func tooltip(e Event) string {
	var b strings.Builder
	b.WriteString(e.Name)
	if e.Ph == "X" {
		fmt.Fprintf(&b, " — %.3f ms", e.Dur/1000)
	}
	keys := make([]string, 0, len(e.Args))
	for k := range e.Args {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "\n%s: %v", k, e.Args[k])
	}
	return b.String()
}

// niceStep is a step of 1, 2 or 5 times a power of ten near v.
func niceStep(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func msLabel(ms, step float64) string {
	if step >= 1 {
		return fmt.Sprintf("%.0f", ms)
	}
	d := int(math.Ceil(-math.Log10(step)))
	return fmt.Sprintf("%.*f", d, ms)
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// escaper is html.EscapeString's replacements. The html package is not
// imported: its init builds a table of every named entity, about 1.5 ms of
// every process's start, and every rank process is this binary
// (docs/scale.md).
var escaper = strings.NewReplacer(`&`, "&amp;", `'`, "&#39;", `<`, "&lt;", `>`, "&gt;", `"`, "&#34;")

func esc(s string) string { return escaper.Replace(s) }

type printer struct {
	w   io.Writer
	err error
}

func (p *printer) f(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}
