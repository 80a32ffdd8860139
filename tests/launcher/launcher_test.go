// Package launcher tests `sperli run` and `sperli job make` as processes:
// the real binary, real ranks on loopback, their exit status, what the
// launcher says on standard error and what it shows on standard output.
package launcher

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sperli/tests/internal/testbin"
	"strings"
	"syscall"
	"testing"
	"time"
)

// timeout bounds every wait of these tests.
const timeout = 60 * time.Second

var (
	root    string // the module root
	sperli  string // the binaries built for these tests
	killme  string
	echo    string
	baseEnv []string
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	var err error
	if root, err = testbin.Root(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "sperli-launcher-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	// The real path: /proc/PID/exe shows it.
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sperli, killme, echo = filepath.Join(dir, "sperli"), filepath.Join(dir, "killme"), filepath.Join(dir, "echo")
	if err := testbin.Build(root, [][2]string{
		{sperli, "./cmd/sperli"},
		{killme, "./tests/launcher/testdata/killme"},
		{echo, "./tests/launcher/testdata/echo"},
	}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "SPERLI_REFUSED_HOSTS", "SPERLI_TEST_FAILURE_SCHEDULE", "NO_COLOR", "XDG_CACHE_HOME":
			continue
		}
		baseEnv = append(baseEnv, kv)
	}
	baseEnv = append(baseEnv, "XDG_CACHE_HOME="+filepath.Join(dir, "cache"))
	return m.Run()
}

// withEnv returns the test environment with kv ("K=V") set, replacing
// earlier values of the same keys.
func withEnv(kv ...string) []string { return testbin.WithEnv(baseEnv, kv...) }

type (
	proc   = testbin.Process
	result = testbin.Result
)

// start starts sperli with args in dir (the module root when ""). The
// process and the ranks it started are killed in t.Cleanup if still
// running.
func start(t *testing.T, env []string, dir string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(sperli, args...)
	if dir == "" {
		dir = root
	}
	cmd.Dir, cmd.Env = dir, env
	return testbin.Start(t, cmd)
}

// sperliRun runs sperli to its end.
func sperliRun(t *testing.T, env []string, dir string, args ...string) result {
	t.Helper()
	return start(t, env, dir, args...).Wait(t, timeout)
}

var writeFile = testbin.WriteFile

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// lines splits output into its lines, without line ends.
func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// rankLines returns the lines of launcher output shown for rank r, without
// their prefix.
func rankLines(out string, r int) []string {
	var got []string
	prefix := fmt.Sprintf("[rank %d] ", r)
	for _, l := range lines(out) {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			got = append(got, rest)
		}
	}
	return got
}

// wantOneLine fails unless s is exactly one line "sperli: ..." holding
// every string of want.
func wantOneLine(t *testing.T, what, s string, want ...string) {
	t.Helper()
	if strings.Count(s, "\n") != 1 || !strings.HasSuffix(s, "\n") || !strings.HasPrefix(s, "sperli: ") {
		t.Errorf("%s: stderr = %q, want one line beginning \"sperli: \"", what, s)
	}
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Errorf("%s: stderr = %q, want it to name %q", what, s, w)
		}
	}
}

// markerProgram writes an executable PROGRAM that creates dir/ran when it
// runs, and an ssh stand-in (first on PATH in the returned environment)
// that creates dir/ssh-ran, so a test can tell that nothing was started,
// not even over ssh. It returns the program, the two markers and the PATH
// setting.
func markerProgram(t *testing.T, dir string) (prog string, markers []string, path string) {
	t.Helper()
	ran, sshRan := filepath.Join(dir, "ran"), filepath.Join(dir, "ssh-ran")
	prog = writeFile(t, filepath.Join(dir, "prog.sh"), "#!/bin/sh\ntouch '"+ran+"'\n", 0o755)
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(bin, "ssh"), "#!/bin/sh\ntouch '"+sshRan+"'\nexit 255\n", 0o755)
	return prog, []string{ran, sshRan}, "PATH=" + bin + ":" + os.Getenv("PATH")
}

