package runtime

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"

	"sperli/codes"
	"sperli/record"
)

// writes records every Write separately.
type writes struct {
	mu sync.Mutex
	w  [][]byte
}

func (w *writes) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.w = append(w.w, append([]byte(nil), p...))
	return len(p), nil
}

// TestTraceRecords: the records are whole JSON lines, written in batches
// of at most traceBuf bytes (one write no other writer of the pipe cuts
// into), with the call's name, times, thread and arguments; a long string
// is cut, a string that needs escaping stays JSON.
func TestTraceRecords(t *testing.T) {
	out := &writes{}
	tr := &tracer{w: out}
	long := strings.Repeat("x", 5000)
	for i := range 200 {
		sp := span{tr, traceNow()}
		sp.call("send", nil, targ("to", i%3), targ("tag", 7), tstr("what", "a \"quoted\"\nline"))
	}
	span{tr, traceNow()}.call("recv", codesErr(), tstr("long", long))
	tr.flush()
	var all bytes.Buffer
	for i, w := range out.w {
		if len(w) > traceBuf {
			t.Errorf("write %d is %d bytes, over %d", i, len(w), traceBuf)
		}
		if len(w) == 0 || w[len(w)-1] != '\n' {
			t.Errorf("write %d does not end a line", i)
		}
		all.Write(w)
	}
	lines := strings.Split(strings.TrimSuffix(all.String(), "\n"), "\n")
	if len(lines) != 201 {
		t.Fatalf("%d records, want 201", len(lines))
	}
	for i, l := range lines {
		rest, ok := strings.CutPrefix(l, record.TracePrefix)
		if !ok {
			t.Fatalf("record %d without its prefix: %q", i, l)
		}
		var e struct {
			Ph, Name string
			Ts, Dur  int64
			Tid      int
			Args     map[string]any
		}
		if err := json.Unmarshal([]byte(rest), &e); err != nil {
			t.Fatalf("record %d is not JSON: %v: %q", i, err, rest)
		}
		if e.Ph != "X" || e.Tid != record.TraceCalls || e.Ts <= 0 || e.Dur < 0 {
			t.Errorf("record %d: %+v", i, e)
		}
		if i < 200 && (e.Name != "send" || e.Args["to"] != float64(i%3) || e.Args["what"] != "a \"quoted\"\nline") {
			t.Errorf("record %d: %+v", i, e)
		}
		if i == 200 {
			if s, _ := e.Args["long"].(string); len(s) > maxTraceString+8 || !strings.Contains(s, " … ") {
				t.Errorf("the long string is %d bytes: %.60q", len(s), s)
			}
			if s, _ := e.Args["error"].(string); !strings.Contains(s, "H1617") {
				t.Errorf("the failed call's error: %q", s)
			}
		}
	}
	// Off: nothing recorded, and the zero span says so.
	if sp := (span{}); sp.on() {
		t.Error("the zero span records")
	}
}

func codesErr() error { return codes.New(codes.Finished, "recv: rank 1 has finished") }

// BenchmarkTraceCall is one traced call's record (three arguments) with
// tracing on, and what the hook costs with it off.
func BenchmarkTraceCall(b *testing.B) {
	b.Run("on", func(b *testing.B) {
		tr := &tracer{w: io.Discard}
		b.ReportAllocs()
		for b.Loop() {
			span{tr, traceNow()}.call("send", nil, targ("to", 1), targ("tag", 7), targ("bytes", 64))
		}
	})
	b.Run("off", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if sp := traceBegin(); sp.on() {
				sp.call("send", nil, targ("to", 1), targ("tag", 7), targ("bytes", 64))
			}
		}
	})
}
