package launch

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeRank answers every "clock" line written to it with a clock that is
// ahead of the launcher's by skew, through trace.clockRecord.
func fakeRank(t *testing.T, tl *traceLog, p *traceProc, skew time.Duration) io.WriteCloser {
	r, w := io.Pipe()
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if sc.Text() == "clock" {
				tl.clockRecord(p, []byte(fmt.Sprintf(`{"ns":%d}`, time.Now().Add(skew).UnixNano())))
			}
		}
	}()
	t.Cleanup(func() { w.Close() })
	return w
}

// TestTraceClock: a remote process's clock offset is measured by probes
// on its control channel, within the round trip; the trace file puts its
// events on the launcher's clock, in µs since the launch; refused
// records are counted, not written.
func TestTraceClock(t *testing.T) {
	dir := t.TempDir()
	var budget atomic.Int64
	tl, err := openTrace(filepath.Join(dir, "t.json"), &budget)
	if err != nil {
		t.Fatal(err)
	}
	skew := 3 * time.Hour
	p := tl.proc(0, 1, trackName(false, 1, []role{{0, 1}}, "node1", 0), true)
	w := fakeRank(t, tl, p, skew)
	before := time.Now()
	p.probe(w, make(chan struct{}))
	rtt := time.Since(before) // the probes' round trips are within it
	if d := time.Duration(p.offset) - skew; d < -rtt || d > rtt {
		t.Fatalf("offset %v, want %v within %v", time.Duration(p.offset), skew, rtt)
	}
	// An event of the rank's at its clock's "launch + 5 ms" is at 5 ms.
	at := tl.start.Add(5 * time.Millisecond).Add(skew).UnixNano()
	tl.rankRecord(p, []byte(fmt.Sprintf(`{"ph":"X","name":"send","ts":%d,"dur":1500,"tid":1,"args":{"to":0}}`, at)))
	for _, bad := range []string{
		`{"ph":"B","name":"send","ts":1,"dur":0,"tid":1}`,  // a phase the trace does not take
		`{"ph":"X","name":"","ts":1,"dur":0,"tid":1}`,      // no name
		`{"ph":"X","name":"send","ts":1,"dur":-5,"tid":1}`, // a negative duration
		`{"ph":"X","name":"send","ts":1,"dur":0,"tid":9}`,  // a thread of no one
		`{"ph":"X","name":"send","ts":"soon","tid":1}`,     // not a number
		`not json`,
	} {
		tl.rankRecord(p, []byte(bad))
	}
	if err := tl.write(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "t.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Ph, Name string
			Ts, Dur  float64
			Pid      int
		}
		OtherData struct {
			Refused int `json:"refused_records"`
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	if doc.OtherData.Refused != 6 {
		t.Errorf("%d records refused, want 6", doc.OtherData.Refused)
	}
	var sends int
	for _, e := range doc.TraceEvents {
		if e.Ph == "M" {
			continue
		}
		if e.Name != "send" || e.Pid != p.pid {
			t.Errorf("an event that should not be there: %+v", e)
			continue
		}
		sends++
		if e.Dur != 1.5 {
			t.Errorf("dur %v µs, want 1.5", e.Dur)
		}
		if slack := rtt.Seconds() * 1e6; e.Ts < 5000-slack || e.Ts > 5000+slack {
			t.Errorf("ts %v µs, want 5000 within %v", e.Ts, slack)
		}
	}
	if sends != 1 {
		t.Errorf("%d sends in the file, want 1\n%s", sends, b)
	}
	if !strings.Contains(string(b), `"name":"process_name","ts":0,"pid":1,"tid":0,"args":{"name":"rank 1 (node1)"}`) {
		t.Errorf("no name for the rank's track:\n%s", b)
	}
}

func TestUSNumber(t *testing.T) {
	for ns, want := range map[int64]string{0: "0.000", 1: "0.001", 1500: "1.500", 12345678: "12345.678", -2500: "-2.500"} {
		if got := string(usNumber(ns)); got != want {
			t.Errorf("usNumber(%d) = %s, want %s", ns, got, want)
		}
	}
}
