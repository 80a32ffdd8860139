package main

import (
	"encoding/xml"
	"strings"
	"testing"
)

const sweep = "barrier\t0\t4\t60\t250\nbarrier\t0\t2\t30\t100\nbcast\t1048576\t2\t300\t1200\n"

func TestReadGroupsAndSorts(t *testing.T) {
	ss, err := read(strings.NewReader(sweep))
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 2 || ss[0].op != "barrier" || ss[1].op != "bcast" || ss[1].bytes != 1048576 {
		t.Fatalf("series %+v, want barrier then bcast 1048576", ss)
	}
	if p := ss[0].points; len(p) != 2 || p[0].ranks != 2 || p[1].ranks != 4 || p[0].sperli != 100 || p[1].mpi != 60 {
		t.Fatalf("barrier points %+v, want ranks 2 (100 µs Sperli) then 4 (60 µs Open MPI)", p)
	}
}

func TestReadRejectsBadLines(t *testing.T) {
	for _, in := range []string{
		"",
		"barrier\t0\t2\t30\n",
		"barrier\t0\ttwo\t30\t100\n",
		"barrier\t0\t2\t0\t100\n",
		"barrier\t-1\t2\t30\t100\n",
		"barrier\t0\t2\t30\tNaN\n",
	} {
		if _, err := read(strings.NewReader(in)); err == nil {
			t.Errorf("read(%q) gave no error", in)
		}
	}
}

func TestMarkdownAndPlot(t *testing.T) {
	ss, err := read(strings.NewReader(sweep))
	if err != nil {
		t.Fatal(err)
	}
	md := markdown(ss)
	for _, want := range []string{"| 2 ranks | 4 ranks |", "| barrier | 100 µs / 30 µs (3.33) | 250 µs / 60 µs (4.17) |", "| bcast 1 MiB | 1.20 ms / 300 µs (4.00) | – |"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	svg := plot(ss, `2 cores & "load"`)
	d := xml.NewDecoder(strings.NewReader(string(svg)))
	polylines := 0
	for {
		tok, err := d.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("the plot is no well-formed XML: %v", err)
			}
			break
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			polylines++
		}
	}
	if polylines != 4 {
		t.Errorf("%d polylines, want 4 (two systems × two panels)", polylines)
	}
}
