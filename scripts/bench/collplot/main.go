// Command collplot turns the sweep of scripts/bench/collectives.sh into an
// SVG plot and a Markdown table:
//
//	collplot -svg docs/collectives.svg -machine "2 cores, ..." < sweep.tsv
//
// (-y names what the times are in the caption, -sperli Sperli's line in the
// legend: docs/scale.svg plots whole jobs' wall times with them.)
//
// Its input has one measurement a line, fields separated by tabs:
//
//	OP  BYTES  RANKS  OPEN_MPI_US  SPERLI_US
//
// (per-call microseconds). The plot has one panel per OP and BYTES, per-call
// time against rank count on log scales, Sperli beside Open MPI, drawn as
// bench/report.go draws `sperli bench --plot`. The table, on standard
// output, has a row per OP and BYTES and a column per rank count, each cell
// "Sperli / Open MPI (ratio)".
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
)

type point struct {
	ranks       int
	mpi, sperli float64
}

type series struct {
	op     string
	bytes  int
	points []point
}

func main() {
	svg := flag.String("svg", "", "write the plot to this file")
	machine := flag.String("machine", "", "the machine, for the plot's caption")
	flag.StringVar(&yLabel, "y", yLabel, "what the times are, for the plot's caption")
	flag.StringVar(&sperliLabel, "sperli", sperliLabel, "Sperli's name in the legend")
	flag.Parse()
	if flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: collplot [-svg FILE] [-machine TEXT] < sweep.tsv")
		os.Exit(2)
	}
	ss, err := read(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "collplot:", err)
		os.Exit(1)
	}
	os.Stdout.WriteString(markdown(ss))
	if *svg != "" {
		if err := os.WriteFile(*svg, plot(ss, *machine), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "collplot:", err)
			os.Exit(1)
		}
	}
}

// read parses the sweep, keeping the order in which the series first come.
func read(r io.Reader) ([]*series, error) {
	var ss []*series
	at := map[string]*series{}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 5 {
			return nil, fmt.Errorf("line %d: %d fields, want 5 (OP BYTES RANKS OPEN_MPI_US SPERLI_US)", line, len(f))
		}
		bytes, err1 := strconv.Atoi(f[1])
		ranks, err2 := strconv.Atoi(f[2])
		mpi, err3 := strconv.ParseFloat(f[3], 64)
		sp, err4 := strconv.ParseFloat(f[4], 64)
		if err1 != nil || err2 != nil || err3 != nil || err4 != nil || bytes < 0 || ranks < 1 || !(mpi > 0) || !(sp > 0) {
			return nil, fmt.Errorf("line %d: %q is not OP, bytes ≥ 0, ranks ≥ 1 and two positive times", line, sc.Text())
		}
		key := f[0] + "/" + f[1]
		s := at[key]
		if s == nil {
			s = &series{op: f[0], bytes: bytes}
			at[key] = s
			ss = append(ss, s)
		}
		s.points = append(s.points, point{ranks, mpi, sp})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(ss) == 0 {
		return nil, fmt.Errorf("no measurement in the input")
	}
	for _, s := range ss {
		sort.Slice(s.points, func(i, j int) bool { return s.points[i].ranks < s.points[j].ranks })
	}
	return ss, nil
}

