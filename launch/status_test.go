package launch

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"sperli/record"
)

func TestStatusText(t *testing.T) {
	rec := func(rank, forRank int, call string, ms, sent int64) record.Waiting {
		return record.Waiting{Call: call, MS: ms, Rank: rank, For: forRank, SentBytes: sent}
	}
	for _, tc := range []struct {
		name string
		st   jobStatus
		want string
	}{
		{"none answered", jobStatus{running: 2, total: 3, elapsed: 65 * time.Second},
			"2/3 ranks running · 0 B sent · 1:05"},
		{"the most awaited rank", jobStatus{running: 4, total: 4, sent: 2_500_000, waits: map[int]record.Waiting{
			0: rec(0, 3, "barrier (collective 7, waiting for rank 3)", 900, 0),
			1: rec(1, 3, "barrier (collective 7, waiting for rank 3)", 800, 0),
			2: rec(2, 0, "recv(source 0, tag 1)", 2000, 0),
			3: rec(3, 1, "recv(source 1, tag 4)", 150, 0),
		}}, "4/4 ranks running · slowest rank 3: recv(source 1, tag 4) 0.1 s · 2.5 MB sent · 0:00"},
		{"awaited and computing", jobStatus{running: 2, total: 2, slots: true, gen: 2, waits: map[int]record.Waiting{
			0: rec(0, 1, "allreduce (collective 3, waiting for rank 1)", 1500, 0),
			1: rec(-1, -1, "", 0, 0),
		}}, "2/2 slots running · generation 2 · slowest rank 1: computing (1 waiting for it) · 0 B sent · 0:00"},
		{"longest wait when none awaited", jobStatus{running: 2, total: 2, inc: 1, waits: map[int]record.Waiting{
			0: rec(0, -1, "recv(any source, any tag)", 300, 0),
			1: rec(1, -1, "recv(any source, tag 2)", 4000, 0),
		}}, "2/2 ranks running · incarnation 1 · longest wait rank 1: recv(any source, tag 2) 4.0 s · 0 B sent · 0:00"},
	} {
		if got := statusText(tc.st); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

// TestStatusWriter: on a terminal every write erases the line first and
// draws it again after a whole line; a line too wide is cut.
func TestStatusWriter(t *testing.T) {
	var term bytes.Buffer
	s := newStatusLine(&term, true)
	s.width = func() int { return 20 }
	w := s.wrap(&term)
	w.Write([]byte("a\n"))
	s.set("1/1 ranks running · 0 B sent · 0:00")
	w.Write([]byte("b"))
	w.Write([]byte("c\n"))
	s.stop()
	w.Write([]byte("d\n"))
	got := strings.ReplaceAll(term.String(), "\r\x1b[2K", "<erase>")
	// lipgloss draws no escapes on a buffer (no colour profile).
	want := "a\nsperli: 1/1 ranks …<erase>bc\nsperli: 1/1 ranks …<erase>d\n"
	if got != want {
		t.Errorf("terminal:\n got %q\nwant %q", got, want)
	}
}
