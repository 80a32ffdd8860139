package clib

// C ranks in jobs that outlive losses (SPEC §10): in-place recovery with
// spares (a call answers SPERLI_E_RECOVERED, the program resumes), a spare
// the job did not need (SPERLI_NOT_NEEDED, exit status 0), programs that
// manage their losses (set_on_loss return, revoke, shrink, agree; grow),
// and a job of C and Starlark ranks where a C spare takes a Starlark
// rank's place. The programs are libsperli/test/celastic.c and
// testdata/roll.star; the oracle reads only the --record file and the
// programs' output.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"sperli/tests/internal/testbin"
)

// runIn runs `sperli run ARGS` in a fresh working directory with the
// failure schedule (none for "").
func runIn(t *testing.T, schedule string, args ...string) (result, string) {
	t.Helper()
	work := t.TempDir()
	cmd := exec.Command(sperli, append([]string{"run"}, args...)...)
	cmd.Dir = work
	cmd.Env = slices.Clone(env)
	if schedule != "" {
		cmd.Env = append(cmd.Env, "SPERLI_TEST_FAILURE_SCHEDULE="+schedule)
	}
	return testbin.Start(t, cmd).Wait(t, jobTimeout), work
}

var rollRE = regexp.MustCompile(`(?m)^(?:\[rank \d+(?: · slot \d+)?\] )?(steps=\d+ total=\d+)$`)

// rollResult is the one result line of celastic roll (or roll.star).
func rollResult(t *testing.T, out string) string {
	t.Helper()
	m := rollRE.FindAllStringSubmatch(out, -1)
	if len(m) != 1 {
		t.Fatalf("%d result lines, want 1:\n%s", len(m), out)
	}
	return m[0][1]
}

// record reads the generation record and checks what holds for every job
// (testbin.ReadRecord: consecutive, chained by SHA-256, rank r at slot r
// in generation 0, each slot lost once, survivors' pids unchanged).
func record(t *testing.T, path string) []testbin.Generation { return testbin.ReadRecord(t, path) }

// TestCRecoverInPlace: three C ranks and a spare; a slot is killed after
// the first checkpoint. The survivors' call answers SPERLI_E_RECOVERED,
// they resume, the spare takes the lost rank and resumes its state from
// the buddy copy, and the result is that of the run without failures.
// In the run without failures the spare is not needed and exits 0.
func TestCRecoverInPlace(t *testing.T) {
	t.Parallel()
	prog := filepath.Join(bin, "celastic")
	args := []string{"-n", "3", "--spares", "1", "--silence", "1000", "--checkpoint-dir", "ckpt", "--record", "rec.jsonl", prog, "roll", "400", "20"}
	clean, work := runIn(t, "", args...)
	if clean.Code != 0 {
		t.Fatalf("run without failures: %v", clean)
	}
	want := rollResult(t, clean.Stdout)
	if strings.Contains(clean.Stdout, " · slot 3]") || strings.Contains(clean.Stderr, " · slot 3]") {
		t.Fatalf("the spare printed something in a job that did not need it:\n%v", clean)
	}
	if gens := record(t, filepath.Join(work, "rec.jsonl")); len(gens) != 1 || !slices.Equal(gens[0].Spares, []int{3}) {
		t.Fatalf("run without failures: record %+v, want generation 0 with spare 3", gens)
	}
	for _, tc := range []struct {
		name, schedule string
		lost, ranks    []int // the slot lost, the slots of generation 1
	}{
		{"rank 1", "0:1", []int{1}, []int{0, 3, 2}},
		{"rank 0", "0:0", []int{0}, []int{3, 1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, work := runIn(t, tc.schedule, args...)
			if r.Code != 0 {
				t.Fatalf("exit %d, want 0\n%v", r.Code, r)
			}
			if got := rollResult(t, r.Stdout); got != want {
				t.Fatalf("result %q, want %q (no failures)\n%v", got, want, r)
			}
			if strings.Contains(r.Stderr, "restart") {
				t.Fatalf("the job was restarted, not recovered in place\n%v", r)
			}
			gens := record(t, filepath.Join(work, "rec.jsonl"))
			if len(gens) != 2 || !slices.Equal(gens[1].Lost, tc.lost) || !slices.Equal(gens[1].Ranks, tc.ranks) || len(gens[1].Spares) != 0 {
				t.Fatalf("record %+v, want generation 1 losing %v with ranks %v", gens, tc.lost, tc.ranks)
			}
			// Every rank ends in generation 1; the survivors came through
			// SPERLI_E_RECOVERED once, the spare never (it joined there).
			for rank, slot := range tc.ranks {
				k := 1
				if slot == 3 {
					k = 0
				}
				line := fmt.Sprintf("[rank %d · slot %d] rank %d slot %d generation 1 recovered %d", rank, slot, rank, slot, k)
				if !strings.Contains(r.Stdout, line+"\n") {
					t.Errorf("stdout has no line %q:\n%s", line, r.Stdout)
				}
			}
			if n := strings.Count(r.Stderr, "SPERLI_E_RECOVERED: "); n != 2 {
				t.Errorf("%d SPERLI_E_RECOVERED messages, want 2 (the survivors)\n%s", n, r.Stderr)
			}
		})
	}
}

