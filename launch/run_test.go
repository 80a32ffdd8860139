package launch

import (
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

// hostileWords are program arguments that a remote shell would split,
// expand or run if they were not quoted.
var hostileWords = []string{"a b", "$(x)", "'", `"`, ";", "", "it's", "A=b", "*", "`id`", "x\ny", "\\", "-n", "$HOME", "&&", "|", "#c", "~"}

func TestRankArgvRemote(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		star bool
		want []string // the command words before quoting
	}{
		{
			name: "star",
			o:    Options{Self: "/opt/sperli dir/sperli", Program: "prog.star", Args: hostileWords},
			star: true,
			want: append([]string{"/opt/sperli dir/sperli", "rank", "--wdir", "/w d/$(x)", "prog.star"}, hostileWords...),
		},
		{
			name: "star with modules",
			o:    Options{Self: "/opt/sperli", Program: "p q.star", Modules: "lib:;true", Args: []string{"--steps", "5"}},
			star: true,
			want: []string{"/opt/sperli", "rank", "--modules", "lib:;true", "--wdir", "/w d/$(x)", "p q.star", "--steps", "5"},
		},
		{
			name: "executable",
			o:    Options{Self: "/opt/sperli", Program: "/bin/go sum", Args: hostileWords},
			want: append([]string{"/bin/go sum"}, hostileWords...),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			argv := rankArgv(tc.o, tc.star, false, "node1.example", "/w d/$(x)", "/abs/ignored", nil)
			head := []string{"ssh", "-p", "62222", "-o", "BatchMode=yes", "node1.example"}
			if len(argv) < len(head) || !reflect.DeepEqual(argv[:len(head)], head) {
				t.Fatalf("rankArgv(%q) = %q, want it to begin with %q", tc.o.Args, argv, head)
			}
			words := argv[len(head):]
			if len(words) != len(tc.want) {
				t.Fatalf("rankArgv(%q) has %d command words %q, want %d", tc.o.Args, len(words), words, len(tc.want))
			}
			for i, w := range words {
				if q := shellQuoteRef(tc.want[i]); w != q && w != tc.want[i] {
					t.Errorf("command word %d = %q, want %q quoted (%q)", i, w, tc.want[i], q)
				}
			}
			// What the remote shell makes of the words ssh joins with
			// blanks: a stand-in for the command prints each word it gets,
			// NUL-terminated.
			line := `printf '%s\000' ` + strings.Join(words, " ")
			out, err := exec.Command("/bin/sh", "-c", line).Output()
			if err != nil {
				t.Fatalf("sh -c %q: %v", line, err)
			}
			got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("sh -c %q gives words %q, want %q", line, got, tc.want)
			}
		})
	}
}

// shellQuoteRef is the plain single-quote form: a word rankArgv quotes
// otherwise must still be read back the same, which the shell run checks.
func shellQuoteRef(w string) string {
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}

func TestRankArgvLocal(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		star bool
		abs  string // progAbs; "" is /abs/p.star
		want []string
	}{
		{
			name: "star",
			o:    Options{Self: "/opt/sperli", Program: "p.star", Args: []string{"a b", "$(x)"}},
			star: true,
			want: []string{"/opt/sperli", "rank", "/abs/p.star", "a b", "$(x)"},
		},
		{
			name: "star with modules",
			o:    Options{Self: "/opt/sperli", Program: "p.star", Modules: "m1:m2"},
			star: true,
			want: []string{"/opt/sperli", "rank", "--modules", "m1:m2", "/abs/p.star"},
		},
		{
			name: "executable",
			o:    Options{Self: "/opt/sperli", Program: "./gosum", Args: []string{"'", ";"}},
			abs:  "/abs/gosum",
			want: []string{"/abs/gosum", "'", ";"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			abs := tc.abs
			if abs == "" {
				abs = "/abs/p.star"
			}
			got := rankArgv(tc.o, tc.star, true, "127.0.0.1", "/w", abs, nil)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("rankArgv(local) = %q, want %q (no ssh, no quoting)", got, tc.want)
			}
		})
	}
}

func TestLossReason(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		rank int
		want string
	}{
		{"H1611: rank 2 lost: no frame for 5000 ms", 2, "no frame for 5000 ms"},
		{"Traceback (most recent call last):\n  p.star:1:10: in <toplevel>\nError in comm.recv: H1611: rank 0 lost: connection closed without bye", 0, "connection closed without bye"},
		{"H1611: rank 3 lost: a\nb", 3, "a"},
		{"H1611: something else", 1, "something else"},
	} {
		if got := lossReason(tc.msg, tc.rank); got != tc.want {
			t.Errorf("lossReason(%q, %d) = %q, want %q", tc.msg, tc.rank, got, tc.want)
		}
	}
}
