package hosts

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Line is one host of a host list.
type Line struct {
	Host  string // as written in the file, case and trailing dot kept
	Port  int    // 1..65535, or 0 when the line gives no port
	Line  int    // 1-based line number in the file, or 0 when there is no file
	Slots int    // the ranks the line takes, 1..MaxSlots; 0 when it does not say (one)
}

// MaxSlots is the most slots one host line can take: the most ranks a job
// has (runtime.MaxSize).
const MaxSlots = 4096

// String returns the line as it would be written in a host list: "node1",
// "node2 47001" or "node3 slots=8". Parse reads it back to the same Host,
// Port and Slots.
func (l Line) String() string {
	s := l.Host
	if l.Port != 0 {
		s += " " + strconv.Itoa(l.Port)
	}
	if l.Slots != 0 {
		s += " slots=" + strconv.Itoa(l.Slots)
	}
	return s
}

// slots returns the number of ranks the line takes.
func (l Line) slots() int {
	if l.Slots == 0 {
		return 1
	}
	return l.Slots
}

// ParseError is a malformed line of a host list or deny list. The launcher
// exits with status 2 for it.
type ParseError struct {
	File string // the name given to Parse, or ""
	Line int    // 1-based
	Msg  string // lower case, says what was got and what was wanted
}

// Error returns "FILE:LINE: msg", or "line LINE: msg" when File is "".
func (e *ParseError) Error() string {
	if e.File == "" {
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
}

// maxLine bounds one line of a host or deny list. No valid line comes near
// it; it only keeps a wrong file (a binary given by mistake) from being read
// into memory whole.
const maxLine = 64 << 10

// Parse reads a host list from r. name is the file name used in errors.
// It returns the hosts in file order, or nil and the first error: a
// *ParseError for a malformed line, or the reader's error wrapped with name.
// A list without hosts is no error here; the caller checks that it has
// enough lines.
func Parse(name string, r io.Reader) ([]Line, error) {
	var out []Line
	err := eachLine(name, r, func(n int, fields []string) error {
		l, msg := parseLine(fields)
		if msg != "" {
			return &ParseError{name, n, msg}
		}
		l.Line = n
		out = append(out, l)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// parseLine reads the fields of one line, "host [port] [slots=N]" or
// "host:N [port]", or says what is wrong with them.
func parseLine(fields []string) (Line, string) {
	var l Line
	if len(fields) > 3 {
		return l, fmt.Sprintf("%d fields, want host [port] [slots=N]", len(fields))
	}
	host := fields[0]
	if h, n, ok := strings.Cut(host, ":"); ok && !strings.Contains(n, ":") && h != "" && n != "" {
		// MPICH's "node1:8". An IPv6 address has two colons at least.
		if msg := checkHost(h); msg != "" {
			return l, msg
		}
		slots, ok := parseSlots(n)
		if !ok {
			return l, fmt.Sprintf("%q: slots %q is not a number 1..%d (a port goes after a blank: \"%s %s\")", host, n, MaxSlots, h, n)
		}
		host, l.Slots = h, slots
	} else if msg := checkHost(host); msg != "" {
		return l, msg
	}
	l.Host = host
	for i, f := range fields[1:] {
		if v, ok := strings.CutPrefix(f, "slots="); ok {
			if l.Slots != 0 {
				return l, fmt.Sprintf("slots given twice (%q and %q)", fields[0], f)
			}
			if l.Slots, ok = parseSlots(v); !ok {
				return l, fmt.Sprintf("slots %q is not a number 1..%d", v, MaxSlots)
			}
			continue
		}
		if i > 0 || strings.Contains(f, "=") {
			if k, _, ok := strings.Cut(f, "="); ok {
				return l, fmt.Sprintf("%q: unknown key %q, want slots=N", f, k)
			}
			return l, fmt.Sprintf("field %q: want host [port] [slots=N]", f)
		}
		p, ok := parsePort(f)
		if !ok {
			return l, fmt.Sprintf("port %q is not a number 1..65535", f)
		}
		l.Port = p
	}
	if l.Port != 0 && l.Port+l.slots()-1 > 65535 {
		return l, fmt.Sprintf("port %d and %d slots: the ports %d..%d go past 65535", l.Port, l.slots(), l.Port, l.Port+l.slots()-1)
	}
	return l, ""
}

// parseSlots accepts a decimal number 1..MaxSlots: no sign, no 0x.
func parseSlots(s string) (int, bool) {
	if s == "" || len(s) > 4 || s[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, _ := strconv.Atoi(s)
	return n, n >= 1 && n <= MaxSlots
}

// Expand returns the slots of lines in the order ranks take them, at most
// max of them (SPEC §3): a line of k slots gives k entries of its host and
// line number, each with Slots 0 and, when the line has a port P, ports P,
// P+1, …, P+k-1. By default a line's slots are all taken before the next
// line's; byNode deals them round-robin instead (Open MPI's --map-by node):
// the first slot of every line, then the second of every line that has
// one, and so on.
func Expand(lines []Line, byNode bool, max int) []Line {
	var out []Line
	slot := func(l Line, k int) Line {
		e := Line{Host: l.Host, Line: l.Line}
		if l.Port != 0 {
			e.Port = l.Port + k
		}
		return e
	}
	if !byNode {
		for _, l := range lines {
			for k := 0; k < l.slots() && len(out) < max; k++ {
				out = append(out, slot(l, k))
			}
		}
		return out
	}
	for k := 0; k < MaxSlots && len(out) < max; k++ {
		took := false
		for _, l := range lines {
			if k < l.slots() && len(out) < max {
				out = append(out, slot(l, k))
				took = true
			}
		}
		if !took {
			break
		}
	}
	return out
}

// ReadFile reads the host list at path with Parse; errors name path. A file
// that cannot be opened returns the *fs.PathError of os.Open.
func ReadFile(path string) ([]Line, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(path, f)
}

// eachLine calls fn with the 1-based number and the fields of every line of
// r that is neither blank nor only a comment. Fields end at the first one
// that begins with '#'.
func eachLine(name string, r io.Reader, fn func(n int, fields []string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	n := 0
	for sc.Scan() {
		n++
		fields := strings.FieldsFunc(sc.Text(), isBlank)
		for i, f := range fields {
			if f[0] == '#' {
				fields = fields[:i]
				break
			}
		}
		if len(fields) == 0 {
			continue
		}
		if err := fn(n, fields); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return &ParseError{name, n + 1, fmt.Sprintf("line longer than %d bytes", maxLine)}
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func isBlank(r rune) bool {
	return r == ' ' || r == '\t' || r == '\r' || r == '\v' || r == '\f'
}

// parsePort accepts decimal digits only: no sign, no blanks, no 0x.
func parsePort(s string) (int, bool) {
	if s == "" || len(s) > 5 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	p, _ := strconv.Atoi(s)
	return p, p >= 1 && p <= 65535
}

// maxName is the longest DNS name in text form, without its trailing dot.
const maxName = 253

// checkHost returns "" for a valid host, else what is wrong with it.
func checkHost(h string) string {
	if h == "" {
		return "empty host name"
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if isLetter(c) || isDigit(c) || c == '-' || c == '.' || c == ':' {
			continue
		}
		what := fmt.Sprintf("byte %#02x", c)
		if r, size := utf8.DecodeRuneInString(h[i:]); r != utf8.RuneError || size > 1 {
			what = fmt.Sprintf("character %q", r)
		}
		return fmt.Sprintf("host %q has %s, want letters, digits, '-', '.' or ':'", h, what)
	}
	if h[0] == '-' {
		return fmt.Sprintf("host %q begins with '-'", h)
	}
	if strings.Contains(h, ":") {
		a, err := netip.ParseAddr(h)
		if err != nil || !a.Is6() {
			if strings.Count(h, ":") == 1 {
				host, port, _ := strings.Cut(h, ":")
				return fmt.Sprintf("host %q is not a valid IPv6 address (a port goes after a blank: \"%s %s\")", h, host, port)
			}
			return fmt.Sprintf("host %q is not a valid IPv6 address", h)
		}
		return ""
	}
	name, dot := strings.CutSuffix(h, ".")
	if len(name) > maxName {
		return fmt.Sprintf("host name of %d characters, want at most %d", len(name), maxName)
	}
	numeric := true
	for _, label := range strings.Split(name, ".") {
		switch {
		case label == "":
			return fmt.Sprintf("host %q has an empty label", h)
		case len(label) > 63:
			return fmt.Sprintf("host %q has a label of %d characters, want at most 63", h, len(label))
		case label[0] == '-' || label[len(label)-1] == '-':
			return fmt.Sprintf("host %q has a label that begins or ends with '-'", h)
		}
		numeric = numeric && isNumber(label)
	}
	if numeric {
		if a, err := netip.ParseAddr(name); dot || err != nil || !a.Is4() {
			return fmt.Sprintf("host %q is not a valid IPv4 address", h)
		}
	}
	return ""
}

// isNumber reports whether a label reads as a number to inet_aton: decimal,
// octal or 0x hex.
func isNumber(label string) bool {
	digits := label
	hex := false
	if len(label) > 1 && label[0] == '0' && (label[1] == 'x' || label[1] == 'X') {
		digits, hex = label[2:], true
	}
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if !isDigit(c) && !(hex && (c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F')) {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
