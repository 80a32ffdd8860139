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
