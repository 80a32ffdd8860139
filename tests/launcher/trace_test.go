package launcher

import (
	"bufio"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sperli/tests/internal/testbin"
)

// traceFile is a --trace file as the test reads it.
type traceFile struct {
	TraceEvents []traceEv `json:"traceEvents"`
}

type traceEv struct {
	Ph   string          `json:"ph"`
	Name string          `json:"name"`
	Ts   *float64        `json:"ts"`
	Dur  *float64        `json:"dur"`
	Pid  *int            `json:"pid"`
	Tid  *int            `json:"tid"`
	S    string          `json:"s"`
	Args json.RawMessage `json:"args"`
}

func (e traceEv) end() float64 { return *e.Ts + *e.Dur }

// readTrace reads and checks the structure every --trace file has: the
// Trace Event Format's object, each event with its fields, a name for
// every process, the launcher's as pid 0. It returns the events by pid.
func readTrace(t *testing.T, path string) (map[int][]traceEv, map[int]string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tf traceFile
	if err := json.Unmarshal(b, &tf); err != nil {
		t.Fatalf("%s is not a trace: %v\n%s", path, err, b)
	}
	byPid := map[int][]traceEv{}
	names := map[int]string{}
	for i, e := range tf.TraceEvents {
		if e.Pid == nil || e.Tid == nil || e.Ts == nil || e.Name == "" {
			t.Fatalf("event %d lacks pid, tid, ts or name: %+v", i, e)
		}
		switch e.Ph {
		case "M":
			if e.Name == "process_name" {
				var a struct{ Name string }
				json.Unmarshal(e.Args, &a)
				names[*e.Pid] = a.Name
			}
			continue
		case "X":
			if e.Dur == nil || *e.Dur < 0 {
				t.Fatalf("event %d (%s) is a call without a duration: %+v", i, e.Name, e)
			}
		case "i":
			if e.S != "g" && e.S != "t" && e.S != "" {
				t.Fatalf("event %d (%s): scope %q", i, e.Name, e.S)
			}
		default:
			t.Fatalf("event %d: phase %q", i, e.Ph)
		}
		if *e.Ts < 0 {
			t.Errorf("event %d (%s) before the launch: ts %v", i, e.Name, *e.Ts)
		}
		byPid[*e.Pid] = append(byPid[*e.Pid], e)
	}
	if names[0] != "launcher" {
		t.Errorf("pid 0 is named %q, want launcher", names[0])
	}
	for pid := range byPid {
		if names[pid] == "" {
			t.Errorf("pid %d has events and no process_name", pid)
		}
	}
	return byPid, names
}

// calls returns pid's calls of the program's thread (tid 1) in the order
// they began, waits aside.
func calls(evs []traceEv) []traceEv {
	var out []traceEv
	for _, e := range evs {
		if e.Ph == "X" && *e.Tid == 1 && e.Name != "wait" {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b traceEv) int {
		switch {
		case *a.Ts < *b.Ts:
			return -1
		case *a.Ts > *b.Ts:
			return 1
		}
		return 0
	})
	return out
}

func pidOf(t *testing.T, names map[int]string, prefix string) int {
	t.Helper()
	for pid, n := range names {
		if strings.HasPrefix(n, prefix) {
			return pid
		}
	}
	t.Fatalf("no process named %q… in %v", prefix, names)
	return -1
}

