package bench

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/lipgloss/table"
)

// Table renders the report for a terminal (styled when color is true).
func Table(rep *Report, color bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "machine: %s; %s\n\n", rep.Machine, rep.Placement)
	b.WriteString(render(color, []string{"pair", "64 B round trip", "× tls", "without spin", "1 MiB rate", "× tls"}, func(add func(...string)) {
		for _, p := range rep.Pairs {
			nospin := "–"
			if p.NoSpinUS > 0 {
				nospin = fmt.Sprintf("%.1f µs", p.NoSpinUS)
			}
			add(p.Name, fmt.Sprintf("%.1f µs", p.RoundTripUS), fmt.Sprintf("%.2f", p.RTRatio), nospin, fmt.Sprintf("%.0f MB/s", p.RateMBs), fmt.Sprintf("%.2f", p.RateRatio))
		}
	}))
	b.WriteString("\n")
	b.WriteString(render(color, []string{"size", "go-go round trip", "tls round trip", "go-go rate", "tls rate"}, func(add func(...string)) {
		for _, p := range rep.Sweep {
			add(sizeName(p.Size), fmt.Sprintf("%.1f µs", p.RoundTripUS), fmt.Sprintf("%.1f µs", p.TLSRTUS), fmt.Sprintf("%.0f MB/s", p.RateMBs), fmt.Sprintf("%.0f MB/s", p.TLSRateMBs))
		}
	}))
	b.WriteString("\n")
	b.WriteString(render(color, []string{"measure", "value"}, func(add func(...string)) {
		add("allreduce 16 MB, 3 ranks", fmt.Sprintf("%.1f ms", rep.AllreduceMS))
		var ns []string
		for n := range rep.JoinMS {
			ns = append(ns, n)
		}
		sort.Slice(ns, func(i, j int) bool { return len(ns[i]) < len(ns[j]) || len(ns[i]) == len(ns[j]) && ns[i] < ns[j] })
		for _, n := range ns {
			add("join of "+n+" ranks", fmt.Sprintf("%.0f ms", rep.JoinMS[n]))
		}
		add("sperli run -n 4 empty.star", fmt.Sprintf("%.0f ms", rep.EmptyRunMS))
		add("idle rank resident memory", fmt.Sprintf("%.1f MiB", rep.IdleRSSMiB))
	}))
	return b.String()
}

func render(color bool, headers []string, rows func(add func(...string))) string {
	t := table.New().Headers(headers...)
	rows(func(r ...string) { t.Row(r...) })
	if color {
		head := lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("6")).Padding(0, 1)
		cell := lipgloss.NewStyle().Padding(0, 1)
		t.Border(lipgloss.RoundedBorder()).StyleFunc(func(row, col int) lipgloss.Style {
			if row == table.HeaderRow {
				return head
			}
			return cell
		})
	} else {
		t.Border(lipgloss.NormalBorder()).StyleFunc(func(row, col int) lipgloss.Style { return lipgloss.NewStyle().Padding(0, 1) })
	}
	return t.Render() + "\n"
}

func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// Plot is an SVG of round trip and rate against message size (log scales),
// Sperli's Go-Go pair beside the bare TLS pair.
func Plot(rep *Report) []byte {
	const w, h, pad = 900, 380, 60
	panel := func(x0 int, title, unit string, get func(Point) (float64, float64)) string {
		var b strings.Builder
		pw := w/2 - pad - 20
		ph := h - 2*pad
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, p := range rep.Sweep {
			a, c := get(p)
			for _, v := range []float64{a, c} {
				if v > 0 {
					lo, hi = math.Min(lo, v), math.Max(hi, v)
				}
			}
		}
		if lo == math.Inf(1) {
			return ""
		}
		llo, lhi := math.Log10(lo)-0.1, math.Log10(hi)+0.1
		slo, shi := math.Log10(float64(rep.Sweep[0].Size)), math.Log10(float64(rep.Sweep[len(rep.Sweep)-1].Size))
		if shi == slo {
			shi = slo + 1
		}
		xy := func(size int, v float64) (float64, float64) {
			x := float64(x0+pad) + (math.Log10(float64(size))-slo)/(shi-slo)*float64(pw)
			y := float64(pad+ph) - (math.Log10(v)-llo)/(lhi-llo)*float64(ph)
			return x, y
		}
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`, x0+pad, pad, pw, ph)
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="15" text-anchor="middle">%s</text>`, x0+pad+pw/2, pad-20, title)
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="12" text-anchor="middle" transform="rotate(-90 %d %d)">%s (log)</text>`, x0+18, pad+ph/2, x0+18, pad+ph/2, unit)
		for _, p := range rep.Sweep {
			x, _ := xy(p.Size, lo)
			fmt.Fprintf(&b, `<text x="%.0f" y="%d" font-size="11" text-anchor="middle">%s</text>`, x, pad+ph+16, sizeName(p.Size))
		}
		for e := math.Ceil(llo); e <= lhi; e++ {
			_, y := xy(rep.Sweep[0].Size, math.Pow(10, e))
			fmt.Fprintf(&b, `<text x="%d" y="%.0f" font-size="11" text-anchor="end">%g</text>`, x0+pad-4, y+4, math.Pow(10, e))
		}
		for i, series := range []struct {
			color, name string
		}{{"#d62728", "sperli go-go"}, {"#1f77b4", "bare tls"}} {
			var pts []string
			for _, p := range rep.Sweep {
				a, c := get(p)
				v := a
				if i == 1 {
					v = c
				}
				if v > 0 {
					x, y := xy(p.Size, v)
					pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
				}
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`, series.color, strings.Join(pts, " "))
			fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="12" fill="%s">%s</text>`, x0+pad+10, pad+16+16*i, series.color, series.name)
		}
		return b.String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif">`, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`, w, h)
	b.WriteString(panel(0, "round trip", "µs", func(p Point) (float64, float64) { return p.RoundTripUS, p.TLSRTUS }))
	b.WriteString(panel(w/2, "one-way rate", "MB/s", func(p Point) (float64, float64) { return p.RateMBs, p.TLSRateMBs }))
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" text-anchor="middle">message size; %s</text>`, w/2, h-10, rep.Machine)
	b.WriteString("</svg>\n")
	return []byte(b.String())
}
