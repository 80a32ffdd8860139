package hosts

import (
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

// echoEnv makes the test binary print its arguments, one a line as x and hex, and
// exit, so a test can see the exact bytes a shell handed to a command.
const echoEnv = "SPERLI_HOSTS_TEST_ECHO"

func TestMain(m *testing.M) {
	if os.Getenv(echoEnv) == "1" {
		for _, a := range os.Args[1:] {
			fmt.Println("x" + hex.EncodeToString([]byte(a)))
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// hostile are words a shell must not read as anything but themselves.
var hostile = []string{
	"", "a", "a b", "$(x)", "`id`", "$HOME", "${HOME}", "'", "''", `"`, `\`, `a\\b`, `\'`,
	"\n", "line1\nline2", "\r\n", "\t", " ", ";rm -rf /", "a;b", "a&b", "a|b", "a>b", "<a",
	"(a)", "{a,b}", "[ab]", "*", "?", "~", "~root", "#x", "x#y", "!", "!!", "a'b'c",
	"'$(x)'", `"$(x)"`, "-n", "-e", "--", "--steps=5", "A=b", "_x=1", "PATH=/x", "a.b/c-d",
	"user@host:/p,q+r%s", "é", "\xff\xfe", "\x01\x7f", "%s%n", "=x", "1a=b",
}

func TestShellQuote(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "''"},
		{"a", "a"},
		{"/usr/local/bin/sperli", "/usr/local/bin/sperli"},
		{"--steps=5", "--steps=5"},
		{"-n", "-n"},
		{"user@host:/p,q+r%s", "user@host:/p,q+r%s"},
		{"=x", "=x"},
		{"1a=b", "1a=b"},
		{"A=b", "'A=b'"},
		{"_x=1", "'_x=1'"},
		{"a b", "'a b'"},
		{"$(x)", "'$(x)'"},
		{"'", `''\'''`},
		{"it's", `'it'\''s'`},
		{`"`, `'"'`},
		{`a\b`, `'a\b'`},
		{"a\nb", "'a\nb'"},
		{";rm -rf /", "';rm -rf /'"},
		{"~", "'~'"},
		{"é", "'é'"},
	}
	for _, tt := range tests {
		if got := ShellQuote(tt.in); got != tt.want {
			t.Errorf("ShellQuote(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func needSh(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
}

// TestShellQuoteSh has a real sh read back every quoted word.
func TestShellQuoteSh(t *testing.T) {
	needSh(t)
	for _, w := range hostile {
		q := ShellQuote(w)
		out, err := exec.Command("/bin/sh", "-c", `printf '%s\n' `+q).Output()
		if got := string(out); err != nil || got != w+"\n" {
			t.Errorf("sh printf %s = %q, %v, want %q", q, got, err, w+"\n")
		}
	}
}

func TestSSHArgv(t *testing.T) {
	tests := []struct {
		host    string
		command []string
		want    []string
	}{
		{"node1", []string{"/opt/sperli", "rank", "p.star"},
			[]string{"ssh", "-p", "62222", "-o", "BatchMode=yes", "node1", "/opt/sperli", "rank", "p.star"}},
		{"2001:db8::1", []string{"/opt/sperli", "rank", "--wdir", "/home/a b", "p.star", "--steps", "5", ""},
			[]string{"ssh", "-p", "62222", "-o", "BatchMode=yes", "2001:db8::1", "/opt/sperli", "rank", "--wdir", "'/home/a b'", "p.star", "--steps", "5", "''"}},
		{"node2", []string{"./gosum", ";rm -rf /", "$(x)", "'"},
			[]string{"ssh", "-p", "62222", "-o", "BatchMode=yes", "node2", "./gosum", "';rm -rf /'", "'$(x)'", `''\'''`}},
		{"node3", nil, []string{"ssh", "-p", "62222", "-o", "BatchMode=yes", "node3"}},
	}
	for _, tt := range tests {
		cmd := append([]string(nil), tt.command...)
		got := SSHArgv(tt.host, tt.command)
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("SSHArgv(%v, %q) = %q, want %q", tt.host, tt.command, got, tt.want)
		}
		if !reflect.DeepEqual(cmd, tt.command) {
			t.Errorf("SSHArgv changed its command to %q", tt.command)
		}
	}
}

// TestSSHArgvRemote does what ssh and sshd do with SSHArgv's words: join
// them with spaces and hand the line to sh -c. The command is this test
// binary, which prints the argv it got.
func TestSSHArgvRemote(t *testing.T) {
	needSh(t)
	self, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	want := append([]string{"rank", "--wdir", "/tmp/a b"}, hostile...)
	argv := SSHArgv("node1", append([]string{self}, want...))
	line := strings.Join(argv[6:], " ")
	cmd := exec.Command("/bin/sh", "-c", line)
	cmd.Env = append(os.Environ(), echoEnv+"=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("sh -c %q: %v", line, err)
	}
	var got []string
	for _, h := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		b, err := hex.DecodeString(strings.TrimPrefix(h, "x"))
		if err != nil {
			t.Fatalf("sh -c %q printed %q: %v", line, out, err)
		}
		got = append(got, string(b))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sh -c %q gave %q, want %q", line, got, want)
	}
}

func TestRankPort(t *testing.T) {
	tests := []struct {
		l    Line
		rank int
		want int
	}{
		{Line{"node1", 0, 1, 0}, 0, 21400},
		{Line{"node1", 0, 1, 0}, 3, 21403},
		{Line{"node2", 47100, 2, 0}, 1, 47100},
		{Line{"127.0.0.1", 0, 0, 0}, 7, 21407},
	}
	for _, tt := range tests {
		if got := RankPort(tt.l, tt.rank); got != tt.want {
			t.Errorf("RankPort(%v, %v) = %v, want %v", tt.l, tt.rank, got, tt.want)
		}
	}
}
