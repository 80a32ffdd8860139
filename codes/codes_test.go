package codes

import (
	"errors"
	"fmt"
	"testing"
)

// TestTable: 28 codes, H1601 … H1628, each with a meaning, each parsed back.
func TestTable(t *testing.T) {
	all := All()
	if len(all) != 28 || all[0] != 1601 || all[27] != 1628 {
		t.Fatalf("All() = %v, want H1601 … H1628", all)
	}
	for _, c := range all {
		if c.Meaning() == "" {
			t.Errorf("%v has no meaning", c)
		}
		if got, ok := Parse(c.String()); !ok || got != c {
			t.Errorf("Parse(%q) = %v, %v; want %v", c.String(), got, ok, c)
		}
	}
	for _, s := range []string{"", "H16", "H1600", "H1629", "h1601", "X1601", "H16011"} {
		if c, ok := Parse(s); ok {
			t.Errorf("Parse(%q) = %v, want not a code", s, c)
		}
	}
}

// TestError: the message starts with the code; errors.As and Of find it
// through wrapping.
func TestError(t *testing.T) {
	e := New(TokenRank, "token is for rank %d, want rank %d", 2, 1)
	if got, want := e.Error(), "H1606: token is for rank 2, want rank 1"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	wrapped := fmt.Errorf("join: %w", e)
	if Of(wrapped) != TokenRank || As(wrapped) != e {
		t.Errorf("Of/As through wrapping = %v/%v", Of(wrapped), As(wrapped))
	}
	if !errors.Is(wrapped, &Error{Code: TokenRank}) || errors.Is(wrapped, &Error{Code: TokenJob}) {
		t.Errorf("errors.Is by code does not match exactly")
	}
	if Of(errors.New("plain")) != 0 {
		t.Errorf("Of(plain error) != 0")
	}
	if got := (&Error{Code: PeerLost}).Error(); got != "H1611: "+PeerLost.Meaning() {
		t.Errorf("empty message = %q", got)
	}
}

// TestLost: Lost and LostNoCause build the H1611 the runtime built by
// hand before them, field for field.
func TestLost(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  *Error
		want Error
	}{
		{"Lost", Lost("recv", 3, "recv: rank %d lost: %s", 3, "silent"),
			Error{Code: PeerLost, Op: "recv", Rank: 3, Msg: "recv: rank 3 lost: silent", Cause: &Cause{Kind: CauseLost, Rank: 3, Code: PeerLost}}},
		{"Lost, no op", Lost("", 2, "rank %d lost: %s", 2, "100% gone"),
			Error{Code: PeerLost, Rank: 2, Msg: "rank 2 lost: 100% gone", Cause: &Cause{Kind: CauseLost, Rank: 2, Code: PeerLost}}},
		{"Lost, no rank", Lost("", -1, "slot %d was declared lost", 5),
			Error{Code: PeerLost, Rank: -1, Msg: "slot 5 was declared lost", Cause: &Cause{Kind: CauseLost, Rank: -1, Code: PeerLost}}},
		{"LostNoCause", LostNoCause("join", 4, "rank %d lost during the join", 4),
			Error{Code: PeerLost, Op: "join", Rank: 4, Msg: "rank 4 lost during the join"}},
		{"LostNoCause, no rank", LostNoCause("", -1, "slot %d was declared lost", 1),
			Error{Code: PeerLost, Rank: -1, Msg: "slot 1 was declared lost"}},
	} {
		g, w := *tc.got, tc.want
		if g.Code != w.Code || g.Op != w.Op || g.Rank != w.Rank || g.Msg != w.Msg || g.Err != nil {
			t.Errorf("%s = %+v, want %+v", tc.name, g, w)
		}
		switch {
		case w.Cause == nil && g.Cause != nil:
			t.Errorf("%s: Cause = %+v, want nil", tc.name, *g.Cause)
		case w.Cause != nil && (g.Cause == nil || *g.Cause != *w.Cause):
			t.Errorf("%s: Cause = %v, want %+v", tc.name, g.Cause, *w.Cause)
		}
		if got, want := g.Error(), "H1611: "+w.Msg; got != want {
			t.Errorf("%s: Error() = %q, want %q", tc.name, got, want)
		}
	}
}

// TestMessage: an error's words without its code, for quoting it in
// another; any other error whole.
func TestMessage(t *testing.T) {
	wrapped := fmt.Errorf("reading: %w", New(PeerLost, "rank 2 lost"))
	for _, tc := range []struct {
		err  error
		want string
	}{
		{New(ProtocolViolation, "agreement: a bad layout"), "agreement: a bad layout"},
		{wrapped, "rank 2 lost"},
		{errors.New("plain"), "plain"},
	} {
		if got := Message(tc.err); got != tc.want {
			t.Errorf("Message(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
