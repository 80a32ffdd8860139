package hosts

import (
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"sperli/codes"
)

// EnvRefused is the environment variable whose names are refused (SPEC §4.4).
const EnvRefused = "SPERLI_REFUSED_HOSTS"

// The reasons Refused gives.
const (
	WhyReserved = "reserved name"
	WhyEnv      = "listed in " + EnvRefused
	WhyDeny     = "listed in --deny-hosts"
)

// reserved are refused by every Refuser; nothing removes them.
var reserved = []string{"host-a.invalid", "host-b.invalid"}

// Refuser decides whether a host is refused. It is not changed after
// NewRefuser and is safe for concurrent use. A nil *Refuser refuses the
// reserved names only.
type Refuser struct {
	env  []string // normalised
	deny []string // normalised
}

// NewRefuser returns a Refuser for the value of SPERLI_REFUSED_HOSTS (names
// separated by commas, blanks or line ends) and the names of --deny-hosts.
// Empty names are skipped. It keeps no reference to deny.
func NewRefuser(env string, deny []string) *Refuser {
	r := &Refuser{}
	for _, f := range strings.FieldsFunc(env, func(c rune) bool {
		return c == ',' || c == '\n' || isBlank(c)
	}) {
		if n := normalize(f); n != "" {
			r.env = append(r.env, n)
		}
	}
	for _, d := range deny {
		if n := normalize(d); n != "" {
			r.deny = append(r.deny, n)
		}
	}
	return r
}

// Refused reports whether host is refused, and why: WhyReserved,
// WhyEnv or WhyDeny, checked in that order. A host is refused when it
// equals a refused name or lies below one ("x.host-a.invalid").
func (r *Refuser) Refused(host string) (why string, refused bool) {
	h := normalize(host)
	if h == "" {
		return "", false
	}
	if matchAny(h, reserved) {
		return WhyReserved, true
	}
	if r == nil {
		return "", false
	}
	if matchAny(h, r.env) {
		return WhyEnv, true
	}
	if matchAny(h, r.deny) {
		return WhyDeny, true
	}
	return "", false
}

// Check returns nil when no line is refused, else a *codes.Error with code
// H1614 for the first refused line: "H1614: host X refused (reserved name)
// at hosts.txt:3". Every line counts, the unused ones after the N-th too.
// The position is left out for lines without a number (Local); file may be
// "" for lines that carry numbers but come from no named file.
func (r *Refuser) Check(file string, lines []Line) error {
	for _, l := range lines {
		why, ok := r.Refused(l.Host)
		if !ok {
			continue
		}
		switch {
		case l.Line > 0 && file != "":
			return codes.New(codes.HostRefused, "host %s refused (%s) at %s:%d", show(l.Host), why, file, l.Line)
		case l.Line > 0:
			return codes.New(codes.HostRefused, "host %s refused (%s) at line %d", show(l.Host), why, l.Line)
		default:
			return codes.New(codes.HostRefused, "host %s refused (%s)", show(l.Host), why)
		}
	}
	return nil
}

// ReadDenyFile reads the file of --deny-hosts: one name a line, blank lines
// and comments skipped as in a host list. Each name must be a valid host
// (see Parse). Errors are a *ParseError naming path and line, or the error
// of opening or reading the file.
func ReadDenyFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseDeny(path, f)
}

func parseDeny(name string, r io.Reader) ([]string, error) {
	var out []string
	err := eachLine(name, r, func(n int, fields []string) error {
		if len(fields) != 1 {
			return &ParseError{name, n, fmt.Sprintf("%d fields, want one name", len(fields))}
		}
		if msg := checkHost(fields[0]); msg != "" {
			return &ParseError{name, n, msg}
		}
		out = append(out, fields[0])
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// normalize gives the form names compare in: blanks, line ends and trailing dots
// removed, ASCII letters in lower case (DNS compares case-insensitively in
// ASCII only), an IP address in canonical form with IPv4-mapped addresses
// unmapped, so "::FFFF:10.0.0.5" is refused when "10.0.0.5" is.
func normalize(name string) string {
	name = strings.TrimRight(strings.TrimFunc(name, func(c rune) bool {
		return c == '\n' || isBlank(c)
	}), ".")
	if a, err := netip.ParseAddr(name); err == nil {
		return a.Unmap().String()
	}
	b := []byte(name)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// matchAny reports whether h is one of names or below one of them.
func matchAny(h string, names []string) bool {
	for _, n := range names {
		if h == n || strings.HasSuffix(h, "."+n) {
			return true
		}
	}
	return false
}

// show prints a host as is when Parse would accept its characters, quoted
// otherwise, so a hostile name from a job description keeps the message on
// one line.
func show(h string) string {
	for i := 0; i < len(h); i++ {
		if c := h[i]; !isLetter(c) && !isDigit(c) && c != '-' && c != '.' && c != ':' {
			return strconv.Quote(h)
		}
	}
	if h == "" {
		return `""`
	}
	return h
}
