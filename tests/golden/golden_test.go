// Package golden runs whole jobs with the real sperli binary and compares
// what they print, byte for byte, with testdata/<name>.golden. Run
//
//	go test ./tests/golden/ -update
//
// to rewrite the golden files after a deliberate change of the output.
package golden

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sperli/codes"
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

type result = testbin.Result

// run runs name with args in the module root to its end, within jobTimeout.
func run(t *testing.T, name string, args ...string) result {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env = root, env
	return testbin.Start(t, cmd).Wait(t, jobTimeout)
}

// run2 runs cmd as it is to its end, within jobTimeout.
func run2(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	return testbin.Start(t, cmd).Wait(t, jobTimeout)
}

func check(t *testing.T, name, got string) { t.Helper(); testbin.Golden(t, name, got, *update) }

// wantSumLine fails unless out has the exact line of SPEC §16 (with
// prefix), so that -update cannot bless a wrong total.
func wantSumLine(t *testing.T, out, prefix string) {
	t.Helper()
	testbin.WantLine(t, out, prefix+sumLine)
}

func TestRunSum(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 7} {
		t.Run(fmt.Sprintf("n%d", n), func(t *testing.T) {
			r := run(t, sperli, "run", "-n", fmt.Sprint(n), "scripts/examples/sum.star")
			if r.Code != 0 {
				t.Fatalf("sperli run -n %d sum.star: exit status %d, want 0\nstdout:\n%s\nstderr:\n%s", n, r.Code, r.Stdout, r.Stderr)
			}
			wantSumLine(t, r.Stdout, "[rank 0] ")
			check(t, fmt.Sprintf("run-sum-star-n%d", n), r.Stdout)
		})
	}
}

func TestRunGosum(t *testing.T) {
	r := run(t, sperli, "run", "-n", "3", gosum)
	if r.Code != 0 {
		t.Fatalf("sperli run -n 3 gosum: exit status %d, want 0\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
	}
	wantSumLine(t, r.Stdout, "[rank 0] ")
	check(t, "run-gosum-n3", r.Stdout)
}

func TestCodes(t *testing.T) {
	r := run(t, sperli, "codes")
	if r.Code != 0 || r.Stderr != "" {
		t.Fatalf("sperli codes: exit status %d, stderr %q; want 0 and nothing", r.Code, r.Stderr)
	}
	for _, want := range []string{"H1601", "H1611  peer lost: silence limit passed, or connection broke without bye", "H1625"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("sperli codes does not show %q", want)
		}
	}
	check(t, "codes", r.Stdout)
}

// TestCodeHelp: `sperli codes H1611` prints the code's meaning, what to do
// and the exit status.
func TestCodeHelp(t *testing.T) {
	r := run(t, sperli, "codes", "H1611")
	if r.Code != 0 || r.Stderr != "" {
		t.Fatalf("sperli codes H1611: exit status %d, stderr %q; want 0 and nothing", r.Code, r.Stderr)
	}
	for _, want := range []string{"H1611  peer lost: silence limit passed", "What to do: ", "--silence", "75"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("sperli codes H1611 does not show %q:\n%s", want, r.Stdout)
		}
	}
	check(t, "codes-H1611", r.Stdout)

	// Every code says what to do, and docs/troubleshooting.md has it.
	trouble, err := os.ReadFile(filepath.Join(root, "docs", "troubleshooting.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range codes.All() {
		r := run(t, sperli, "codes", c.String())
		if r.Code != 0 || !strings.HasPrefix(r.Stdout, c.String()+"  "+c.Meaning()) || !strings.Contains(r.Stdout, "\nWhat to do: ") {
			t.Errorf("sperli codes %s: exit status %d, want its meaning and what to do:\n%s", c, r.Code, r.Stdout)
		}
		if !strings.Contains(string(trouble), "| "+c.String()+" |") {
			t.Errorf("docs/troubleshooting.md has no row for %s", c)
		}
	}
}

// TestMixedJob starts by hand the ranks of a job made by `sperli job make`,
// Starlark and Go ranks together, in a random order with small random
// delays; rank 0's standard output is the golden file.
func TestMixedJob(t *testing.T) {
	star := []string{sperli, "rank", "scripts/examples/sum.star"}
	gorank := []string{gosum}
	for _, tc := range []struct {
		name  string
		ranks [][]string
	}{
		{"star-rank0-go-ranks", [][]string{star, gorank, gorank}},
		{"go-rank0-star-ranks", [][]string{gorank, star, star}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, made, res := testbin.HandJob(t, sperli, root, env, tc.ranks, jobTimeout)
			for i := 0; i < 3; i++ {
				f := filepath.Join(out, fmt.Sprintf("rank-%d.job", i))
				fi, err := os.Stat(f)
				if err != nil {
					t.Fatalf("sperli job make wrote no %s: %v", f, err)
				}
				if fi.Mode().Perm() != 0o600 {
					t.Errorf("%s has mode %v, want 0600", f, fi.Mode().Perm())
				}
				if !strings.Contains(made.Stdout, f) {
					t.Errorf("sperli job make output does not name %s:\n%s", f, made.Stdout)
				}
			}
			for i, r := range res {
				if r.Code != 0 {
					t.Errorf("rank %d (%s): exit status %d, want 0\nstdout:\n%s\nstderr:\n%s", i, tc.ranks[i][0], r.Code, r.Stdout, r.Stderr)
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
