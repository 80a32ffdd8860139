package hosts

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sperli/codes"
)

func TestRefused(t *testing.T) {
	env := " a.example, b.example\nc.example\td.example,,\r\n 10.0.0.5 ,2001:DB8::1, host-a.invalid  "
	r := NewRefuser(env, []string{"E.Example.", "", "a.example", "f.example"})
	tests := []struct {
		host string
		why  string
		ok   bool
	}{
		// Reserved names, in any case, with trailing dots, and below them.
		{"host-a.invalid", WhyReserved, true},
		{"host-b.invalid", WhyReserved, true},
		{"HOST-A.INVALID", WhyReserved, true},
		{"Host-B.Invalid.", WhyReserved, true},
		{"host-a.invalid..", WhyReserved, true},
		{"x.host-a.invalid", WhyReserved, true},
		{"y.X.host-b.invalid.", WhyReserved, true},
		{" host-a.invalid\t", WhyReserved, true},
		{"xhost-a.invalid", "", false},
		{"host-a.invalid.example", "", false},
		{"host-c.invalid", "", false},
		{"invalid", "", false},
		// SPERLI_REFUSED_HOSTS, split at commas, blanks and line ends.
		{"a.example", WhyEnv, true},
		{"b.example", WhyEnv, true},
		{"c.example", WhyEnv, true},
		{"d.example", WhyEnv, true},
		{"A.EXAMPLE.", WhyEnv, true},
		{"sub.c.example", WhyEnv, true},
		{"10.0.0.5", WhyEnv, true},
		{"::ffff:10.0.0.5", WhyEnv, true},
		{"2001:db8:0::1", WhyEnv, true},
		{"10.0.0.50", "", false},
		{"xd.example", "", false},
		// --deny-hosts.
		{"e.example", WhyDeny, true},
		{"x.E.EXAMPLE", WhyDeny, true},
		{"f.example", WhyDeny, true},
		{"g.example", "", false},
		{"example", "", false},
		{"", "", false},
		{".", "", false},
	}
	for _, tt := range tests {
		why, ok := r.Refused(tt.host)
		if why != tt.why || ok != tt.ok {
			t.Errorf("Refused(%q) = %q, %v, want %q, %v", tt.host, why, ok, tt.why, tt.ok)
		}
	}
}

func TestRefusedReservedAlways(t *testing.T) {
	for _, r := range []*Refuser{nil, {}, NewRefuser("", nil), NewRefuser(",,", []string{""})} {
		for _, h := range []string{"host-a.invalid", "x.host-b.invalid"} {
			if why, ok := r.Refused(h); why != WhyReserved || !ok {
				t.Errorf("Refused(%q) = %q, %v, want %q, true", h, why, ok, WhyReserved)
			}
		}
		if why, ok := r.Refused("node1"); ok {
			t.Errorf("Refused(node1) = %q, %v, want \"\", false", why, ok)
		}
	}
}

func TestCheck(t *testing.T) {
	r := NewRefuser("bad.example", []string{"deny.example"})
	parse := func(s string) []Line {
		t.Helper()
		lines, err := Parse("hosts.txt", strings.NewReader(s))
		if err != nil {
			t.Fatal(err)
		}
		return lines
	}
	tests := []struct {
		name  string
		file  string
		lines []Line
		want  string
	}{
		{"clean", "hosts.txt", parse("node1\nnode2 47001\n"), ""},
		{"empty", "hosts.txt", nil, ""},
		{"reserved", "hosts.txt", parse("node1\nnode2\nx.host-b.invalid\n"), "H1614: host x.host-b.invalid refused (reserved name) at hosts.txt:3"},
		{"first of several", "hosts.txt", parse("# c\nnode1\nBAD.example.\nnode2\nhost-a.invalid\n"), "H1614: host BAD.example. refused (listed in SPERLI_REFUSED_HOSTS) at hosts.txt:3"},
		// For -n 2 the third line is unused; it is refused all the same.
		{"unused trailing line", "h", parse("node1\nnode2\n\nw.deny.example 9\n"), "H1614: host w.deny.example refused (listed in --deny-hosts) at h:4"},
		{"local", "", Local(3), ""},
		{"no file", "", []Line{{"node1", 0, 0, 0}, {"host-a.invalid", 0, 0, 0}}, "H1614: host host-a.invalid refused (reserved name)"},
		{"numbered, no file", "", []Line{{"host-a.invalid", 0, 7, 0}}, "H1614: host host-a.invalid refused (reserved name) at line 7"},
		{"hostile", "job", []Line{{"x.host-a.invalid\n; rm", 0, 0, 0}}, ""},
		{"hostile refused", "job", []Line{{"bad.example\n", 0, 2, 0}}, `H1614: host "bad.example\n" refused (listed in SPERLI_REFUSED_HOSTS) at job:2`},
	}
	for _, tt := range tests {
		err := r.Check(tt.file, tt.lines)
		if tt.want == "" {
			if err != nil {
				t.Errorf("Check(%s) = %v, want nil", tt.name, err)
			}
			continue
		}
		var ce *codes.Error
		if !errors.As(err, &ce) || ce.Code != codes.HostRefused || err.Error() != tt.want {
			t.Errorf("Check(%s) = %v, want %v", tt.name, err, tt.want)
		}
	}
	lr := NewRefuser("127.0.0.1", nil)
	if err, want := lr.Check("", Local(2)), "H1614: host 127.0.0.1 refused (listed in SPERLI_REFUSED_HOSTS)"; err == nil || err.Error() != want {
		t.Errorf("Check(Local(2)) = %v, want %v", err, want)
	}
}

func TestReadDenyFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("deny.txt", "# refused\nfoo.example\n\n  BAR.example.  # late\r\n10.0.0.5\n")
	got, err := ReadDenyFile(good)
	want := []string{"foo.example", "BAR.example.", "10.0.0.5"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ReadDenyFile(%v) = %v, %v, want %v, nil", good, got, err, want)
	}
	bad := []struct{ in, msg string }{
		{"a\nb c\n", ":2: 2 fields, want one name"},
		{"# x\n\na_b\n", `:3: host "a_b" has character '_', want letters, digits, '-', '.' or ':'`},
		{"-x\n", `:1: host "-x" begins with '-'`},
	}
	for i, tt := range bad {
		p := write("bad"+string(rune('0'+i)), tt.in)
		_, err := ReadDenyFile(p)
		var pe *ParseError
		if !errors.As(err, &pe) || err.Error() != p+tt.msg {
			t.Errorf("ReadDenyFile(%q) = %v, want %v", tt.in, err, p+tt.msg)
		}
	}
	if _, err := ReadDenyFile(filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadDenyFile(missing) = %v, want os.ErrNotExist", err)
	}
}
