// Package clib tests libsperli, the C library of SPEC §12, from the
// outside: it builds the library (scripts/libsperli/build.sh) and its C
// programs, runs the two check scripts, compares whole jobs of C ranks,
// and of C, Go and Starlark ranks together, with testdata/<name>.golden
// byte for byte, and runs the refusal matrix with a C rank (refusal_test.go).
//
//	go test ./tests/clib/             # what make test runs
//	go test ./tests/clib/ -update     # rewrite the golden files
//	LIBSPERLI_BENCH=1 go test -run TestBenchPairs -v ./tests/clib/   # benchmark_test.go
package clib

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"sperli/codes"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// sumLine is the line of SPEC §16 for the default 3,000,000 rows.
const sumLine = "rows=3000000 total=4500001500000 expected=4500001500000 ok"

// jobTimeout bounds every command a test runs.
const jobTimeout = 60 * time.Second

var (
	root   string // the module root
	bin    string // the programs built for these tests
	sperli string
	env    []string
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	var err error
	if root, err = moduleRoot(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if bin, err = os.MkdirTemp("", "sperli-clib-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(bin)
	sperli = filepath.Join(bin, "sperli")
	// The children see a cache of their own and none of the variables
	// that change what a job does or prints.
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "SPERLI_REFUSED_HOSTS", "SPERLI_TEST_FAILURE_SCHEDULE", "NO_COLOR", "XDG_CACHE_HOME", "SPERLI_SPIN_US", "SPERLI_WORKER":
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "XDG_CACHE_HOME="+filepath.Join(bin, "cache"), "SPERLI="+sperli, "LIBSPERLI_PREBUILT=1")
	if err := build(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// build makes the sperli binary, the Go ranks, the library, and the C
// programs the tests run.
func build() error {
	steps := [][]string{
		{"go", "build", "-o", sperli, "./cmd/sperli"},
		{"go", "build", "-o", filepath.Join(bin, "gosum"), "./scripts/examples/gosum"},
		{"go", "build", "-o", filepath.Join(bin, "gopeer"), "./tests/clib/gopeer"},
		{"sh", "scripts/libsperli/build.sh"},
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	lib := filepath.Join("libsperli", "c", runtime.GOOS)
	for _, c := range []struct{ out, src string }{
		{"csum", "scripts/examples/csum.c"},
		{"cpeer", "libsperli/test/cpeer.c"},
	} {
		steps = append(steps, []string{cc, "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", lib,
			"-o", filepath.Join(bin, c.out), c.src, filepath.Join(lib, "libsperli.a"), "-lpthread"})
	}
	for _, s := range steps {
		cmd := exec.Command(s[0], s[1:]...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v\n%s", strings.Join(s, " "), err, out)
		}
	}
	return nil
}

// moduleRoot walks up from the working directory to the directory of go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// result is how one process ended.
type result struct {
	stdout, stderr string
	code           int
}

// command makes a command that runs in the module root with the test
// environment, is killed when ctx ends, and is killed in t.Cleanup if it
// still runs then.
func command(t *testing.T, ctx context.Context, name string, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = root
	cmd.Env = env
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t.Cleanup(func() {
		if cmd.Process != nil {
			cmd.Process.Kill() // ErrProcessDone when it has ended
		}
	})
	return cmd, &stdout, &stderr
}

// run runs the command to its end within jobTimeout.
func run(t *testing.T, name string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), jobTimeout)
	defer cancel()
	cmd, stdout, stderr := command(t, ctx, name, args...)
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %q did not end within %v (killed)\nstdout:\n%s\nstderr:\n%s", name, args, jobTimeout, stdout, stderr)
	}
	return result{stdout.String(), stderr.String(), exitCode(t, err)}
}

func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	t.Fatalf("cannot run: %v", err)
	return -1
}

// check compares got with testdata/<name>.golden, or rewrites that file
// with -update.
func check(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// wantSumLine fails unless out has the exact line of SPEC §16 (with
// prefix), so that -update cannot bless a wrong total.
func wantSumLine(t *testing.T, out, prefix string) {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if l == prefix+sumLine {
			return
		}
	}
	t.Errorf("output has no line %q:\n%s", prefix+sumLine, out)
}