// TestCSparesRunOut: the second loss of a C job finds no spare left; the
// launcher restart of SPEC §9.5 takes over (the C ranks end with the loss,
// exit status 75, and start again from the checkpoint) and the result is
// still that of a run without failures.
func TestCSparesRunOut(t *testing.T) {
	t.Parallel()
	args := []string{"-n", "3", "--spares", "1", "--silence", "1000", "--checkpoint-dir", "ckpt", "--record", "rec.jsonl", filepath.Join(bin, "celastic"), "roll", "400", "20"}
	clean, _ := runIn(t, "", args...)
	want := rollResult(t, clean.Stdout)
	r, work := runIn(t, "0:1,1:2", args...)
	if r.Code != 0 {
		t.Fatalf("exit %d, want 0\n%v", r.Code, r)
	}
	if got := rollResult(t, r.Stdout); got != want {
		t.Fatalf("result %q, want %q\n%v", got, want, r)
	}
	if !strings.Contains(r.Stderr, "sperli: generation 1: rank 1") || !strings.Contains(r.Stderr, "restart 1") {
		t.Fatalf("want an in-place generation, then a restart\n%s", r.Stderr)
	}
	if !regexp.MustCompile(`(?m)^sperli: incarnation 2: every rank back in its program \d+ ms after the loss$`).MatchString(r.Stderr) {
		t.Fatalf("no restart time for the C ranks (they report when they are back)\n%s", r.Stderr)
	}
	b, _ := os.ReadFile(filepath.Join(work, "rec.jsonl"))
	if !strings.Contains(string(b), `"cause":"restart"`) {
		t.Fatalf("the record does not show the restart:\n%s", b)
	}
}

// TestCManageLosses: C ranks that manage their losses (SPERLI_LOSS_RETURN,
// sperli_failed, sperli_revoke, sperli_shrink, sperli_agree) survive the
// loss of a worker and of rank 0 and finish in the smaller world; with a
// spare and sperli_grow, the spare takes the lost rank and the size stays.
// The slot dies at its third collective: by then every rank has set
// SPERLI_LOSS_RETURN (a loss before a rank has set it is one the job
// recovers from as it was told to then). Two rounds of three ranks, eight
// of two: total 22.
func TestCManageLosses(t *testing.T) {
	t.Parallel()
	prog := filepath.Join(bin, "celastic")
	for _, tc := range []struct {
		name, schedule string
		args           []string
		want           []string
	}{
		{"no loss", "", []string{"-n", "3", prog, "ulfm", "10"}, []string{"[rank 0] size=3 rounds=10 total=30 generation=0"}},
		{"shrink, a worker lost", "0:2@collective-3", []string{"-n", "3", prog, "ulfm", "10"}, []string{"[rank 0] size=2 rounds=10 total=22 generation=1"}},
		{"shrink, rank 0 lost", "0:0@collective-3", []string{"-n", "3", prog, "ulfm", "10"}, []string{"[rank 0 · slot 1] size=2 rounds=10 total=22 generation=1"}},
		{"grow", "0:1@collective-3", []string{"-n", "3", "--spares", "1", prog, "grow", "10"}, []string{
			"[rank 0 · slot 0] rank 0 size 3 generation 1 joined 0 rounds 10",
			"[rank 2 · slot 2] rank 2 size 3 generation 1 joined 0 rounds 10",
			"[rank 1 · slot 3] rank 1 size 3 generation 1 joined 1 rounds 10"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := runIn(t, tc.schedule, append([]string{"--silence", "1000", "--record", "rec.jsonl"}, tc.args...)...)
			if r.Code != 0 {
				t.Fatalf("exit %d, want 0\n%v", r.Code, r)
			}
			if got, want := r.Stdout, strings.Join(tc.want, "\n")+"\n"; got != want {
				t.Fatalf("stdout:\n%s\nwant:\n%s\nstderr:\n%s", got, want, r.Stderr)
			}
		})
	}
}

