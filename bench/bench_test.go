package bench

import (
	"encoding/xml"
	"strings"
	"testing"
)

// TestParseArgs: a rank's arguments are MODE SIZE COUNT.
func TestParseArgs(t *testing.T) {
	if m, s, c, err := parseArgs([]string{"stream", "1048576", "32"}); err != nil || m != "stream" || s != 1<<20 || c != 32 {
		t.Errorf("parseArgs = %q %d %d %v", m, s, c, err)
	}
	for _, bad := range [][]string{nil, {"stream", "x", "1"}, {"stream", "1"}} {
		if _, _, _, err := parseArgs(bad); err == nil {
			t.Errorf("parseArgs(%q) = nil error", bad)
		}
	}
}

// TestReport: the table names every pair and measure, and the plot is
// well-formed SVG with one polyline per series and panel.
func TestReport(t *testing.T) {
	rep := &Report{
		Machine:   "test machine",
		Placement: "ranks pinned somehow",
		Pairs:     []Pair{{Name: "tls (ceiling)", RoundTripUS: 20, RateMBs: 800, RTRatio: 1, RateRatio: 1}, {Name: "go-go", RoundTripUS: 25, NoSpinUS: 61.5, RateMBs: 700, RTRatio: 1.25, RateRatio: 0.875}},
		Sweep:     []Point{{Size: 64, RoundTripUS: 25, RateMBs: 3, TLSRTUS: 20, TLSRateMBs: 4}, {Size: 1 << 20, RoundTripUS: 2500, RateMBs: 700, TLSRTUS: 2000, TLSRateMBs: 800}},
		JoinMS:    map[string]float64{"2": 10, "32": 400, "8": 60},
	}
	tab := Table(rep, false)
	for _, want := range []string{"go-go", "25.0 µs", "1.25", "0.88", "1 MiB", "join of 8 ranks", "join of 32 ranks", "test machine", "ranks pinned somehow", "61.5 µs"} {
		if !strings.Contains(tab, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}
	if strings.Index(tab, "join of 8") > strings.Index(tab, "join of 32") {
		t.Errorf("join sizes out of order:\n%s", tab)
	}
	svg := Plot(rep)
	var doc struct {
		Lines []struct{} `xml:"polyline"`
	}
	if err := xml.Unmarshal(svg, &doc); err != nil {
		t.Fatalf("plot is not XML: %v", err)
	}
	if len(doc.Lines) != 4 {
		t.Errorf("plot has %d polylines, want 4 (2 series × 2 panels)", len(doc.Lines))
	}
}
