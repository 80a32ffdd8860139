package record

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"sperli/codes"
)

// The exit status follows the error: 0, 75 for a loss (also H1612 caused
// by one), 1 for anything else.
func TestExitStatus(t *testing.T) {
	lostCause := &codes.Error{Code: codes.JobEnded, Msg: "ended", Cause: &codes.Cause{Kind: codes.CauseLost, Rank: 2}}
	failedCause := &codes.Error{Code: codes.JobEnded, Msg: "ended", Cause: &codes.Cause{Kind: codes.CauseFailed, Rank: 2}}
	for _, c := range []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{errors.New("plain"), ExitFail},
		{codes.New(codes.PeerLost, "rank 1 lost"), ExitLost},
		{fmt.Errorf("wrapped: %w", codes.New(codes.PeerLost, "rank 1 lost")), ExitLost},
		{lostCause, ExitLost},
		{failedCause, ExitFail},
		{codes.New(codes.OutOfRange, "tag"), ExitFail},
	} {
		if got := ExitStatus(c.err); got != c.want {
			t.Errorf("ExitStatus(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

// A status record written is read back as it was, code and cause
// included; a line without the prefix or with a broken body is no record.
func TestStatusRoundTrip(t *testing.T) {
	err := &codes.Error{Code: codes.JobEnded, Msg: "ended by rank 2", Cause: &codes.Cause{Kind: codes.CauseLost, Rank: 2}}
	st := StatusOf(err)
	st.Stats = &RankStats{SentMsgs: 3, Coll: map[string]CollStats{"barrier": {Calls: 2}}}
	var b bytes.Buffer
	WriteStatus(&b, st)
	if !strings.HasPrefix(b.String(), StatusPrefix) || strings.Count(b.String(), "\n") != 1 {
		t.Fatalf("WriteStatus wrote %q, want one line after the prefix", b.String())
	}
	got, ok := ParseStatus(b.String())
	if !ok || got.Exit != ExitLost || got.Code != "H1612" || got.Cause != "lost" || got.CauseRank != 2 || got.Msg != err.Error() ||
		got.Stats == nil || got.Stats.SentMsgs != 3 || got.Stats.Coll["barrier"].Calls != 2 {
		t.Errorf("ParseStatus = %+v, %v; want what was written", got, ok)
	}
	for _, line := range []string{"sperli-status {}", StatusPrefix + "{", StatusPrefix + "[]", "\x1esperli-statu {}"} {
		if _, ok := ParseStatus(line); ok {
			t.Errorf("ParseStatus(%q) took it as a record", line)
		}
	}
}

// CutMiddle keeps short strings whole and cuts long ones at character
// boundaries, keeping the end.
func TestCutMiddle(t *testing.T) {
	if got := CutMiddle("short", 10); got != "short" {
		t.Errorf("CutMiddle(short) = %q", got)
	}
	s := strings.Repeat("é", 100) + "the end"
	for max := 24; max < 80; max++ {
		got := CutMiddle(s, max)
		if !utf8.ValidString(got) || !strings.HasSuffix(got, "the end") || len(got) > max+len(" … ") || !strings.Contains(got, " … ") {
			t.Errorf("CutMiddle(%d) = %q: want valid UTF-8, at most about %d bytes, the end kept", max, got, max)
		}
	}
}

// The waiting record's line parses back to itself; a line of another
// record does not.
func TestWaitingLine(t *testing.T) {
	w := Waiting{Call: "recv(source 0, tag 7)", MS: 5012, Rank: 1, For: 0, SentBytes: 10, RecvBytes: 20}
	line := w.Line()
	if !strings.HasSuffix(line, "\n") {
		t.Errorf("Line() = %q, want a line end", line)
	}
	if got, ok := ParseWaiting(line); !ok || got != w {
		t.Errorf("ParseWaiting(Line()) = %+v, %v; want %+v", got, ok, w)
	}
	if _, ok := ParseWaiting(StatusPrefix + "{}"); ok {
		t.Errorf("ParseWaiting took a status record")
	}
}