// TestMixedRecover: a job made by `sperli job make --spares 1` and started
// by hand — C rank 0, Starlark rank 1, C rank 2, a C spare — whose
// Starlark rank is killed once a checkpoint is committed. The C spare
// takes rank 1 and resumes the state the Starlark rank committed (the
// buddy copy); the result is that of a run of C ranks without failures,
// which is that of Starlark ranks.
func TestMixedRecover(t *testing.T) {
	t.Parallel()
	star := filepath.Join(root, "tests", "clib", "testdata", "roll.star")
	prog := filepath.Join(bin, "celastic")
	steps := []string{"3000", "50"}
	clean, _ := runIn(t, "", append([]string{"-n", "3", "--checkpoint-dir", "ckpt", prog, "roll"}, steps...)...)
	cleanStar, _ := runIn(t, "", append([]string{"-n", "3", "--checkpoint-dir", "ckpt", star}, steps...)...)
	if clean.Code != 0 || cleanStar.Code != 0 {
		t.Fatalf("runs without failures:\n%v\n%v", clean, cleanStar)
	}
	want := rollResult(t, clean.Stdout)
	if got := rollResult(t, cleanStar.Stdout); got != want {
		t.Fatalf("roll.star gives %q, celastic roll %q: not the same computation", got, want)
	}

	dir, work := t.TempDir(), t.TempDir()
	addr := testbin.RandomLoopback(t, 4)
	hosts := testbin.WriteFile(t, filepath.Join(dir, "hosts"), strings.Repeat(addr+"\n", 4), 0o644)
	mk := exec.Command(sperli, "job", "make", "-n", "3", "--spares", "1", "--silence", "1000", "--hosts", hosts, "--checkpoint-dir", "ckpt", "--out", filepath.Join(dir, "job"))
	mk.Dir, mk.Env = work, env
	if r := testbin.Start(t, mk).Wait(t, jobTimeout); r.Code != 0 {
		t.Fatalf("job make: %v", r)
	}
	cmds := [][]string{
		append([]string{prog, "roll"}, steps...),
		append([]string{sperli, "rank", star}, steps...),
		append([]string{prog, "roll"}, steps...),
		append([]string{prog, "roll"}, steps...),
	}
	procs := make([]*testbin.Process, len(cmds))
	for i, c := range cmds {
		in, err := os.Open(filepath.Join(dir, "job", fmt.Sprintf("rank-%d.job", i)))
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		cmd := exec.Command(c[0], c[1:]...)
		cmd.Dir, cmd.Env, cmd.Stdin = work, env, in
		procs[i] = testbin.Start(t, cmd)
	}
	ctx, cancel := context.WithTimeout(context.Background(), jobTimeout)
	defer cancel()
	committed := func() bool {
		m, _ := filepath.Glob(filepath.Join(work, "ckpt", "*", "*"))
		return len(m) > 0
	}
	if !testbin.Poll(ctx, 10*time.Millisecond, committed) {
		t.Fatal("no checkpoint committed")
	}
	procs[1].Cmd.Process.Signal(syscall.SIGKILL)
	var res []result
	for _, p := range procs {
		res = append(res, p.Wait(t, jobTimeout))
	}
	for _, i := range []int{0, 2, 3} {
		if res[i].Code != 0 {
			t.Fatalf("slot %d: exit %d, want 0\n%v", i, res[i].Code, res[i])
		}
	}
	if res[1].Code == 0 {
		t.Fatalf("slot 1 was killed but ended with 0")
	}
	if got := rollResult(t, res[0].Stdout); got != want {
		t.Fatalf("result %q, want %q\n%v", got, want, res[0])
	}
	if want := "rank 1 slot 3 generation 1 recovered 0\n"; res[3].Stdout != want {
		t.Fatalf("the spare printed %q, want %q\n%v", res[3].Stdout, want, res[3])
	}
	for _, i := range []int{0, 2} {
		if !strings.Contains(res[i].Stdout, fmt.Sprintf("rank %d slot %d generation 1 recovered 1\n", i, i)) {
			t.Fatalf("slot %d did not recover once in generation 1:\n%v", i, res[i])
		}
	}
}