func wantNotStarted(t *testing.T, markers []string) {
	t.Helper()
	for _, m := range markers {
		if exists(m) {
			t.Errorf("%s exists: a rank was started", filepath.Base(m))
		}
	}
}

// TestHostListErrors: a malformed, short or refused host list is exit
// status 2 with one line naming the file and line, and nothing starts;
// `sperli job make` refuses the same lists and writes nothing.
func TestHostListErrors(t *testing.T) {
	three := "127.0.0.1\n127.0.0.1\n127.0.0.1\n"
	for _, tc := range []struct {
		name  string
		hosts string // "" for no host file: {hosts} names a missing one
		deny  string // --deny-hosts content, "" for none
		env   string // SPERLI_REFUSED_HOSTS, "" for unset
		want  []string
	}{
		{name: "bad port", hosts: "127.0.0.1\n127.0.0.1 70000\n127.0.0.1\n", want: []string{"{hosts}:2:", "70000"}},
		{name: "port not a number", hosts: "127.0.0.1\n127.0.0.1\n127.0.0.1 4x\n", want: []string{"{hosts}:3:", "4x"}},
		{name: "three fields", hosts: "# ranks\n127.0.0.1\n127.0.0.1 47001 47002\n127.0.0.1\n", want: []string{"{hosts}:3:", `field "47002"`, "host [port] [slots=N]"}},
		{name: "too few lines", hosts: "# two hosts\n127.0.0.1\n\n127.0.0.1 47001\n", want: []string{"{hosts}", "2 host lines", "at least 3"}},
		{name: "too few slots", hosts: "127.0.0.1 slots=2\n", want: []string{"{hosts}", "2 slots in all", "at least 3"}},
		{name: "bad slots", hosts: "127.0.0.1\n127.0.0.1 slots=two\n", want: []string{"{hosts}:2:", `slots "two"`}},
		{name: "slots twice", hosts: "127.0.0.1:2 slots=2\n", want: []string{"{hosts}:1:", "slots given twice"}},
		{name: "no host file", want: []string{"--hosts", "{hosts}"}},
		{name: "env refused local address", hosts: "127.0.0.1\n127.0.0.9\n127.0.0.1\n", env: "node9.example, 127.0.0.9\tnode8.example",
			want: []string{"H1614", "127.0.0.9", "{hosts}:2", "SPERLI_REFUSED_HOSTS"}},
		{name: "env refused after a blank", hosts: "127.0.0.1\n127.0.0.1\nnode8.example\n", env: "node9.example, 127.0.0.9\tnode8.example",
			want: []string{"H1614", "node8.example", "{hosts}:3"}},
		{name: "env refused after a line end", hosts: "node7.example 47000\n127.0.0.1\n127.0.0.1\n", env: "a.example\nnode7.example",
			want: []string{"H1614", "node7.example", "{hosts}:1"}},
		{name: "reserved", hosts: "127.0.0.1\nhost-a.invalid\n127.0.0.1\n", want: []string{"H1614", "host-a.invalid", "{hosts}:2", "reserved"}},
		{name: "below reserved", hosts: "127.0.0.1\n127.0.0.1\nx.host-b.invalid\n", want: []string{"H1614", "x.host-b.invalid", "{hosts}:3"}},
		{name: "reserved upper case", hosts: "HOST-A.INVALID\n127.0.0.1\n127.0.0.1\n", want: []string{"H1614", "HOST-A.INVALID", "{hosts}:1"}},
		{name: "reserved trailing dot", hosts: "127.0.0.1\nhost-a.invalid.\n127.0.0.1\n", want: []string{"H1614", "host-a.invalid.", "{hosts}:2"}},
		{name: "denied local address", hosts: "127.0.0.1\n127.0.0.8\n127.0.0.1\n", deny: "# denied\n127.0.0.8\nNODE5.example\n",
			want: []string{"H1614", "127.0.0.8", "{hosts}:2", "--deny-hosts"}},
		{name: "denied upper case and dot", hosts: "node5.example.\n127.0.0.1\n127.0.0.1\n", deny: "# denied\n127.0.0.8\nNODE5.example\n",
			want: []string{"H1614", "node5.example.", "{hosts}:1"}},
		{name: "reserved on an unused line", hosts: three + "host-b.invalid\n", want: []string{"H1614", "host-b.invalid", "{hosts}:4"}},
		{name: "env refused on an unused line", hosts: "127.0.0.1\n# spare\n127.0.0.1\n127.0.0.1\n127.0.0.9\n", env: "127.0.0.9",
			want: []string{"H1614", "127.0.0.9", "{hosts}:5"}},
		{name: "malformed deny file", hosts: three, deny: "ok.example\nbad name\n", want: []string{"{deny}:2:"}},
	} {
		for _, sub := range []string{"run", "job make"} {
			t.Run(tc.name+"/"+sub, func(t *testing.T) {
				dir := t.TempDir()
				prog, markers, path := markerProgram(t, dir)
				hostsFile := filepath.Join(dir, "hosts.txt")
				if tc.hosts != "" {
					writeFile(t, hostsFile, tc.hosts, 0o644)
				}
				denyFile := filepath.Join(dir, "deny.txt")
				env := withEnv(path)
				if tc.env != "" {
					env = withEnv(path, "SPERLI_REFUSED_HOSTS="+tc.env)
				}
				out := filepath.Join(dir, "out")
				var args []string
				if sub == "run" {
					args = []string{"run", "-n", "3", "--hosts", hostsFile}
				} else {
					args = []string{"job", "make", "-n", "3", "--hosts", hostsFile, "--out", out}
				}
				if tc.deny != "" {
					writeFile(t, denyFile, tc.deny, 0o644)
					args = append(args, "--deny-hosts", denyFile)
				}
				if sub == "run" {
					args = append(args, prog)
				}
				r := sperliRun(t, env, dir, args...)
				if r.Code != 2 {
					t.Errorf("sperli %s: exit status %d, want 2\n%v", sub, r.Code, r)
				}
				var want []string
				for _, w := range tc.want {
					want = append(want, strings.NewReplacer("{hosts}", hostsFile, "{deny}", denyFile).Replace(w))
				}
				wantOneLine(t, "sperli "+sub, r.Stderr, want...)
				if r.Stdout != "" {
					t.Errorf("sperli %s: stdout = %q, want nothing", sub, r.Stdout)
				}
				wantNotStarted(t, markers)
				if exists(out) {
					t.Errorf("sperli job make created %s", out)
				}
			})
		}
	}
}

