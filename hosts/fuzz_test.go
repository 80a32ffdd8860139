package hosts

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

func FuzzParse(f *testing.F) {
	f.Add([]byte("node1\nnode2 47001\n"))
	f.Add([]byte("node1 slots=8\nnode2:4 47001\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		lines, err := Parse("f", strings.NewReader(string(data)))
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q) = %v, want a *ParseError", data, err)
			}
			if n := strings.Count(string(data), "\n") + 1; pe.File != "f" || pe.Line < 1 || pe.Line > n {
				t.Fatalf("Parse(%q) = %v, want f:1..%d", data, err, n)
			}
			return
		}
		var text strings.Builder
		last := 0
		for _, l := range lines {
			if msg := checkHost(l.Host); msg != "" || l.Port < 0 || l.Port > 65535 || l.Slots < 0 || l.Slots > MaxSlots || l.Port != 0 && l.Port+max(l.Slots, 1)-1 > 65535 || l.Line <= last {
				t.Fatalf("Parse(%q) gave %#v (%s)", data, l, msg)
			}
			last = l.Line
			if strings.HasPrefix(l.Host, "-") || strings.ContainsAny(l.Host, " \t\r\n#'\"$`\\;&|<>()") {
				t.Fatalf("Parse(%q) gave host %q", data, l.Host)
			}
			// A valid host needs no quoting: it goes to ssh as it is.
			if ShellQuote(l.Host) != l.Host {
				t.Fatalf("ShellQuote(%q) = %q, want it unchanged", l.Host, ShellQuote(l.Host))
			}
			NewRefuser(l.Host, nil).Refused(l.Host)
			IsLocal(l.Host)
			fmt.Fprintln(&text, l)
		}
		again, err := Parse("f", strings.NewReader(text.String()))
		if err != nil || len(again) != len(lines) {
			t.Fatalf("Parse(%q) = %v, %v, want %v", text.String(), again, err, lines)
		}
		for i, l := range again {
			if l.Host != lines[i].Host || l.Port != lines[i].Port || l.Slots != lines[i].Slots || l.Line != i+1 {
				t.Fatalf("Parse(%q)[%d] = %v, want %v at line %d", text.String(), i, l, lines[i], i+1)
			}
		}
	})
}

func FuzzShellQuote(f *testing.F) {
	for _, w := range hostile {
		f.Add(w)
	}
	f.Fuzz(func(t *testing.T, word string) {
		q := ShellQuote(word)
		got, err := shUnquote(q)
		if err != nil || got != word {
			t.Fatalf("shUnquote(ShellQuote(%q) = %q) = %q, %v, want %q", word, q, got, err, word)
		}
	})
}

var (
	shPlain      = regexp.MustCompile(`^[A-Za-z0-9@%_+=:,./-]$`)
	shAssignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
)

// shUnquote reads s as a POSIX sh reads one word of a simple command, for
// the forms a quoted word may take: plain characters, '...' and \c. It fails
// on anything the shell would treat specially (a blank, $, `, a glob, ~, #,
// an operator, a double quote, a line continuation), on a word that would
// vanish or split, and on an unquoted word the shell would take for a
// variable assignment.
func shUnquote(s string) (string, error) {
	if s == "" {
		return "", errors.New("empty: the shell drops it")
	}
	var b strings.Builder
	quoted := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return "", fmt.Errorf("unterminated quote at %d", i)
			}
			b.WriteString(s[i+1 : i+1+j])
			i += j + 1
			quoted = true
		case c == '\\':
			if i+1 == len(s) || s[i+1] == '\n' {
				return "", fmt.Errorf("backslash at %d continues nothing", i)
			}
			b.WriteByte(s[i+1])
			i++
			quoted = true
		case shPlain.MatchString(string(c)):
			b.WriteByte(c)
		default:
			return "", fmt.Errorf("unquoted %q at %d", c, i)
		}
	}
	if !quoted && shAssignment.MatchString(s) {
		return "", errors.New("reads as an assignment")
	}
	return b.String(), nil
}

func TestShUnquote(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"a", "a", true},
		{"'a b'", "a b", true},
		{`'it'\''s'`, "it's", true},
		{`a\ b`, "a b", true},
		{"''", "", true},
		{"'A=b'", "A=b", true},
		{"", "", false},
		{"a b", "", false},
		{"$x", "", false},
		{"'a", "", false},
		{`a\`, "", false},
		{"a\\\nb", "", false},
		{"A=b", "", false},
		{"~", "", false},
		{`"a"`, "", false},
	}
	for _, tt := range tests {
		got, err := shUnquote(tt.in)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("shUnquote(%q) = %q, %v, want %q, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}