func sizeName(n int) string {
	switch {
	case n == 0:
		return ""
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1000000 && n%1000000 == 0:
		return fmt.Sprintf("%d MB", n/1000000)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

func us(v float64) string {
	switch {
	case v >= 10000:
		return fmt.Sprintf("%.1f ms", v/1000)
	case v >= 1000:
		return fmt.Sprintf("%.2f ms", v/1000)
	}
	return fmt.Sprintf("%.0f µs", v)
}

func markdown(ss []*series) string {
	rankSet := map[int]bool{}
	for _, s := range ss {
		for _, p := range s.points {
			rankSet[p.ranks] = true
		}
	}
	var ranks []int
	for r := range rankSet {
		ranks = append(ranks, r)
	}
	sort.Ints(ranks)
	var b strings.Builder
	b.WriteString("| per call: Sperli / Open MPI (ratio) |")
	for _, r := range ranks {
		fmt.Fprintf(&b, " %d ranks |", r)
	}
	b.WriteString("\n| --- |" + strings.Repeat(" --- |", len(ranks)) + "\n")
	for _, s := range ss {
		fmt.Fprintf(&b, "| %s |", strings.TrimSpace(s.op+" "+sizeName(s.bytes)))
		for _, r := range ranks {
			cell := " – |"
			for _, p := range s.points {
				if p.ranks == r {
					cell = fmt.Sprintf(" %s / %s (%.2f) |", us(p.sperli), us(p.mpi), p.sperli/p.mpi)
				}
			}
			b.WriteString(cell)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// plot draws a grid of panels, one per series, log-log.
// The plot's caption for the times, and Sperli's name in its legend
// (flags -y and -sperli).
var (
	yLabel      = "per-call time (µs, log)"
	sperliLabel = "Sperli (Go ranks, TLS 1.3)"
)

func plot(ss []*series, machine string) []byte {
	const pw, ph, padL, padT, padB, gap = 200, 170, 55, 40, 30, 20
	cols := min(5, len(ss))
	rows := (len(ss) + cols - 1) / cols
	w := max(cols*(padL+pw+gap)+gap, 620)
	h := rows*(padT+ph+padB) + 60
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif">`, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`, w, h)
	for i, s := range ss {
		x0 := gap + (i%cols)*(padL+pw+gap) + padL
		y0 := 20 + (i/cols)*(padT+ph+padB) + padT
		b.WriteString(panel(s, x0, y0, pw, ph))
	}
	legend := []struct{ color, name string }{{"#d62728", sperliLabel}, {"#1f77b4", "Open MPI (TCP)"}}
	for i, l := range legend {
		x := gap + padL + i*260
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>`, x, h-30, x+24, h-30, l.color)
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="12" fill="%s">%s</text>`, x+30, h-26, l.color, l.name)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" text-anchor="middle">%s against ranks (log); %s</text>`, w/2, h-8, escape(yLabel), escape(machine))
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

func panel(s *series, x0, y0, pw, ph int) string {
	var b strings.Builder
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range s.points {
		lo, hi = math.Min(lo, math.Min(p.mpi, p.sperli)), math.Max(hi, math.Max(p.mpi, p.sperli))
	}
	llo, lhi := math.Log10(lo)-0.1, math.Log10(hi)+0.1
	rlo, rhi := math.Log2(float64(s.points[0].ranks)), math.Log2(float64(s.points[len(s.points)-1].ranks))
	if rhi == rlo {
		rhi = rlo + 1
	}
	xy := func(ranks int, v float64) (float64, float64) {
		x := float64(x0) + (math.Log2(float64(ranks))-rlo)/(rhi-rlo)*float64(pw)
		y := float64(y0+ph) - (math.Log10(v)-llo)/(lhi-llo)*float64(ph)
		return x, y
	}
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`, x0, y0, pw, ph)
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="13" text-anchor="middle">%s</text>`, x0+pw/2, y0-8, escape(strings.TrimSpace(s.op+" "+sizeName(s.bytes))))
	for _, p := range s.points {
		x, _ := xy(p.ranks, lo)
		fmt.Fprintf(&b, `<text x="%.0f" y="%d" font-size="11" text-anchor="middle">%d</text>`, x, y0+ph+14, p.ranks)
	}
	// Decade ticks; with fewer than two decades in range, ticks at 1, 2 and 5 too.
	steps := []float64{1}
	if lhi-llo < 2 {
		steps = []float64{1, 2, 5}
	}
	for e := math.Floor(llo); e <= lhi; e++ {
		for _, m := range steps {
			v := m * math.Pow(10, e)
			if lv := math.Log10(v); lv < llo || lv > lhi {
				continue
			}
			_, y := xy(s.points[0].ranks, v)
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>`, x0, y, x0+pw, y)
			fmt.Fprintf(&b, `<text x="%d" y="%.0f" font-size="10" text-anchor="end">%g</text>`, x0-4, y+4, v)
		}
	}
	for i, color := range []string{"#d62728", "#1f77b4"} {
		var pts []string
		for _, p := range s.points {
			v := p.sperli
			if i == 1 {
				v = p.mpi
			}
			x, y := xy(p.ranks, v)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>`, x, y, color)
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`, color, strings.Join(pts, " "))
	}
	return b.String()
}

func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