// TestUsage: command-line mistakes are exit status 2 with one line, and
// nothing starts.
func TestUsage(t *testing.T) {
	dir := t.TempDir()
	prog, markers, path := markerProgram(t, dir)
	star := writeFile(t, filepath.Join(dir, "p.star"), "print('ran')\n", 0o644)
	noExec := writeFile(t, filepath.Join(dir, "noexec.sh"), "#!/bin/sh\ntouch '"+filepath.Join(dir, "ran")+"'\n", 0o644)
	starDir := filepath.Join(dir, "d.star")
	if err := os.Mkdir(starDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
		env  []string
	}{
		{name: "program not executable", args: []string{"run", "-n", "2", noExec}, want: []string{noExec, "not executable"}},
		{name: "program is a directory", args: []string{"run", "-n", "2", dir}, want: []string{dir, "directory"}},
		{name: "star program is a directory", args: []string{"run", "-n", "2", starDir}, want: []string{starDir, "directory"}},
		{name: "missing --wdir", args: []string{"run", "-n", "2", "--wdir", filepath.Join(dir, "nowhere"), prog}, want: []string{"--wdir", "nowhere"}},
		{name: "--wdir a file", args: []string{"run", "-n", "2", "--wdir", star, star}, want: []string{"--wdir", "not a directory"}},
		{name: "bad SPERLI_SPIN_US", args: []string{"run", "-n", "2", prog}, env: []string{"SPERLI_SPIN_US=fast"}, want: []string{"SPERLI_SPIN_US", "fast"}},
		{name: "SPERLI_SPIN_US too large", args: []string{"run", "-n", "2", star}, env: []string{"SPERLI_SPIN_US=1000001"}, want: []string{"SPERLI_SPIN_US", "1000001"}},
		{name: "executable without -n", args: []string{"run", prog}, want: []string{"-n"}},
		{name: "-n 0", args: []string{"run", "-n", "0", prog}, want: []string{"-n 0"}},
		{name: "-n 0 star", args: []string{"run", "-n", "0", star}, want: []string{"-n 0"}},
		{name: "-n negative", args: []string{"run", "-n", "-1", prog}, want: []string{"-n -1"}},
		{name: "-n not a number", args: []string{"run", "-n", "three", prog}, want: []string{"three"}},
		{name: "missing star program", args: []string{"run", "-n", "2", filepath.Join(dir, "missing.star")}, want: []string{"missing.star"}},
		{name: "missing executable", args: []string{"run", "-n", "2", filepath.Join(dir, "missing")}, want: []string{"missing"}},
		{name: "missing star program without -n", args: []string{"run", filepath.Join(dir, "missing.star")}, want: []string{"missing.star"}},
		{name: "no program", args: []string{"run", "-n", "2"}, want: nil},
		{name: "silence too short", args: []string{"run", "-n", "2", "--silence", "5", prog}, want: []string{"--silence"}},
		{name: "unknown flag", args: []string{"run", "-n", "2", "--bogus", prog}, want: []string{"--bogus"}},
		{name: "job make without --out", args: []string{"job", "make", "-n", "2"}, want: []string{"--out"}},
		{name: "job make -n 0", args: []string{"job", "make", "-n", "0", "--out", filepath.Join(dir, "out")}, want: []string{"-n 0"}},
		{name: "bench --repeat 0", args: []string{"bench", "--repeat", "0"}, want: []string{"--repeat 0"}},
		{name: "bench --pings -5", args: []string{"bench", "--pings", "-5"}, want: []string{"--pings -5"}},
		{name: "bench --sizes bad", args: []string{"bench", "--sizes", "64,lots"}, want: []string{"lots"}},
		{name: "bench with an argument", args: []string{"bench", "now"}, want: []string{"now"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sperliRun(t, withEnv(append([]string{path}, tc.env...)...), dir, tc.args...)
			if r.Code != 2 {
				t.Errorf("sperli %q: exit status %d, want 2\n%v", tc.args, r.Code, r)
			}
			wantOneLine(t, fmt.Sprintf("sperli %q", tc.args), r.Stderr, tc.want...)
			if r.Stdout != "" {
				t.Errorf("sperli %q: stdout = %q, want nothing", tc.args, r.Stdout)
			}
			wantNotStarted(t, markers)
			if exists(filepath.Join(dir, "out")) {
				t.Errorf("sperli %q created out/", tc.args)
			}
		})
	}
}

