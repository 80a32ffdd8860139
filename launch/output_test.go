package launch

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"sperli/codes"
	"sperli/record"
)

// feed writes b to s in pieces of size n (the last one shorter), as a
// pipe may cut it anywhere, then closes it.
func feed(s *stream, b []byte, n int) {
	for len(b) > 0 {
		k := min(n, len(b))
		s.Write(b[:k])
		b = b[k:]
	}
	s.close()
}

// shown returns what the default mode shows of s.
func shown(s *stream) string {
	var out bytes.Buffer
	w := bufio.NewWriter(&out)
	s.writeAll(w)
	w.Flush()
	return out.String()
}

func endLines(t *testing.T, err error) []byte {
	t.Helper()
	var b bytes.Buffer
	record.WriteError(&b, err)
	record.WriteStatus(&b, record.StatusOf(err))
	return b.Bytes()
}

// TestStreamSplitsLines: whatever the pieces the rank's bytes come in,
// every line is shown once with its prefix, a last line without line end
// gets one, and the status record and error markers are never shown.
func TestStreamSplitsLines(t *testing.T) {
	failed := codes.New(codes.OutOfRange, "tag 99999999999 out of range")
	in := append([]byte("one\n\x1enot a record\n\nthree"), '\n')
	in = append(in, endLines(t, failed)...)
	in = append(in, "after\nlast"...)
	want := "[rank 2] one\n[rank 2] \x1enot a record\n[rank 2] \n[rank 2] three\n[rank 2] " + failed.Error() + "\n[rank 2] after\n[rank 2] last\n"
	for _, n := range []int{1, 2, 3, 7, 16, 1 << 20} {
		o := &outputs{}
		s := newStream(o, 2, true, 0, nil, nil)
		feed(s, in, n)
		if got := shown(s); got != want {
			t.Errorf("pieces of %d bytes: shown\n%q\nwant\n%q", n, got, want)
		}
		if s.status == nil || s.status.Code != "H1616" || s.status.Exit != 1 {
			t.Errorf("pieces of %d bytes: status %+v, want H1616 exit 1", n, s.status)
		}
	}
}

// TestStreamHidesEndedBy: the error lines of a rank ended by another one
// (H1612) are left out unless verbose; its own lines stay.
func TestStreamHidesEndedBy(t *testing.T) {
	ended := &codes.Error{Code: codes.JobEnded, Rank: -1, Msg: "job ended by rank 1: boom",
		Cause: &codes.Cause{Kind: codes.CauseFailed, Rank: 1, Code: codes.JobEnded}}
	in := append([]byte("mine\n"), endLines(t, fmt.Errorf("Traceback\n  p.star:1:1: in main\nError: %w", ended))...)
	for _, verbose := range []bool{false, true} {
		s := newStream(&outputs{verbose: verbose}, 0, true, 0, nil, nil)
		feed(s, in, 5)
		got := shown(s)
		if !strings.HasPrefix(got, "[rank 0] mine\n") {
			t.Errorf("verbose=%v: shown %q, want the rank's own line first", verbose, got)
		}
		if strings.Contains(got, "H1612") != verbose {
			t.Errorf("verbose=%v: shown %q; the H1612 lines show only with -v", verbose, got)
		}
		if s.status == nil || s.status.Code != "H1612" || s.status.CauseRank != 1 {
			t.Errorf("verbose=%v: status %+v, want H1612 caused by rank 1", verbose, s.status)
		}
	}
}

// TestStatusRecordOfAnySize: a record of 20 MiB (over the 16 MiB a line
// scanner took) is found, and the memory of the stream stays bounded: the
// rest is in its spool file.
func TestStatusRecordOfAnySize(t *testing.T) {
	big := strings.Repeat("x", 20<<20)
	st := record.Status{Exit: 1, Code: "H1616", CauseRank: -1, Msg: "Error: " + big + " \"quoted\"\n"}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	in := append(append([]byte(record.StatusPrefix), b...), '\n')
	s := newStream(&outputs{}, 1, true, 0, nil, nil)
	feed(s, in, 32<<10)
	if s.status == nil {
		t.Fatalf("a status record of %d bytes was not found", len(in))
	}
	if s.status.Code != "H1616" || s.status.Exit != 1 || !strings.HasPrefix(s.status.Msg, "Error: xxx") {
		t.Errorf("status %+v…, want H1616 exit 1 and the head of the message", s.status.Code)
	}
	if len(s.status.Msg) > 128<<10 {
		t.Errorf("the message kept is %d bytes, want it cut", len(s.status.Msg))
	}
	if got := shown(s); got != "" {
		t.Errorf("the record was shown: %d bytes", len(got))
	}
	// The status record WriteStatus writes keeps the end of a long
	// message, where the cause is.
	var w bytes.Buffer
	record.WriteStatus(&w, record.StatusOf(errors.New(big+"the end")))
	if w.Len() > 100<<10 {
		t.Errorf("WriteStatus wrote %d bytes for a 20 MiB message, want it cut", w.Len())
	}
	got, ok := record.ParseStatus(w.String())
	if !ok || !strings.HasSuffix(got.Msg, "the end") {
		t.Errorf("WriteStatus of a long message: %v, ends %q; want it to keep the end", ok, got.Msg[max(0, len(got.Msg)-20):])
	}
}

