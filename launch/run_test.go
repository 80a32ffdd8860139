package launch

import (
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// hostileWords are program arguments that a remote shell would split,
// expand or run if they were not quoted.
var hostileWords = []string{"a b", "$(x)", "'", `"`, ";", "", "it's", "A=b", "*", "`id`", "x\ny", "\\", "-n", "$HOME", "&&", "|", "#c", "~"}

// TestRankArgvRemote: a remote rank's command, as its host's agent runs
// it (no shell between: every word arrives as it is).
func TestRankArgvRemote(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		star bool
		want []string
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
		{
			name: "relative executable",
			o:    Options{Self: "/opt/sperli", Program: "./gosum"},
			want: []string{"/abs/gosum"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rankArgv(tc.o, tc.star, false, "/w d/$(x)", "/abs/gosum"); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("rankArgv(remote) = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestSessionArgv: a host's session is `ssh -p PORT -o BatchMode=yes HOST
// SPERLI spawn`, the path of sperli quoted so that the remote shell reads
// it back as one word, whatever it holds.
func TestSessionArgv(t *testing.T) {
	for _, self := range []string{"/opt/sperli", "/opt/sperli dir/$(x)/it's"} {
		for _, port := range []int{0, 62222, 2222} {
			argv := sshArgv(port, "node1.example", []string{self, "spawn"})
			p := port
			if p == 0 {
				p = 62222
			}
			head := []string{"ssh", "-p", strconv.Itoa(p), "-o", "BatchMode=yes", "node1.example"}
			if len(argv) != len(head)+2 || !reflect.DeepEqual(argv[:len(head)], head) {
				t.Fatalf("sshArgv(%d, %q) = %q, want %q and two words", port, self, argv, head)
			}
			// What the remote shell makes of the words ssh joins with
			// blanks: a stand-in for the command prints each word it
			// gets, NUL-terminated.
			line := `printf '%s\000' ` + strings.Join(argv[len(head):], " ")
			out, err := exec.Command("/bin/sh", "-c", line).Output()
			if err != nil {
				t.Fatalf("sh -c %q: %v", line, err)
			}
			got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
			if want := []string{self, "spawn"}; !reflect.DeepEqual(got, want) {
				t.Errorf("sh -c %q gives words %q, want %q", line, got, want)
			}
		}
	}
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
			got := rankArgv(tc.o, tc.star, true, "/w", abs)
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

// TestJoinWindow: 30 s, and 100 ms more per local rank a processor must
// start beyond one.
func TestJoinWindow(t *testing.T) {
	local := func(n, remote int) []*os.File {
		out := make([]*os.File, n+remote)
		for i := 0; i < n; i++ {
			out[i] = os.Stdin // any non-nil file: a local rank's listener
		}
		return out
	}
	for _, tc := range []struct {
		local, remote, cpus int
		want                time.Duration
	}{
		{2, 0, 2, 30 * time.Second},
		{8, 100, 8, 30 * time.Second},
		{1024, 0, 2, 30*time.Second + 1022*50*time.Millisecond},
		{64, 4, 4, 30*time.Second + 60*25*time.Millisecond},
		{1 << 20, 0, 1, time.Hour},
	} {
		if got := joinWindow(local(tc.local, tc.remote), tc.cpus); got != tc.want {
			t.Errorf("joinWindow(%d local, %d remote, %d cpus) = %v, want %v", tc.local, tc.remote, tc.cpus, got, tc.want)
		}
	}
}

// TestDefaultSilence: 5 s, or 20 ms a local rank per processor where that
// is more.
func TestDefaultSilence(t *testing.T) {
	hostsOf := func(local, remote int) []string {
		out := make([]string, 0, local+remote)
		for i := 0; i < local; i++ {
			out = append(out, "127.0.0.1")
		}
		for i := 0; i < remote; i++ {
			out = append(out, "node1")
		}
		return out
	}
	for _, tc := range []struct{ local, remote, cpus, want int }{
		{2, 0, 2, 5000}, {250, 0, 2, 5000}, {256, 0, 2, 5120}, {512, 0, 2, 10240}, {1024, 0, 2, 20480}, {1000, 5000, 8, 5000}, {1024, 5000, 8, 5120},
	} {
		if got := defaultSilence(hostsOf(tc.local, tc.remote), tc.cpus); got != tc.want {
			t.Errorf("defaultSilence(%d local, %d remote, %d cpus) = %d, want %d", tc.local, tc.remote, tc.cpus, got, tc.want)
		}
	}
}

// TestOneProcessor: a rank that shares its machine with more ranks than
// it has processors gets GOMAXPROCS=1, unless GOMAXPROCS is set where it
// starts or by -x; a rank with a processor of its own gets nothing.
func TestOneProcessor(t *testing.T) {
	for _, tc := range []struct {
		name      string
		env       []string
		inherited []string
		cpus      int
		want      string
	}{
		{"more ranks than processors", []string{"SPERLI_LOCAL_SIZE=3"}, []string{"HOME=/h"}, 2, "1"},
		{"as many", []string{"SPERLI_LOCAL_SIZE=2"}, nil, 2, ""},
		{"fewer", []string{"SPERLI_LOCAL_SIZE=1"}, nil, 64, ""},
		{"set where it starts", []string{"SPERLI_LOCAL_SIZE=300"}, []string{"GOMAXPROCS=4"}, 2, "4"},
		{"set by -x", []string{"SPERLI_LOCAL_SIZE=300", "GOMAXPROCS=3"}, nil, 2, "3"},
		{"no local size", nil, nil, 2, ""},
		{"a local size that is no number", []string{"SPERLI_LOCAL_SIZE=x"}, nil, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := oneProcessor(slices.Clone(tc.env), tc.inherited, tc.cpus)
			got := ""
			for _, kv := range append(slices.Clone(tc.inherited), env...) {
				if v, ok := strings.CutPrefix(kv, "GOMAXPROCS="); ok {
					got = v // the last setting is the one a process sees
				}
			}
			if got != tc.want {
				t.Errorf("GOMAXPROCS %q, want %q (env %q)", got, tc.want, env)
			}
		})
	}
}