// waitPIDs waits for the pid files killme writes once its rank joined, and
// returns the pids, each checked to be a child of the launcher.
func waitPIDs(t *testing.T, ctx context.Context, launcher *proc, dir string, n int) []procInfo {
	t.Helper()
	return testbin.WaitPIDs(t, ctx, launcher, dir, n, "join")
}

// TestRankKilled: a rank killed with SIGKILL while its peers wait on it is
// a lost rank: the peers end with H1611/H1612, the launcher says once
// which rank was lost and exits 75. The ranks' errors are on the
// launcher's standard error, prefixed; the H1612 of ranks ended by the
// loss only with -v.
func TestRankKilled(t *testing.T) {
	for _, verbose := range []bool{false, true} {
		t.Run(fmt.Sprintf("verbose=%v", verbose), func(t *testing.T) {
			dir := t.TempDir()
			args := []string{"run", "-n", "3", "--silence", "1000"}
			if verbose {
				args = append(args, "-v")
			}
			l := start(t, baseEnv, dir, append(args, killme, dir)...)
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			pids := waitPIDs(t, ctx, l, dir, 3)
			if err := syscall.Kill(pids[2].PID, syscall.SIGKILL); err != nil {
				t.Fatalf("kill rank 2 (pid %d): %v", pids[2].PID, err)
			}
			r := l.Wait(t, timeout)
			if r.Code != 75 {
				t.Errorf("exit status %d, want 75 (a rank was lost)\n%v", r.Code, r)
			}
			var lost []string
			for _, line := range lines(r.Stderr) {
				switch {
				case regexp.MustCompile(`^\[rank [01]\] `).MatchString(line):
				case !strings.HasPrefix(line, "sperli: "):
					t.Errorf("stderr line %q begins neither \"sperli: \" nor [rank 0] or [rank 1]", line)
				case strings.HasPrefix(line, "sperli: rank 2 lost: "):
					lost = append(lost, line)
				case strings.Contains(line, "lost"):
					t.Errorf("launcher line %q: only rank 2 was lost", line)
				}
			}
			// Said once as it happens, with its one cause, and again as
			// the last line with the ranks it ended.
			all := lines(r.Stderr)
			if len(lost) != 2 || lost[0] != "sperli: rank 2 lost: killed by signal 9 (SIGKILL)" ||
				!regexp.MustCompile(`^sperli: rank 2 lost: killed by signal 9 \(SIGKILL\); ranks 0, 1 ended by it \(H161[12](, H1612)?\)$`).MatchString(lost[1]) ||
				all[len(all)-1] != lost[1] {
				t.Errorf("launcher says %q, want \"rank 2 lost: killed by signal 9 (SIGKILL)\" as it happens and, as the last line, with the ranks it ended:\n%s", lost, r.Stderr)
			}
			seen := 0
			for rank := 0; rank < 2; rank++ {
				got := strings.Join(rankLines(r.Stderr, rank), "\n")
				if strings.Contains(got, "H1612") && !verbose {
					t.Errorf("rank %d's output %q shows its H1612 without -v", rank, got)
				}
				if got == "" && !verbose {
					continue
				}
				if !strings.Contains(got, "H1611") && !strings.Contains(got, "H1612") {
					t.Errorf("rank %d's output %q shows neither H1611 nor H1612\n%v", rank, got, r)
				}
				if !strings.Contains(got, "rank 2") {
					t.Errorf("rank %d's output %q does not name rank 2 as the cause", rank, got)
				}
				seen++
			}
			if seen == 0 {
				t.Errorf("no rank shows the H1611 that names rank 2\n%v", r)
			}
			if r.Stdout != "" {
				t.Errorf("stdout %q, want nothing (the ranks print nothing there)", r.Stdout)
			}
			if strings.Contains(r.Stdout+r.Stderr, "\x1e") {
				t.Errorf("the output shows a status record or error marker:\n%q", r.Stdout+r.Stderr)
			}
		})
	}
}