// TestTrace: --trace writes the Trace Event Format; the calls of a known
// program are there on each rank's track in program order, each wait
// inside its call, the clocks aligned (a message is received after it
// was sent), and each process's life on its own thread; sperli trace
// draws it as SVG.
func TestTrace(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "known.star"), `comm.use_checkpoints()
if comm.rank == 0:
    comm.send(1, 7, "hello")
    comm.recv(1, 8)
else:
    comm.recv(0, 7)
    comm.send(0, 8, "back")
comm.allreduce("int64", "sum", array.pack("int64", [comm.rank]))
comm.barrier()
comm.checkpoint("state")
`, 0o644)
	r := sperliRun(t, baseEnv, dir, "run", "-n", "2", "--checkpoint-dir", "ck", "--trace", "run.json", "known.star")
	if r.Code != 0 {
		t.Fatalf("exit status %d\n%v", r.Code, r)
	}
	byPid, names := readTrace(t, filepath.Join(dir, "run.json"))
	want := map[string][]string{
		"rank 0": {"join", "send", "recv", "allreduce", "barrier", "checkpoint"},
		"rank 1": {"join", "recv", "send", "allreduce", "barrier", "checkpoint"},
	}
	got := map[string][]traceEv{}
	for who, names0 := range want {
		pid := pidOf(t, names, who+" ")
		cs := calls(byPid[pid])
		// The checkpoint's own collectives are inside it: only the calls
		// at the top level are the program's.
		var top []string
		var tops []traceEv
		for _, c := range cs {
			if len(tops) > 0 && *c.Ts < tops[len(tops)-1].end() {
				continue
			}
			tops = append(tops, c)
			top = append(top, c.Name)
		}
		if !slices.Equal(top, names0) {
			t.Errorf("%s's calls: %q, want %q", who, top, names0)
		}
		got[who] = tops
		// Every wait is inside a call of its thread.
		for _, w := range byPid[pid] {
			if w.Name != "wait" {
				continue
			}
			inside := false
			for _, c := range cs {
				inside = inside || *c.Ts <= *w.Ts && w.end() <= c.end()
			}
			if !inside {
				t.Errorf("%s: a wait at %v (%s) is in no call", who, *w.Ts, w.Args)
			}
		}
		var life []string
		for _, e := range byPid[pid] {
			if *e.Tid == 0 {
				life = append(life, e.Ph+" "+e.Name)
			}
		}
		if len(life) != 2 || !strings.HasPrefix(life[0], "X pid ") || life[1] != "i ended: exit status 0" {
			t.Errorf("%s's process thread: %q, want its span and \"ended: exit status 0\"", who, life)
		}
	}
	if len(got["rank 0"]) == 6 && len(got["rank 1"]) == 6 {
		// One clock: each message is received after it is sent (a
		// margin of 0.2 ms for the two processes' reads of it).
		sent7, recv7 := got["rank 0"][1], got["rank 1"][1]
		sent8, recv8 := got["rank 1"][2], got["rank 0"][2]
		for _, m := range [][2]traceEv{{sent7, recv7}, {sent8, recv8}} {
			if m[1].end() < *m[0].Ts-200 {
				t.Errorf("%s ends at %.3f µs, before its %s began at %.3f µs", m[1].Name, m[1].end(), m[0].Name, *m[0].Ts)
			}
		}
		var a struct{ Bytes, Tag, To, From int }
		json.Unmarshal(sent7.Args, &a)
		if a.Bytes != 5 || a.Tag != 7 || a.To != 1 {
			t.Errorf("send's args %s, want bytes 5, tag 7, to 1", sent7.Args)
		}
	}

	// sperli trace draws it.
	r = sperliRun(t, baseEnv, dir, "trace", "run.json", "-o", "run.svg")
	if r.Code != 0 {
		t.Fatalf("sperli trace: exit status %d\n%v", r.Code, r)
	}
	classes := svgClasses(t, filepath.Join(dir, "run.svg"))
	for _, c := range []string{"p2p", "collective", "checkpoint", "wait", "join", "process"} {
		if classes[c] == 0 {
			t.Errorf("the SVG has no %q box: %v", c, classes)
		}
	}
}

// svgClasses parses an SVG and counts its rects by class.
func svgClasses(t *testing.T, path string) map[string]int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := xml.NewDecoder(f)
	out := map[string]int{}
	root := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s is not XML: %v", path, err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = se.Name.Local
			}
			for _, a := range se.Attr {
				if a.Name.Local == "class" {
					out[se.Name.Local+"."+a.Value]++
					if se.Name.Local == "rect" {
						out[a.Value]++
					}
				}
			}
		}
	}
	if root != "svg" {
		t.Fatalf("%s: root element %q, want svg", path, root)
	}
	return out
}

// TestTraceRecovery: the trace of a job whose rank is lost and replaced by
// a spare shows the loss: the lost slot's end (killed), the launcher's
// line of the new generation across the timeline, every live slot's
// recovery, and the spare running the program after it; the SVG draws
// them.
func TestTraceRecovery(t *testing.T) {
	dir := t.TempDir()
	stencil := filepath.Join(root, "scripts", "examples", "stencil.star")
	r := sperliRun(t, withEnv("SPERLI_TEST_FAILURE_SCHEDULE=0:1@after-ckpt-2"), dir,
		"run", "-n", "3", "--spares", "1", "--checkpoint-dir", "ck", "--trace", "loss.json", stencil, "600", "40", "10")
	if r.Code != 0 {
		t.Fatalf("exit status %d\n%v", r.Code, r)
	}
	byPid, names := readTrace(t, filepath.Join(dir, "loss.json"))
	lost, spare := pidOf(t, names, "rank 1 · slot 1 ("), pidOf(t, names, "spare · slot 3, rank 1 from generation 1 (")
	has := func(pid, tid int, ph, prefix string) *traceEv {
		for _, e := range byPid[pid] {
			if *e.Tid == tid && e.Ph == ph && strings.HasPrefix(e.Name, prefix) {
				return &e
			}
		}
		return nil
	}
	if has(lost, 0, "i", "ended: killed by signal 9 (SIGKILL)") == nil {
		t.Errorf("slot 1's track does not say it was killed: %v", byPid[lost])
	}
	gen := has(0, 0, "i", "generation 1: rank 1 (slot 1")
	if gen == nil || gen.S != "g" {
		t.Fatalf("no launcher line of generation 1 across the timeline: %v", byPid[0])
	}
	for _, slot := range []string{"rank 0 · slot 0 ", "rank 2 · slot 2 ", "spare · slot 3,"} {
		pid := pidOf(t, names, slot)
		if has(pid, 2, "X", "recovery to generation 1") == nil && has(pid, 2, "i", "generation 1") == nil {
			t.Errorf("%s: no recovery on its recovery thread", slot)
		}
		if has(pid, 2, "i", "slot 1 lost") == nil {
			t.Errorf("%s: the loss of slot 1 is not on its recovery thread", slot)
		}
	}
	// The spare joined, then ran the program only after the loss: its
	// first call past the join is the resume of generation 1.
	cs := calls(byPid[spare])
	if len(cs) < 2 || cs[0].Name != "join" || cs[1].Name != "resume" {
		t.Errorf("the spare's calls begin %v, want join then resume", names2(cs, 3))
	} else if lost := has(spare, 2, "i", "slot 1 lost"); lost != nil && *cs[1].Ts < *lost.Ts {
		t.Errorf("the spare resumed at %v µs, before it knew of the loss at %v µs", *cs[1].Ts, *lost.Ts)
	}
	r = sperliRun(t, baseEnv, dir, "trace", "loss.json", "-o", "loss.svg")
	if r.Code != 0 {
		t.Fatalf("sperli trace: exit status %d\n%v", r.Code, r)
	}
	classes := svgClasses(t, filepath.Join(dir, "loss.svg"))
	if classes["recovery"] < 1 || classes["line.global"] < 1 {
		t.Errorf("the SVG of a recovery: %d recovery boxes (want some), %d launcher lines (want ≥ 1)", classes["recovery"], classes["line.global"])
	}
}