// TestSpoolSpills: a spool keeps spoolMem bytes in memory, the rest in
// its file, and gives back every byte in order.
func TestSpoolSpills(t *testing.T) {
	var sp spool
	var want bytes.Buffer
	for i := 0; i < 20000; i++ {
		line := fmt.Sprintf("line %d\n", i)
		sp.Write([]byte(line))
		want.WriteString(line)
	}
	if sp.file == nil || len(sp.mem) != 0 {
		t.Errorf("after %d bytes the spool has no file (%d bytes in memory)", want.Len(), len(sp.mem))
	}
	var got bytes.Buffer
	if _, err := got.ReadFrom(sp.reader()); err != nil || !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Errorf("spool gives back %d bytes (%v), want the %d written", got.Len(), err, want.Len())
	}
	sp.reset()
	if sp.file != nil || sp.Len() != 0 {
		t.Errorf("reset left %d bytes", sp.Len())
	}
}

// TestLiveWholeLines: with --live a line is written when it is whole, in
// one piece with its prefix, however the rank's bytes are cut.
func TestLiveWholeLines(t *testing.T) {
	var out bytes.Buffer
	o := &outputs{live: true, stdout: &out}
	s := newStream(o, 3, false, 0, nil, nil)
	s.Write([]byte("hel"))
	if out.Len() != 0 {
		t.Fatalf("a part of a line was shown: %q", out.String())
	}
	s.Write([]byte("lo\nwor"))
	if out.String() != "[rank 3] hello\n" {
		t.Fatalf("after a whole line: %q, want \"[rank 3] hello\\n\"", out.String())
	}
	s.Write([]byte("ld"))
	s.close()
	if out.String() != "[rank 3] hello\n[rank 3] world\n" {
		t.Errorf("at the end: %q", out.String())
	}
}

// TestOneLine: the launcher's one line of a rank's error.
func TestOneLine(t *testing.T) {
	for _, tc := range []struct{ msg, want string }{
		{"Traceback (most recent call last):\n  /w/prog.star:3:5: in main\nError: floored division by zero", "prog.star:3:5: floored division by zero"},
		{"Traceback (most recent call last):\n  /w/p.star:9:2: in <toplevel>\n  /w/lib/m.star:4:9: in f\nError in fail: fail: boom\n", "lib/m.star:4:9: fail: boom"},
		{"/elsewhere/syn.star:2:11: got ':', want ')'", "/elsewhere/syn.star:2:11: got ':', want ')'"},
		{"H1616: tag -1 out of range", "H1616: tag -1 out of range"},
	} {
		if got := OneLine(tc.msg, "/w"); got != tc.want {
			t.Errorf("OneLine(%q) = %q, want %q", tc.msg, got, tc.want)
		}
	}
	if got := OneLine(strings.Repeat("y", 5000), ""); len(got) > maxWhy+len("…") {
		t.Errorf("OneLine of 5000 bytes is %d bytes long", len(got))
	}
}

// TestSpoolBudget: the spools of one launcher keep at most memBudget bytes
// in memory together, however many ranks write; every byte comes back, and
// what they held is returned when they are emptied.
func TestSpoolBudget(t *testing.T) {
	o := &outputs{}
	var streams []*stream
	chunk := bytes.Repeat([]byte("0123456789abcde\n"), 1024) // 16 KiB
	for r := 0; r < 300; r++ {
		s := newStream(o, r, false, 0, nil, nil)
		for i := 0; i < 4; i++ {
			s.Write(chunk)
		}
		streams = append(streams, s)
	}
	held := int64(0)
	for _, s := range streams {
		held += int64(len(s.all.mem))
	}
	if held > memBudget || o.memUsed.Load() > memBudget {
		t.Errorf("the spools hold %d bytes in memory (budget says %d), want at most %d", held, o.memUsed.Load(), memBudget)
	}
	if held != o.memUsed.Load() {
		t.Errorf("the spools hold %d bytes, the budget counts %d", held, o.memUsed.Load())
	}
	for _, s := range streams {
		var got bytes.Buffer
		got.ReadFrom(s.all.reader())
		if got.Len() != 4*len(chunk) {
			t.Fatalf("rank %d: %d bytes back, want %d", s.rank, got.Len(), 4*len(chunk))
		}
		s.release()
	}
	if n := o.memUsed.Load(); n != 0 {
		t.Errorf("after every spool was emptied the budget still counts %d bytes", n)
	}
}