// TestProgramError: a Starlark error in one rank ends the job with exit
// status 1; its traceback names file and line on the launcher's standard
// error, and the launcher's last line names the cause once; the others'
// H1612 lines show only with -v.
func TestProgramError(t *testing.T) {
	for _, tc := range []struct {
		name, line3, want string
	}{
		{"fail", `fail("boom")`, "fail: boom"},
		{"division by zero", "x = 1 // 0", "floored division by zero"},
	} {
		for _, verbose := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/verbose=%v", tc.name, verbose), func(t *testing.T) {
				dir := t.TempDir()
				writeFile(t, filepath.Join(dir, "prog.star"), fmt.Sprintf(`print("rank %%d starts" %% comm.rank)
def main():
    if comm.rank == 1: %s
    comm.barrier()
`, tc.line3), 0o644)
				args := []string{"run", "-n", "3", "prog.star"}
				if verbose {
					args = []string{"run", "-v", "-n", "3", "prog.star"}
				}
				r := sperliRun(t, baseEnv, dir, args...)
				if r.Code != 1 {
					t.Errorf("exit status %d, want 1 (a program error)\n%v", r.Code, r)
				}
				var want strings.Builder
				for rank := 0; rank < 3; rank++ {
					fmt.Fprintf(&want, "[rank %d] rank %d starts\n", rank, rank)
				}
				if r.Stdout != want.String() {
					t.Errorf("stdout %q, want %q", r.Stdout, want.String())
				}
				errLines := lines(withoutNotes(r.Stderr))
				last := regexp.MustCompile(`^sperli: rank 1 failed: prog\.star:3:\d+: ` + regexp.QuoteMeta(tc.want) + `; ranks 0, 2 ended by it \(H1612\)$`)
				if len(errLines) == 0 || !last.MatchString(errLines[len(errLines)-1]) {
					t.Errorf("the launcher's last line is not %v\n%v", last, r)
				}
				for _, line := range errLines {
					if strings.HasPrefix(line, "sperli: ") && (strings.Contains(line, "lost") || strings.Contains(line, "killed")) {
						t.Errorf("launcher line %q: no loss, no rank killed by the launcher", line)
					}
					if strings.HasPrefix(line, "sperli: ") && line != errLines[len(errLines)-1] {
						t.Errorf("launcher line %q before the last: the cause is said once", line)
					}
				}
				if got := strings.Join(rankLines(r.Stderr, 1), "\n"); !strings.Contains(got, "prog.star:3:") || !strings.Contains(got, tc.want) {
					t.Errorf("rank 1's stderr %q does not show prog.star:3: and %q", got, tc.want)
				}
				for _, rank := range []int{0, 2} {
					got := strings.Join(rankLines(r.Stderr, rank), "\n")
					if verbose && !strings.Contains(got, "H1612") {
						t.Errorf("-v: rank %d's stderr %q does not show H1612", rank, got)
					}
					if !verbose && got != "" {
						t.Errorf("rank %d's stderr %q shown without -v", rank, got)
					}
				}
			})
		}
	}
}

