// Package golden runs whole jobs with the real sperli binary and compares
// what they print, byte for byte, with testdata/<name>.golden. Run
//
//	go test ./tests/golden/ -update
//
// to rewrite the golden files after a deliberate change of the output.
package golden

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
	"sperli/tests/internal/testbin"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// sumLine is the line of SPEC §16 for the default 3,000,000 rows.
const sumLine = "rows=3000000 total=4500001500000 expected=4500001500000 ok"

// jobTimeout bounds every command a test runs.
const jobTimeout = 120 * time.Second

var (
	root   string // the module root
	sperli string // the sperli binary built for these tests
	gosum  string // the Go sum example
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
	dir, err := os.MkdirTemp("", "sperli-golden-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	sperli, gosum = filepath.Join(dir, "sperli"), filepath.Join(dir, "gosum")
	if err := testbin.Build(root, [][2]string{{sperli, "./cmd/sperli"}, {gosum, "./scripts/examples/gosum"}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The children see a cache of their own and none of the variables
	// that change what a job does or prints.
	cache := filepath.Join(dir, "cache")
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "SPERLI_REFUSED_HOSTS", "SPERLI_TEST_FAILURE_SCHEDULE", "NO_COLOR", "XDG_CACHE_HOME":
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "XDG_CACHE_HOME="+cache)
	return m.Run()
}

// moduleRoot walks up from the working directory to the directory of go.mod.

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

func TestRunSum(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 7} {
		t.Run(fmt.Sprintf("n%d", n), func(t *testing.T) {
			r := run(t, sperli, "run", "-n", fmt.Sprint(n), "scripts/examples/sum.star")
			if r.code != 0 {
				t.Fatalf("sperli run -n %d sum.star: exit status %d, want 0\nstdout:\n%s\nstderr:\n%s", n, r.code, r.stdout, r.stderr)
			}
			wantSumLine(t, r.stdout, "[rank 0] ")
			check(t, fmt.Sprintf("run-sum-star-n%d", n), r.stdout)
		})
	}
}

func TestRunGosum(t *testing.T) {
	r := run(t, sperli, "run", "-n", "3", gosum)
	if r.code != 0 {
		t.Fatalf("sperli run -n 3 gosum: exit status %d, want 0\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	wantSumLine(t, r.stdout, "[rank 0] ")
	check(t, "run-gosum-n3", r.stdout)
}

func TestCodes(t *testing.T) {
	r := run(t, sperli, "codes")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("sperli codes: exit status %d, stderr %q; want 0 and nothing", r.code, r.stderr)
	}
	for _, want := range []string{"H1601", "H1611  peer lost: silence limit passed, or connection broke without bye", "H1625"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("sperli codes does not show %q", want)
		}
	}
	check(t, "codes", r.stdout)
}

// randomLoopback returns an address 127.X.Y.Z with X, Y, Z in 1..254, so
// that the fixed ports of a job made by `sperli job make` (47000 + rank)
// do not collide with another test's. An address whose ports are taken
// already (a listener on the wildcard address holds them on every
// address) is passed over.
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

// TestMixedJob starts by hand the ranks of a job made by `sperli job make`,
// Starlark and Go ranks together, in a random order with small random
// delays; rank 0's standard output is the golden file.
func TestMixedJob(t *testing.T) {
	star := []string{sperli, "rank", "scripts/examples/sum.star"}
	gorank := []string{gosum}
	for _, tc := range []struct {
		name  string
		ranks [3][]string
	}{
		{"star-rank0-go-ranks", [3][]string{star, gorank, gorank}},
		{"go-rank0-star-ranks", [3][]string{gorank, star, star}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			addr := randomLoopback(t, 3)
			hostsFile := filepath.Join(dir, "hosts")
			if err := os.WriteFile(hostsFile, []byte(strings.Repeat(addr+"\n", 3)), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "job")
			r := run(t, sperli, "job", "make", "-n", "3", "--hosts", hostsFile, "--out", out)
			if r.code != 0 {
				t.Fatalf("sperli job make: exit status %d, want 0\nstderr:\n%s", r.code, r.stderr)
			}
			for i := 0; i < 3; i++ {
				f := filepath.Join(out, fmt.Sprintf("rank-%d.job", i))
				fi, err := os.Stat(f)
				if err != nil {
					t.Fatalf("sperli job make wrote no %s: %v", f, err)
				}
				if fi.Mode().Perm() != 0o600 {
					t.Errorf("%s has mode %v, want 0600", f, fi.Mode().Perm())
				}
				if !strings.Contains(r.stdout, f) {
					t.Errorf("sperli job make output does not name %s:\n%s", f, r.stdout)
				}
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
				time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond) // a start skew, not a wait for anything
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
