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
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"sperli/codes"
	"sperli/tests/internal/testbin"
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
	if root, err = testbin.Root(); err != nil {
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
		{"celastic", "libsperli/test/celastic.c"},
		{"cwork", "libsperli/test/cwork.c"},
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

type result = testbin.Result

// command makes a command that runs in the module root with the test
// environment, is killed when ctx ends, and is killed in t.Cleanup if it
// still runs then.
func command(t *testing.T, ctx context.Context, name string, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = root
	// A copy: callers append to it, and parallel tests appending to one
	// shared backing array overwrite each other's variables (a race).
	cmd.Env = slices.Clip(env)
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

// run runs the command in the module root to its end within jobTimeout.
func run(t *testing.T, name string, args ...string) result {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = root, env
	return testbin.Start(t, cmd).Wait(t, jobTimeout)
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

func check(t *testing.T, name, got string) { t.Helper(); testbin.Golden(t, name, got, *update) }

// wantSumLine fails unless out has the exact line of SPEC §16 (with
// prefix), so that -update cannot bless a wrong total.
func wantSumLine(t *testing.T, out, prefix string) {
	t.Helper()
	testbin.WantLine(t, out, prefix+sumLine)
}

// TestCheckLibsperli runs scripts/libsperli/check-libsperli.sh: every
// function given each kind of wrong input, the code against the table.
func TestCheckLibsperli(t *testing.T) {
	t.Parallel()
	r := run(t, "sh", "scripts/libsperli/check-libsperli.sh")
	if r.Code != 0 || !strings.Contains(r.Stdout, "test_sperli: ok (") {
		t.Fatalf("check-libsperli.sh: exit status %d, want 0 and \"test_sperli: ok\"\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	t.Log(strings.TrimSpace(r.Stdout))
}

// TestCheckRanks runs scripts/libsperli/check-ranks.sh: three C ranks in
// three processes, a barrier, allreduces, SPERLI_E_BUSY during a wait.
func TestCheckRanks(t *testing.T) {
	t.Parallel()
	r := run(t, "sh", "scripts/libsperli/check-ranks.sh")
	if r.Code != 0 || !strings.Contains(r.Stdout, "check-ranks.sh: ok") {
		t.Fatalf("check-ranks.sh: exit status %d, want 0\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
}

// TestCodes: the C library's text of every code is the text of the table
// (codes.All, SPEC §13), and the negative codes are the stable table of
// sperli.h.
func TestCodes(t *testing.T) {
	t.Parallel()
	r := run(t, filepath.Join(bin, "cpeer"), "codes")
	if r.Code != 0 {
		t.Fatalf("cpeer codes: exit status %d\n%s", r.Code, r.Stderr)
	}
	got := map[int]string{}
	for _, l := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
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
		"SPERLI_E_FINISHED", "SPERLI_E_OPEN", "SPERLI_E_SESSION", "SPERLI_E_FORK", "SPERLI_E_COMM", "SPERLI_E_RECOVERED",
		"SPERLI_E_MODE"}
	for i, name := range negative {
		if !strings.HasPrefix(got[-i], name) {
			t.Errorf("sperli_strerror(%d) = %q, want %s…", -i, got[-i], name)
		}
	}
	// The one positive code that is no refusal: a spare not needed.
	if !strings.HasPrefix(got[1], "SPERLI_NOT_NEEDED: ") {
		t.Errorf("sperli_strerror(1) = %q, want SPERLI_NOT_NEEDED…", got[1])
	}
	// sperli.h says the same numbers.
	h, err := os.ReadFile(filepath.Join(root, "libsperli", "include", "sperli.h"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"#define SPERLI_NOT_NEEDED 1\n", "#define SPERLI_LOSS_RECOVER 0 ", "#define SPERLI_LOSS_RETURN 1 "} {
		if !bytes.Contains(h, []byte(want)) {
			t.Errorf("sperli.h has no %q", want)
		}
	}
	for i, name := range negative[1:] {
		if want := fmt.Sprintf("#define %s (-%d)", name, i+1); !bytes.Contains(h, []byte(want)) {
			t.Errorf("sperli.h has no %q", want)
		}
	}
	// So do the tables of docs/errors.md and docs/c.md, row for row.
	for _, doc := range []struct{ path, row string }{
		{"docs/errors.md", "| -%d | %s | "},
		{"docs/c.md", "| -%d | `%s` | "},
	} {
		b, err := os.ReadFile(filepath.Join(root, doc.path))
		if err != nil {
			t.Fatal(err)
		}
		for i, name := range negative[1:] {
			if want := fmt.Sprintf(doc.row, i+1, name); !bytes.Contains(b, []byte(want)) {
				t.Errorf("%s has no row %q", doc.path, want)
			}
		}
		if next := fmt.Sprintf("| -%d | ", len(negative)); bytes.Contains(b, []byte(next)) {
			t.Errorf("%s has a row -%d that sperli.h does not", doc.path, len(negative))
		}
	}
}

// TestRunCsum: the sum of SPEC §16 with three C ranks under the launcher.
func TestRunCsum(t *testing.T) {
	t.Parallel()
	r := run(t, sperli, "run", "-n", "3", filepath.Join(bin, "csum"))
	if r.Code != 0 {
		t.Fatalf("sperli run -n 3 csum: exit status %d, want 0\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	wantSumLine(t, r.Stdout, "[rank 0] ")
	check(t, "run-csum-n3", r.Stdout)
}

// TestRunCFailure: a C rank that ends with a code tells the launcher
// through its status record, and its message is shown.
func TestRunCFailure(t *testing.T) {
	t.Parallel()
	// cpeer echo wants a job of two ranks; with three it ends with
	// SPERLI_E_RANK through sperli_exit.
	r := run(t, sperli, "run", "-n", "3", filepath.Join(bin, "cpeer"), "echo")
	if r.Code != 1 {
		t.Errorf("sperli run -n 3 cpeer echo: exit status %d, want 1\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	for i := 0; i < 3; i++ {
		if want := fmt.Sprintf("[rank %d] SPERLI_E_RANK: rank outside the job", i); !strings.Contains(r.Stderr, want) {
			t.Errorf("stderr has no line %q:\n%s", want, r.Stderr)
		}
	}
	if strings.Contains(r.Stderr, "no status record") {
		t.Errorf("a C rank wrote no status record:\n%s", r.Stderr)
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
		ranks [][]string
	}{
		{"star0-go1-c2", [][]string{star, gorank, crank}},
		{"c0-star1-go2", [][]string{crank, star, gorank}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, res := testbin.HandJob(t, sperli, root, env, tc.ranks, jobTimeout)
			for i, r := range res {
				if r.Code != 0 {
					t.Errorf("rank %d (%s): exit status %d, want 0\nstdout:\n%s\nstderr:\n%s", i, tc.ranks[i][0], r.Code, r.Stdout, r.Stderr)
				}
				if r.Stderr != "" {
					t.Errorf("rank %d (%s) wrote on stderr (a rank started by hand writes no status record):\n%s", i, tc.ranks[i][0], r.Stderr)
				}
			}
			for i := 1; i < 3; i++ {
				if s := res[i].Stdout; s != "" {
					t.Errorf("rank %d printed %q, want nothing", i, s)
				}
			}
			got := res[0].Stdout
			wantSumLine(t, got, "")
			check(t, "mixed-"+tc.name, got)
		})
	}
}