// TestSyntaxError: a syntax error is exit status 2 with one line naming
// file:line:col, in a job (before any rank starts: TestProgramRefused)
// and alone.
func TestSyntaxError(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "syn.star"), "# a syntax error on line 2\ndef main(:\n    pass\n", 0o644)
	pos := regexp.MustCompile(`^sperli: syn\.star:2:\d+: .*\n$`)

	r := sperliRun(t, baseEnv, dir, "run", "-n", "3", "syn.star")
	if r.Code != 2 || !pos.MatchString(r.Stderr) || r.Stdout != "" {
		t.Errorf("sperli run -n 3 syn.star: exit status %d, want 2 and one line naming syn.star:2:COL\n%v", r.Code, r)
	}

	r = sperliRun(t, baseEnv, dir, "run", "syn.star")
	if r.Code != 2 {
		t.Errorf("sperli run syn.star: exit status %d, want 2\n%v", r.Code, r)
	}
	if !pos.MatchString(r.Stderr) || r.Stdout != "" {
		t.Errorf("sperli run syn.star: stderr %q, stdout %q; want syn.star:2:COL: on stderr only", r.Stderr, r.Stdout)
	}
}

// TestInterrupt: SIGINT or SIGTERM to the launcher while the ranks wait
// ends every rank and leaves no process behind; the launcher's exit status
// is 128 + the signal's number, as a shell's and mpirun's.
func TestInterrupt(t *testing.T) {
	recv := func(dir string) []string {
		return []string{writeFile(t, filepath.Join(dir, "recv.star"), "comm.recv(comm.size - 1 if comm.rank != comm.size - 1 else 0, 99)\n", 0o644)}
	}
	for _, tc := range []struct {
		name string
		args func(dir string) []string
		sig  os.Signal
		code int
		said string
	}{
		{"go ranks", func(dir string) []string { return []string{killme, dir} }, os.Interrupt, 130, "interrupt"},
		{"starlark ranks", recv, os.Interrupt, 130, "interrupt"},
		{"starlark ranks SIGTERM", recv, syscall.SIGTERM, 143, "terminated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			l := start(t, baseEnv, dir, append([]string{"run", "-n", "3"}, tc.args(dir)...)...)
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			var kids []procInfo
			if tc.name == "go ranks" {
				kids = waitPIDs(t, ctx, l, dir, 3)
			} else {
				// Three children that run sperli (past exec), each with
				// two peer connections: joined, waiting.
				ok := poll(ctx, func() bool {
					kids = children(l.Cmd.Process.Pid)
					if len(kids) != 3 {
						return false
					}
					for _, k := range kids {
						if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", k.PID)); exe != sperli || sockets(k.PID) < 2 {
							return false
						}
					}
					return true
				})
				if !ok {
					l.Stop()
					t.Fatalf("the launcher did not have 3 joined ranks within %v: %+v\nstderr:\n%s", timeout, kids, &l.Stderr)
				}
			}
			t.Cleanup(func() {
				for _, k := range kids {
					if alive(k) {
						syscall.Kill(k.PID, syscall.SIGKILL)
					}
				}
			})
			if err := l.Cmd.Process.Signal(tc.sig); err != nil {
				t.Fatal(err)
			}
			r := l.Wait(t, 30*time.Second)
			if r.Code != tc.code {
				t.Errorf("exit status %d after %v, want %d\n%v", r.Code, tc.sig, tc.code, r)
			}
			if !regexp.MustCompile(`(?m)^sperli: ` + tc.said + `: ending every rank$`).MatchString(r.Stderr) {
				t.Errorf("stderr %q does not say the launcher was ended by %v", r.Stderr, tc.sig)
			}
			for _, line := range lines(r.Stderr) {
				if strings.Contains(line, "lost") {
					t.Errorf("launcher line %q: a rank ended by the launcher is not lost", line)
				}
			}
			gone := func() bool {
				for _, k := range kids {
					if alive(k) {
						return false
					}
				}
				return true
			}
			ctx10, cancel10 := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel10()
			if !poll(ctx10, gone) {
				var left []int
				for _, k := range kids {
					if alive(k) {
						left = append(left, k.PID)
					}
				}
				t.Errorf("ranks %v still run 10 s after the launcher ended", left)
			}
		})
	}
}