// randomLoopback returns an address 127.X.Y.Z with X, Y, Z in 1..254 whose
// ports 47000 … 47000+ranks-1 are free, for jobs of `sperli job make`.
func randomLoopback(t *testing.T, ranks int) string {
	t.Helper()
	b := func() int { return 1 + rand.IntN(254) }
next:
	for range 20 {
		addr := fmt.Sprintf("127.%d.%d.%d", b(), b(), b())
		for r := 0; r < ranks; r++ {
			ln, err := net.Listen("tcp", net.JoinHostPort(addr, fmt.Sprint(47000+r)))
			if err != nil {
				continue next
			}
			ln.Close()
		}
		return addr
	}
	t.Fatalf("no loopback address with free ports 47000..%d found", 47000+ranks-1)
	return ""
}

// TestCheckLibsperli runs scripts/libsperli/check-libsperli.sh: every
// function given each kind of wrong input, the code against the table.
func TestCheckLibsperli(t *testing.T) {
	t.Parallel()
	r := run(t, "sh", "scripts/libsperli/check-libsperli.sh")
	if r.code != 0 || !strings.Contains(r.stdout, "test_sperli: ok (") {
		t.Fatalf("check-libsperli.sh: exit status %d, want 0 and \"test_sperli: ok\"\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	t.Log(strings.TrimSpace(r.stdout))
}

// TestCheckRanks runs scripts/libsperli/check-ranks.sh: three C ranks in
// three processes, a barrier, allreduces, SPERLI_E_BUSY during a wait.
func TestCheckRanks(t *testing.T) {
	t.Parallel()
	r := run(t, "sh", "scripts/libsperli/check-ranks.sh")
	if r.code != 0 || !strings.Contains(r.stdout, "check-ranks.sh: ok") {
		t.Fatalf("check-ranks.sh: exit status %d, want 0\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

// TestCodes: the C library's text of every code is the text of the table
// (codes.All, SPEC §13), and the negative codes are the stable table of
// sperli.h.
func TestCodes(t *testing.T) {
	t.Parallel()
	r := run(t, filepath.Join(bin, "cpeer"), "codes")
	if r.code != 0 {
		t.Fatalf("cpeer codes: exit status %d\n%s", r.code, r.stderr)
	}
	got := map[int]string{}
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		n, text, _ := strings.Cut(l, "\t")
		c, err := strconv.Atoi(n)
		if err != nil {
			t.Fatalf("cpeer codes printed %q", l)
		}
		got[c] = text
	}
	for _, c := range codes.All() {
		if want := c.String() + ": " + c.Meaning(); got[int(c)] != want {
			t.Errorf("sperli_strerror(%d) = %q, want %q", int(c), got[int(c)], want)
		}
	}
	negative := []string{"ok", "SPERLI_E_NULL", "SPERLI_E_LENGTH", "SPERLI_E_RANK", "SPERLI_E_TAG", "SPERLI_E_TYPE",
		"SPERLI_E_OP", "SPERLI_E_COUNT", "SPERLI_E_HANDLE", "SPERLI_E_PATH", "SPERLI_E_BUSY", "SPERLI_E_OPERATION",
		"SPERLI_E_FINISHED", "SPERLI_E_OPEN", "SPERLI_E_SESSION"}
	for i, name := range negative {
		if !strings.HasPrefix(got[-i], name) {
			t.Errorf("sperli_strerror(%d) = %q, want %s…", -i, got[-i], name)
		}
	}
	// sperli.h says the same numbers.
	h, err := os.ReadFile(filepath.Join(root, "libsperli", "include", "sperli.h"))
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range negative[1:] {
		if want := fmt.Sprintf("#define %s (-%d)", name, i+1); !bytes.Contains(h, []byte(want)) {
			t.Errorf("sperli.h has no %q", want)
		}
	}
}

// TestRunCsum: the sum of SPEC §16 with three C ranks under the launcher.
func TestRunCsum(t *testing.T) {
	t.Parallel()
	r := run(t, sperli, "run", "-n", "3", filepath.Join(bin, "csum"))
	if r.code != 0 {
		t.Fatalf("sperli run -n 3 csum: exit status %d, want 0\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	wantSumLine(t, r.stdout, "[rank 0] ")
	check(t, "run-csum-n3", r.stdout)
}

// TestRunCFailure: a C rank that ends with a code tells the launcher
// through its status record, and its message is shown.
func TestRunCFailure(t *testing.T) {
	t.Parallel()
	// cpeer echo wants a job of two ranks; with three it ends with
	// SPERLI_E_RANK through sperli_exit.
	r := run(t, sperli, "run", "-n", "3", filepath.Join(bin, "cpeer"), "echo")
	if r.code != 1 {
		t.Errorf("sperli run -n 3 cpeer echo: exit status %d, want 1\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for i := 0; i < 3; i++ {
		if want := fmt.Sprintf("[rank %d] SPERLI_E_RANK: rank outside the job", i); !strings.Contains(r.stdout, want) {
			t.Errorf("output has no line %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stderr, "no status record") {
		t.Errorf("a C rank wrote no status record:\n%s", r.stderr)
	}

	// A lost rank: the C ranks left tell the launcher so (exit status 75).
	ctx, cancel := context.WithTimeout(context.Background(), jobTimeout)
	defer cancel()
	cmd, stdout, stderr := command(t, ctx, sperli, "run", "-n", "3", "--silence", "1000", filepath.Join(bin, "csum"))
	cmd.Env = append(cmd.Env, "SPERLI_TEST_FAILURE_SCHEDULE=0:1")
	code := exitCode(t, cmd.Run())
	if code != 75 || !strings.Contains(stderr.String(), "rank 1 lost") || strings.Contains(stderr.String(), "no status record") {
		t.Errorf("sperli run -n 3 csum with rank 1 dying: exit status %d, want 75, rank 1 lost, status records\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// TestMixedJob starts by hand the ranks of a job made by `sperli job make`,
// Starlark, Go and C ranks together, in a random order with small random
// delays; rank 0's standard output is the golden file.
func TestMixedJob(t *testing.T) {
	t.Parallel()
	star := []string{sperli, "rank", "scripts/examples/sum.star"}
	gorank := []string{filepath.Join(bin, "gosum")}
	crank := []string{filepath.Join(bin, "csum")}
	for _, tc := range []struct {
		name  string
		ranks [3][]string
	}{
		{"star0-go1-c2", [3][]string{star, gorank, crank}},
		{"c0-star1-go2", [3][]string{crank, star, gorank}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			addr := randomLoopback(t, 3)
			hostsFile := filepath.Join(dir, "hosts")
			if err := os.WriteFile(hostsFile, []byte(strings.Repeat(addr+"\n", 3)), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "job")
			if r := run(t, sperli, "job", "make", "-n", "3", "--hosts", hostsFile, "--out", out); r.code != 0 {
				t.Fatalf("sperli job make: exit status %d, want 0\nstderr:\n%s", r.code, r.stderr)
			}
			ctx, cancel := context.WithTimeout(context.Background(), jobTimeout)
			defer cancel()
			type proc struct {
				cmd            *exec.Cmd
				stdout, stderr *bytes.Buffer
				err            error
				done           chan struct{}
			}
			procs := make([]*proc, 3)
			for i, argv := range tc.ranks {
				cmd, stdout, stderr := command(t, ctx, argv[0], argv[1:]...)
				in, err := os.Open(filepath.Join(out, fmt.Sprintf("rank-%d.job", i)))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { in.Close() })
				cmd.Stdin = in
				procs[i] = &proc{cmd: cmd, stdout: stdout, stderr: stderr, done: make(chan struct{})}
			}
			order := rand.Perm(3)
			t.Logf("host %s, start order %v", addr, order)
			for _, i := range order {
				time.Sleep(time.Duration(rand.IntN(200)) * time.Millisecond) // a start skew, not a wait for anything
				p := procs[i]
				if err := p.cmd.Start(); err != nil {
					t.Fatalf("starting rank %d: %v", i, err)
				}
				go func() { p.err = p.cmd.Wait(); close(p.done) }()
			}
			for _, p := range procs {
				<-p.done // bounded: ctx kills the process
			}
			if ctx.Err() != nil {
				t.Errorf("the job did not end within %v (killed)", jobTimeout)
			}
			for i, p := range procs {
				if code := exitCode(t, p.err); code != 0 {
					t.Errorf("rank %d (%s): exit status %d, want 0\nstdout:\n%s\nstderr:\n%s", i, tc.ranks[i][0], code, p.stdout, p.stderr)
				}
				if s := p.stderr.String(); s != "" {
					t.Errorf("rank %d (%s) wrote on stderr (a rank started by hand writes no status record):\n%s", i, tc.ranks[i][0], s)
				}
			}
			for i := 1; i < 3; i++ {
				if s := procs[i].stdout.String(); s != "" {
					t.Errorf("rank %d printed %q, want nothing", i, s)
				}
			}
			got := procs[0].stdout.String()
			wantSumLine(t, got, "")
			check(t, "mixed-"+tc.name, got)
		})
	}
}
