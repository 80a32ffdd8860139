package tracesvg

import (
	"bytes"
	"encoding/xml"
	"html"
	"io"
	"strconv"
	"strings"
	"testing"
)

const sample = `{"traceEvents":[
{"ph":"M","name":"process_name","pid":0,"tid":0,"ts":0,"args":{"name":"launcher"}},
{"ph":"M","name":"process_name","pid":1,"tid":0,"ts":0,"args":{"name":"rank 0 (a)"}},
{"ph":"M","name":"thread_name","pid":1,"tid":1,"ts":0,"args":{"name":"calls"}},
{"ph":"M","name":"process_name","pid":2,"tid":0,"ts":0,"args":{"name":"rank 1 (b)"}},
{"ph":"X","name":"allreduce","ts":1000,"dur":500,"pid":1,"tid":1,"args":{"k":1}},
{"ph":"X","name":"wait","ts":1100,"dur":300,"pid":1,"tid":1},
{"ph":"X","name":"send","ts":2000,"dur":10,"pid":1,"tid":1},
{"ph":"X","name":"recv <&>","ts":1990,"dur":40,"pid":2,"tid":1},
{"ph":"X","name":"recovery to generation 1","ts":2500,"dur":400,"pid":2,"tid":2},
{"ph":"i","name":"slot 1 lost","ts":2450,"pid":2,"tid":2},
{"ph":"i","name":"generation 1: rank 1 lost","ts":2600,"pid":0,"tid":0,"s":"g"}
]}`

type el struct {
	name  string
	attrs map[string]string
	text  string
}

func parse(t *testing.T, b []byte) []el {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(b))
	var out []el
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("not XML: %v\n%s", err, b)
		}
		switch v := tok.(type) {
		case xml.StartElement:
			e := el{name: v.Name.Local, attrs: map[string]string{}}
			for _, a := range v.Attr {
				e.attrs[a.Name.Local] = a.Value
			}
			out = append(out, e)
		case xml.CharData:
			if len(out) > 0 {
				out[len(out)-1].text += string(v)
			}
		}
	}
}

func num(t *testing.T, s string) float64 {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return f
}

// TestRender: a box per call, coloured by kind, a nested call below its
// parent, later calls to the right, the launcher's instant as a line
// across, every name escaped.
func TestRender(t *testing.T) {
	evs, err := Read(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Render(&b, evs, Options{Title: "t"}); err != nil {
		t.Fatal(err)
	}
	els := parse(t, b.Bytes())
	if els[0].name != "svg" {
		t.Fatalf("root %q", els[0].name)
	}
	rects := map[string][]el{}
	var globals int
	for i, e := range els {
		if e.name == "rect" && e.attrs["class"] != "" {
			rects[e.attrs["class"]] = append(rects[e.attrs["class"]], e)
			if i+1 < len(els) && els[i+1].name == "title" {
				rects[e.attrs["class"]][len(rects[e.attrs["class"]])-1].text = els[i+1].text
			}
		}
		if e.name == "line" && e.attrs["class"] == "global" {
			globals++
		}
	}
	if len(rects["collective"]) != 1 || len(rects["wait"]) != 1 || len(rects["p2p"]) != 2 || len(rects["recovery"]) != 1 {
		t.Fatalf("boxes by kind: %v", rects)
	}
	coll, wait := rects["collective"][0], rects["wait"][0]
	if num(t, wait.attrs["y"]) <= num(t, coll.attrs["y"]) {
		t.Errorf("the wait inside allreduce is not below it: y %s vs %s", wait.attrs["y"], coll.attrs["y"])
	}
	if x0, x1 := num(t, coll.attrs["x"]), num(t, wait.attrs["x"]); x1 <= x0 {
		t.Errorf("the wait, 100 µs after allreduce began, is not to its right: %v vs %v", x1, x0)
	}
	if w0, w1 := num(t, coll.attrs["width"]), num(t, wait.attrs["width"]); w1 >= w0 {
		t.Errorf("the wait is not shorter than its call: %v vs %v", w1, w0)
	}
	if globals != 1 {
		t.Errorf("%d launcher lines, want 1", globals)
	}
	if !strings.Contains(b.String(), "recv &lt;&amp;&gt;") {
		t.Error("a name with <&> is not escaped")
	}
	if !strings.Contains(coll.text, "allreduce — 0.500 ms") || !strings.Contains(coll.text, "k: 1") {
		t.Errorf("the allreduce's tooltip: %q", coll.text)
	}
	// A window cuts what is outside it.
	b.Reset()
	if err := Render(&b, evs, Options{From: 1.8, To: 2.2}); err != nil {
		t.Fatal(err)
	}
	if s := b.String(); strings.Contains(s, `class="collective"`) || !strings.Contains(s, `class="p2p"`) {
		t.Errorf("the window 1.8–2.2 ms: collective drawn, or no p2p")
	}
}

func TestReadErrors(t *testing.T) {
	for _, in := range []string{``, `{`, `{"traceEvents": 5}`, `{"other": []}`, `[{"ph":"X","ts":"x"}]`} {
		if _, err := Read(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), "not a trace") {
			t.Errorf("Read(%q) = %v, want not a trace", in, err)
		}
	}
	if err := Render(io.Discard, nil, Options{}); err == nil || !strings.Contains(err.Error(), "no events") {
		t.Errorf("Render of nothing: %v", err)
	}
	if err := Render(io.Discard, []Event{{Ph: "X", Name: "a", Ts: 1, Dur: -1}}, Options{}); err == nil {
		t.Error("Render of a negative duration: no error")
	}
}

func TestCategory(t *testing.T) {
	for name, want := range map[string]string{"send": "p2p", "recv_from": "p2p", "allreduce": "collective", "checkpoint (commit)": "checkpoint",
		"recovery to generation 2": "recovery", "pid 12": "process", "agree": "ulfm", "wait": "wait", "join": "join", "mystery": "other"} {
		if got := Category(name); got != want {
			t.Errorf("Category(%q) = %q, want %q", name, got, want)
		}
	}
}

// esc escapes as html.EscapeString does, without the html package.
func TestEsc(t *testing.T) {
	for _, s := range []string{"", "plain", `<a href="x">'&'</a>`, "&amp; <<>> \"'", "ünï <ç>"} {
		if got, want := esc(s), html.EscapeString(s); got != want {
			t.Errorf("esc(%q) = %q, want %q", s, got, want)
		}
	}
}