// sockets counts the sockets open in process pid.
func sockets(pid int) int {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, _ := os.ReadDir(dir)
	n := 0
	for _, e := range ents {
		if l, _ := os.Readlink(filepath.Join(dir, e.Name())); strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}

// TestJobsAtOnce: jobs started at the same moment on one machine do not
// collide on ports.
func TestJobsAtOnce(t *testing.T) {
	const want = "[rank 0] rows=1000 total=500500 expected=500500 ok\n"
	for round := 0; round < 3; round++ {
		// Started back to back, well within the time a launcher takes to
		// bind its ranks' sockets.
		jobs := make([]*proc, 2)
		for i := range jobs {
			jobs[i] = start(t, baseEnv, "", "run", "-n", "4", "scripts/examples/sum.star", "1000")
		}
		for i, p := range jobs {
			if r := p.Wait(t, timeout); r.Code != 0 || r.Stdout != want || withoutNotes(r.Stderr) != "" {
				t.Errorf("round %d, job %d: %v\nwant exit status 0, stdout %q and no stderr", round, i, r, want)
			}
		}
	}
}

// TestRunAlone: `sperli run FILE.star` without -n runs the file alone
// (comm is None), takes the program's arguments, and caches the compiled
// module by content.
func TestRunAlone(t *testing.T) {
	dir := t.TempDir()
	cache := filepath.Join(dir, "xdg")
	home := filepath.Join(dir, "home")
	env := withEnv("XDG_CACHE_HOME="+cache, "HOME="+home)
	prog := writeFile(t, filepath.Join(dir, "alone.star"), "print(comm == None)\nprint(sperli.args)\n", 0o644)
	compiled := filepath.Join(cache, "sperli", "compiled")
	progFiles := func() []string {
		m, _ := filepath.Glob(filepath.Join(compiled, "*.prog"))
		return m
	}
	const want = "True\n[\"--steps\", \"5\"]\n"

	r := sperliRun(t, env, dir, "run", prog, "--steps", "5")
	if r.Code != 0 || r.Stdout != want || r.Stderr != "" {
		t.Fatalf("sperli run alone.star --steps 5: %v\nwant exit status 0 and stdout %q", r, want)
	}
	files := progFiles()
	if len(files) != 1 {
		t.Fatalf("after the first run the cache %s holds %q, want one .prog file", compiled, files)
	}
	if exists(filepath.Join(home, ".cache")) {
		t.Errorf("the cache went under HOME although XDG_CACHE_HOME is set")
	}
	// An old time, so that a rewrite shows whatever the clock's grain.
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(files[0], old, old); err != nil {
		t.Fatal(err)
	}

	r = sperliRun(t, env, dir, "run", prog, "--steps", "5")
	if r.Code != 0 || r.Stdout != want {
		t.Fatalf("second sperli run alone.star: %v", r)
	}
	if got := progFiles(); !slices.Equal(got, files) {
		t.Errorf("after the second run the cache holds %q, want %q", got, files)
	}
	if fi, err := os.Stat(files[0]); err != nil || !fi.ModTime().Equal(old) {
		t.Errorf("the cached module was written again on an unchanged file (stat: %v, %v)", fi.ModTime(), err)
	}

	// A changed file is compiled anew, beside the old entry.
	writeFile(t, prog, "print(comm == None, 'changed')\n", 0o644)
	r = sperliRun(t, env, dir, "run", prog)
	if r.Code != 0 || r.Stdout != "True changed\n" {
		t.Fatalf("sperli run of the changed file: %v", r)
	}
	if got := progFiles(); len(got) != 2 {
		t.Errorf("after a change the cache holds %q, want two .prog files", got)
	}
}

// TestOutputFormat: the ranks' stdout lines on the launcher's stdout and
// their stderr lines on its stderr, rank 0's first, then rank 1's...,
// every line prefixed "[rank i] ", and no escapes when the output is no
// terminal, with or without NO_COLOR.
func TestOutputFormat(t *testing.T) {
	var want, wantErr strings.Builder
	for r := 0; r < 3; r++ {
		fmt.Fprintf(&want, "[rank %d] out %d first\n[rank %d] out %d second\n", r, r, r, r)
		fmt.Fprintf(&wantErr, "[rank %d] err %d first\n[rank %d] err %d second\n", r, r, r, r)
	}
	for _, tc := range []struct {
		name string
		env  []string
	}{
		{"plain", baseEnv},
		{"NO_COLOR", withEnv("NO_COLOR=1")},
		{"TERM", withEnv("TERM=xterm-256color", "COLORTERM=truecolor")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sperliRun(t, tc.env, t.TempDir(), "run", "-n", "3", echo)
			if r.Code != 0 {
				t.Errorf("sperli run -n 3 echo: %v\nwant exit status 0", r)
			}
			if r.Stdout != want.String() {
				t.Errorf("stdout:\n%q\nwant:\n%q", r.Stdout, want.String())
			}
			if got := withoutNotes(r.Stderr); got != wantErr.String() {
				t.Errorf("stderr:\n%q\nwant:\n%q", got, wantErr.String())
			}
			if strings.Contains(r.Stdout+r.Stderr, "\x1b") {
				t.Errorf("output to a pipe holds escapes: %q", r.Stdout)
			}
		})
	}
}

// withoutNotes drops the launcher's notes ("sperli: note: ...", more
// ranks than processors on this machine) from stderr.
func withoutNotes(stderr string) string {
	var b strings.Builder
	for _, l := range lines(stderr) {
		if !strings.HasPrefix(l, "sperli: note: ") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func poll(ctx context.Context, cond func() bool) bool {
	return testbin.Poll(ctx, 20*time.Millisecond, cond)
}

// The /proc helpers are testbin's.
type procInfo = testbin.Proc

var (
	readStat = testbin.ReadProc
	children = testbin.Children
)

func alive(p procInfo) bool { return p.Alive() }