func names2(cs []traceEv, n int) []string {
	var out []string
	for _, c := range cs[:min(n, len(cs))] {
		out = append(out, c.Name)
	}
	return out
}

// TestTraceErrors: a --trace file that cannot be written is refused before
// any rank starts (exit 2); sperli trace of a missing or malformed file
// says what is wrong (exit 2).
func TestTraceErrors(t *testing.T) {
	dir := t.TempDir()
	prog, markers, _ := markerProgram(t, dir)
	r := sperliRun(t, baseEnv, dir, "run", "-n", "2", "--trace", filepath.Join(dir, "no", "such", "dir.json"), prog)
	wantOneLine(t, "--trace into a missing directory", r.Stderr, "--trace", "no such file or directory")
	if r.Code != 2 {
		t.Errorf("exit status %d, want 2", r.Code)
	}
	wantNotStarted(t, markers)
	writeFile(t, filepath.Join(dir, "bad.json"), `{"traceEvents": 5}`, 0o644)
	for _, tc := range []struct{ file, says string }{
		{"missing.json", "no such file"},
		{"bad.json", "not a trace"},
	} {
		r := sperliRun(t, baseEnv, dir, "trace", tc.file)
		if r.Code != 2 || !strings.Contains(r.Stderr, tc.says) || !strings.Contains(r.Stderr, tc.file) {
			t.Errorf("sperli trace %s: exit %d, stderr %q; want 2 and %q", tc.file, r.Code, r.Stderr, tc.says)
		}
	}
}

// TestTraceMemory: a trace far larger than the launcher's memory budget is
// spilled as it comes: 2 × 200,000 records (about 40 MB, five times the spools' memory budget) keep the
// launcher's peak resident memory under 100 MB, and every record is in
// the file. The ranks are scripts that write the records themselves.
func TestTraceMemory(t *testing.T) {
	const each = 200_000
	dir := t.TempDir()
	rec := `\036sperli-trace {"ph":"X","name":"send","ts":1764750000123456789,"dur":1000,"tid":1,"args":{"to":1,"tag":7,"bytes":64}}`
	prog := writeFile(t, filepath.Join(dir, "loud.sh"), fmt.Sprintf("#!/bin/sh\nyes \"$(printf '%s')\" | head -n %d >&2\n", rec, each), 0o755)
	cmd := exec.Command(sperli, "run", "-n", "2", "--trace", "big.json", prog)
	cmd.Dir, cmd.Env = dir, baseEnv
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var peakKB int64
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Minute)
	var err error
wait:
	for {
		select {
		case err = <-done:
			break wait
		case <-tick.C:
			peakKB = max(peakKB, vmHWM(cmd.Process.Pid))
		case <-deadline:
			testbin.KillTree(cmd.Process.Pid)
			<-done
			t.Fatal("the launcher did not end within 10 minutes")
		}
	}
	if err != nil {
		t.Fatalf("sperli run: %v\n%s", err, stderr.String())
	}
	if peakKB == 0 {
		t.Fatal("the launcher's VmHWM was never read")
	}
	t.Logf("2 × %d trace records: launcher peak RSS %d MB", each, peakKB/1024)
	if peakKB/1024 >= 100 {
		t.Errorf("launcher peak RSS %d MB for a trace of 2 × %d records, want under 100 MB", peakKB/1024, each)
	}
	f, err := os.Open(filepath.Join(dir, "big.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sends := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"name":"send"`) {
			sends++
		}
	}
	if sends != 2*each {
		t.Errorf("%d sends in the trace, want %d", sends, 2*each)
	}
}
