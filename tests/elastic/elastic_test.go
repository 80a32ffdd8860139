// Package elastic tests in-place recovery with warm spares (SPEC §10.2)
// as processes: the real `sperli run --spares S --record FILE`, real
// ranks on loopback, SIGKILL by the test failure schedule. The oracle
// reads only the record file and the program's output: generations
// consecutive and chained by SHA-256, each loss recorded once, lost ranks
// taken by the lowest spares in rank order, the survivors' pids unchanged
// (nobody relaunched), and the result equal to that of a run without
// failures.
package elastic

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sperli/tests/internal/testbin"
)

var (
	root, sperli, stencil string
	baseEnv               []string
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	var err error
	if root, err = testbin.Root(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := testbin.TempDir("sperli-elastic-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	sperli = filepath.Join(dir, "sperli")
	if err := testbin.Build(root, [][2]string{{sperli, "./cmd/sperli"}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stencil = filepath.Join(root, "scripts", "examples", "stencil.star")
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

const timeout = 90 * time.Second

// run runs `sperli run ARGS` in a fresh directory with the schedule.
func run(t *testing.T, schedule string, args ...string) (testbin.Result, string) {
	t.Helper()
	l, work := start(t, schedule, args...)
	return l.Wait(t, timeout), work
}

// start starts `sperli run ARGS` in a directory of its own (returned) with
// the failure schedule.
func start(t *testing.T, schedule string, args ...string) (*testbin.Process, string) {
	t.Helper()
	work := t.TempDir()
	cmd := exec.Command(sperli, append([]string{"run"}, args...)...)
	cmd.Dir = work
	cmd.Env = append(slices.Clone(baseEnv), "TMPDIR="+t.TempDir())
	if schedule != "" {
		cmd.Env = append(cmd.Env, "SPERLI_TEST_FAILURE_SCHEDULE="+schedule)
	}
	return testbin.Start(t, cmd), work
}

var checksumRE = regexp.MustCompile(`(?m)^\[rank \d+(?: · slot \d+)?\] (cells=\d+ steps=\d+ checksum=\d+)$`)

func result(t *testing.T, r testbin.Result) string {
	t.Helper()
	m := checksumRE.FindAllStringSubmatch(r.Stdout, -1)
	if len(m) != 1 {
		t.Fatalf("%d result lines, want 1\n%v", len(m), r)
	}
	return m[0][1]
}

type genRecord = testbin.Generation

// oracle checks the record file on its own and returns its generations:
// a job of n ranks and spares spares that recovers in place.
func oracle(t *testing.T, path string, n, spares int) []genRecord {
	return checkRecord(t, path, n, spares, false)
}

// checkRecord is the oracle: the checks every record passes
// (testbin.ReadRecord), then the layout rules — n ranks, in place: lost
// ranks in rank order taken by the lowest spares left, the others where
// they were; with shrink: the live ranks in their old order.
func checkRecord(t *testing.T, path string, n, spares int, shrink bool) []genRecord {
	t.Helper()
	gens := testbin.ReadRecord(t, path)
	for _, g := range gens {
		if g.Size != n && !shrink {
			t.Fatalf("generation %d: size %d, want %d", g.Gen, g.Size, n)
		}
	}
	if g0 := gens[0]; len(g0.Spares) != spares || len(g0.Lost) != 0 {
		t.Fatalf("generation 0: spares %v lost %v", g0.Spares, g0.Lost)
	}
	for i := 1; i < len(gens); i++ {
		a, b := gens[i-1], gens[i]
		if shrink {
			want := slices.DeleteFunc(slices.Clone(a.Ranks), func(x int) bool { return slices.Contains(b.Lost, x) })
			if !slices.Equal(b.Ranks, want) {
				t.Fatalf("generation %d: ranks %v, want %v (the live ones in their old order)", b.Gen, b.Ranks, want)
			}
			continue
		}
		pool := slices.DeleteFunc(slices.Clone(a.Spares), func(x int) bool { return slices.Contains(b.Lost, x) })
		for r, s := range a.Ranks {
			if slices.Contains(b.Lost, s) {
				if len(pool) == 0 || b.Ranks[r] != pool[0] {
					t.Fatalf("generation %d: rank %d went to slot %d, want the lowest spare of %v", b.Gen, r, b.Ranks[r], pool)
				}
				pool = pool[1:]
			} else if b.Ranks[r] != s {
				t.Fatalf("generation %d: rank %d moved from live slot %d to %d", b.Gen, r, s, b.Ranks[r])
			}
		}
		if !slices.Equal(b.Spares, pool) {
			t.Fatalf("generation %d: spares %v, want %v", b.Gen, b.Spares, pool)
		}
	}
	return gens
}

// TestInPlaceScenarios: 8 ranks and 2 spares (10 slots), the four
// scenarios of SPEC §10 and a loss during the agreement; each against a
// run without failures.
func TestInPlaceScenarios(t *testing.T) {
	args := []string{"-n", "8", "--spares", "2", "--silence", "1000", "--checkpoint-dir", "ckpt", "--record", "rec.jsonl", stencil, "4000", "80", "10"}
	clean, _ := run(t, "", args...)
	if clean.Code != 0 {
		t.Fatalf("run without failures: %v", clean)
	}
	want := result(t, clean)
	for _, tc := range []struct {
		name, schedule string
		lost           []int // slots lost, in any generation
	}{
		{"promotion", "0:3", []int{3}},
		{"root", "0:0", []int{0}},
		// Both at their first checkpoint: at once when both reach it in
		// generation 0; the first loss may abandon generation 0 before
		// the other's checkpoint completes there, and then it dies at
		// its first checkpoint of generation 1.
		{"multi", "0:1,0:5,1:1,1:5", []int{1, 5}},
		{"continuous", "0:2,1:3", []int{2, 3}},
		{"during the agreement", "0:2,0:4@agree-1", []int{2, 4}},
		{"the coordinator during the agreement", "0:2,0:0@agree-1", []int{0, 2}},
		{"a spare during the agreement", "0:2,0:9@agree-1", []int{2, 9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, work := run(t, tc.schedule, args...)
			if r.Code != 0 {
				t.Fatalf("exit %d\n%v", r.Code, r)
			}
			if got := result(t, r); got != want {
				t.Fatalf("result %q, want %q (no failures)", got, want)
			}
			if strings.Contains(r.Stderr, "restart") {
				t.Fatalf("the job was restarted, not recovered in place\n%v", r)
			}
			gens := oracle(t, filepath.Join(work, "rec.jsonl"), 8, 2)
			var lost []int
			for _, g := range gens {
				lost = append(lost, g.Lost...)
			}
			slices.Sort(lost)
			if !slices.Equal(lost, tc.lost) {
				t.Fatalf("lost slots %v, want %v\n%v", lost, tc.lost, r)
			}
			if n := strings.Count(r.Stderr, "sperli: generation "); n != len(gens)-1 {
				t.Fatalf("%d generation lines for %d recoveries\n%s", n, len(gens)-1, r.Stderr)
			}
		})
	}
}

// TestSparesRunOut: the second loss finds no spare; the launcher restart
// of SPEC §9.5 takes over and the result is still right.
func TestSparesRunOut(t *testing.T) {
	args := []string{"-n", "4", "--spares", "1", "--silence", "1000", "--checkpoint-dir", "ckpt", "--record", "rec.jsonl", stencil, "3000", "60", "10"}
	clean, _ := run(t, "", args...)
	want := result(t, clean)
	r, work := run(t, "0:1,1:2", args...)
	if r.Code != 0 {
		t.Fatalf("exit %d\n%v", r.Code, r)
	}
	if got := result(t, r); got != want {
		t.Fatalf("result %q, want %q", got, want)
	}
	if !strings.Contains(r.Stderr, "sperli: generation 1: rank 1") || !strings.Contains(r.Stderr, "restart 1") {
		t.Fatalf("want an in-place generation, then a restart\n%s", r.Stderr)
	}
	b, _ := os.ReadFile(filepath.Join(work, "rec.jsonl"))
	if !strings.Contains(string(b), `"cause":"restart"`) {
		t.Fatalf("the record does not show the restart:\n%s", b)
	}
}

// TestNoSpareLeftExits75: with spares used up and no checkpoint
// directory, the job ends with 75 (SPEC §10.2 step 5).
func TestNoSpareLeftExits75(t *testing.T) {
	r, _ := run(t, "0:1,1:2", "-n", "3", "--spares", "1", "--silence", "1000", filepath.Join(root, "scripts", "examples", "sum.star"))
	if r.Code != 75 {
		t.Fatalf("exit %d, want 75\n%v", r.Code, r)
	}
}

// TestHandStartedRecovers: a job made with `sperli job make --spares 1`
// and started by hand, as another launcher would, recovers in place too:
// the agreement runs among the slots, not in a launcher. Slot 1 is killed
// by the test once a checkpoint is committed; the others finish with the
// result of a run without failures.
func TestHandStartedRecovers(t *testing.T) {
	args := []string{stencil, "3000", "1500", "50"}
	clean, _ := run(t, "", append([]string{"-n", "3", "--checkpoint-dir", "ckpt"}, args...)...)
	want := result(t, clean)

	dir := t.TempDir()
	addr := testbin.RandomLoopback(t, 4)
	hostsFile := testbin.WriteFile(t, filepath.Join(dir, "hosts"), strings.Repeat(addr+"\n", 4), 0o644)
	work := t.TempDir()
	env := append(slices.Clone(baseEnv), "TMPDIR="+t.TempDir())
	mk := exec.Command(sperli, "job", "make", "-n", "3", "--spares", "1", "--silence", "1000", "--hosts", hostsFile, "--checkpoint-dir", "ckpt", "--out", filepath.Join(dir, "job"))
	mk.Dir, mk.Env = work, env
	if r := testbin.Start(t, mk).Wait(t, timeout); r.Code != 0 {
		t.Fatalf("job make: %v", r)
	}
	procs := make([]*testbin.Process, 4)
	for i := range procs {
		in, err := os.Open(filepath.Join(dir, "job", fmt.Sprintf("rank-%d.job", i)))
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close()
		cmd := exec.Command(sperli, append([]string{"rank"}, args...)...)
		cmd.Dir, cmd.Env, cmd.Stdin = work, env, in
		procs[i] = testbin.Start(t, cmd)
	}
	// A committed epoch: its directory under ckpt/JOB.
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	committed := func() bool {
		m, _ := filepath.Glob(filepath.Join(work, "ckpt", "*", "*"))
		return len(m) > 0
	}
	if !testbin.Poll(ctx, 10*time.Millisecond, committed) {
		t.Fatal("no checkpoint committed")
	}
	procs[1].Cmd.Process.Signal(syscall.SIGKILL)
	var res []testbin.Result
	for _, p := range procs {
		res = append(res, p.Wait(t, timeout))
	}
	if got := strings.TrimSpace(res[0].Stdout); got != want {
		t.Fatalf("slot 0 printed %q, want %q\n%v", res[0].Stdout, want, res[0])
	}
	for _, i := range []int{0, 2, 3} {
		if res[i].Code != 0 {
			t.Fatalf("slot %d: exit %d, want 0\n%v", i, res[i].Code, res[i])
		}
	}
	if res[1].Code == 0 {
		t.Fatalf("slot 1 was killed but ended with 0")
	}
}

// TestProgramSeesLayout: comm.generation, comm.slot and comm.layout()
// after slot 1 was replaced by spare slot 3; lines are prefixed by the
// rank and the slot.
func TestProgramSeesLayout(t *testing.T) {
	prog := filepath.Join(root, "tests", "elastic", "testdata", "layout.star")
	r, _ := run(t, "0:1", "-n", "3", "--spares", "1", "--silence", "1000", "--checkpoint-dir", "ckpt", prog)
	if r.Code != 0 {
		t.Fatalf("exit %d\n%v", r.Code, r)
	}
	want := "[rank 0 · slot 0] rank 0 slot 0 generation 1 ranks [0, 3, 2] spares [] lost [1] size 3\n" +
		"[rank 2 · slot 2] rank 2 slot 2 generation 1 ranks [0, 3, 2] spares [] lost [1] size 3\n" +
		"[rank 1 · slot 3] rank 1 slot 3 generation 1 ranks [0, 3, 2] spares [] lost [1] size 3\n"
	if r.Stdout != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", r.Stdout, want)
	}
}

var farmRE = regexp.MustCompile(`(?m)^\[rank \d+(?: · slot \d+)?\] (items=\d+ published=\d+ twice=\d+ sum=\d+) size=(\d+) generation=(\d+)$`)

// TestTaskFarm: the Starlark master/worker farm of scripts/examples, which
// manages its losses itself (set_on_loss("return"), revoke, shrink):
// workers lost, the root lost, losses in two generations. Every item is
// published once and the sum is that of a run without failures; the
// record shows each loss once and the survivors never relaunched.
func TestTaskFarm(t *testing.T) {
	farm := filepath.Join(root, "scripts", "examples", "farm.star")
	args := []string{"-n", "6", "--silence", "1000", "--record", "rec.jsonl", farm, "30"}
	clean, _ := run(t, "", args...)
	m := farmRE.FindStringSubmatch(clean.Stdout)
	if clean.Code != 0 || m == nil {
		t.Fatalf("run without failures: %v", clean)
	}
	want := m[1]
	if !strings.HasPrefix(want, "items=30 published=30 twice=0 ") {
		t.Fatalf("run without failures: %q, want every item published once", want)
	}
	for _, tc := range []struct {
		name, schedule string
		lost           []int
	}{
		{"worker", "0:3@collective-2", []int{3}},
		{"root", "0:0@collective-3", []int{0}},
		// Both at their second collective. A rank still in its first one
		// when the other's loss is known leaves it (SPEC §10.3: every live
		// member raises) and shrinks: its own failure point, of
		// generation 0, may then never come. So one or both are lost.
		{"two at once", "0:1@collective-2,0:4@collective-2", []int{1, 4}},
		{"continuous, root second", "0:2@collective-2,1:0@collective-2", []int{0, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, work := run(t, tc.schedule, args...)
			if r.Code != 0 {
				t.Fatalf("exit %d\n%v", r.Code, r)
			}
			got := farmRE.FindAllStringSubmatch(r.Stdout, -1)
			if len(got) != 1 || got[0][1] != want {
				t.Fatalf("result %q, want one line %q\n%v", got, want, r)
			}
			gens := checkRecord(t, filepath.Join(work, "rec.jsonl"), 6, 0, true)
			var lost []int
			for _, g := range gens {
				lost = append(lost, g.Lost...)
			}
			slices.Sort(lost)
			if tc.name == "two at once" {
				killed := strings.Count(r.Stderr, "killed by signal 9 (SIGKILL)")
				if len(lost) == 0 || len(lost) > 2 || !slices.Contains(tc.lost, lost[0]) || !slices.Contains(tc.lost, lost[len(lost)-1]) || killed < len(lost) {
					t.Fatalf("lost slots %v, want 1 or 4 or both, each killed\n%v", lost, r)
				}
			} else if !slices.Equal(lost, tc.lost) {
				t.Fatalf("lost slots %v, want %v\n%v", lost, tc.lost, r)
			}
			last := gens[len(gens)-1]
			if got[0][2] != fmt.Sprint(last.Size) || got[0][3] != fmt.Sprint(last.Gen) {
				t.Fatalf("the program ended in size %s generation %s, the record in %d and %d", got[0][2], got[0][3], last.Size, last.Gen)
			}
		})
	}
}

// TestGrow: a program that manages its losses takes a spare in with
// grow(); the spare runs main() from its start in generation 1 as rank 1.
func TestGrow(t *testing.T) {
	prog := filepath.Join(root, "tests", "elastic", "testdata", "grow.star")
	r, _ := run(t, "0:1@collective-3", "-n", "3", "--spares", "1", "--silence", "1000", prog)
	if r.Code != 0 {
		t.Fatalf("exit %d\n%v", r.Code, r)
	}
	want := "[rank 0 · slot 0] rank 0 size 3 generation 1 joined 0 step 20\n" +
		"[rank 2 · slot 2] rank 2 size 3 generation 1 joined 0 step 20\n" +
		"[rank 1 · slot 3] rank 1 size 3 generation 1 joined 1 step 20\n"
	if r.Stdout != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", r.Stdout, want)
	}
	// Why is the launcher's sight of the end or the ranks', whichever came first.
	if !regexp.MustCompile(`(?m)^sperli: generation 1: rank 1 \(slot 1 on 127\.0\.0\.1\) lost: killed by signal 9 \(SIGKILL\); slot 3 on 127\.0\.0\.1 takes rank 1; back in \d+ ms$`).MatchString(r.Stderr) {
		t.Fatalf("no generation line:\n%s", r.Stderr)
	}
}

// TestSpareLost: a spare killed while the job runs is said and nothing
// else happens; the job ends with the result of a run without failures.
func TestSpareLost(t *testing.T) {
	args := []string{"-n", "3", "--spares", "2", "--silence", "1000", "--checkpoint-dir", "ckpt", "--record", "rec.jsonl", stencil, "3000", "1500", "50"}
	work := t.TempDir()
	cmd := exec.Command(sperli, append([]string{"run"}, args...)...)
	cmd.Dir, cmd.Env = work, append(slices.Clone(baseEnv), "TMPDIR="+t.TempDir())
	l := testbin.Start(t, cmd)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var pid int
	if !testbin.Poll(ctx, 10*time.Millisecond, func() bool {
		b, _ := os.ReadFile(filepath.Join(work, "rec.jsonl"))
		var g genRecord
		if json.Unmarshal(b, &g) != nil {
			return false
		}
		pid = g.Pids["4"]
		m, _ := filepath.Glob(filepath.Join(work, "ckpt", "*", "*"))
		return pid > 0 && len(m) > 0
	}) {
		t.Fatal("no record or no checkpoint")
	}
	syscall.Kill(pid, syscall.SIGKILL)
	r := l.Wait(t, timeout)
	if r.Code != 0 {
		t.Fatalf("exit %d\n%v", r.Code, r)
	}
	if !strings.Contains(r.Stderr, "slot 4 (a spare) lost") {
		t.Fatalf("the spare's loss is not said:\n%s", r.Stderr)
	}
	if strings.Contains(r.Stderr, "generation 1") {
		t.Fatalf("a spare's loss made a generation:\n%s", r.Stderr)
	}
	clean, _ := run(t, "", "-n", "3", "--checkpoint-dir", "ckpt", stencil, "3000", "1500", "50")
	if got, want := result(t, r), result(t, clean); got != want {
		t.Fatalf("result %q, want %q", got, want)
	}
}

// TestLossBeforeEveryRankSetMode: slot 1 dies at its first collective,
// when another rank may not have made set_on_loss("return") yet: ranks
// set differently see the same loss. The job must neither hang nor fork:
// a rank that takes losses in place wins, and every rank ends in
// generation 1 — by grow, or by in-place recovery with main() run again
// (the lines are the same). Several runs, as the order varies.
func TestLossBeforeEveryRankSetMode(t *testing.T) {
	prog := filepath.Join(root, "tests", "elastic", "testdata", "grow.star")
	for i := 0; i < 6; i++ {
		r, _ := run(t, "0:1@collective-1", "-n", "3", "--spares", "1", "--silence", "1000", prog)
		if r.Code != 0 {
			t.Fatalf("run %d: exit %d\n%v", i, r.Code, r)
		}
		// Survivors joined in generation 0 after a grow, in 1 after an
		// in-place recovery (main() ran again); the spare in 1 either way.
		for _, w := range []string{`\[rank 0 · slot 0\] rank 0 size 3 generation 1 joined [01] step 20`, `\[rank 2 · slot 2\] rank 2 size 3 generation 1 joined [01] step 20`, `\[rank 1 · slot 3\] rank 1 size 3 generation 1 joined 1 step 20`} {
			if !regexp.MustCompile(`(?m)^` + w + `$`).MatchString(r.Stdout) {
				t.Fatalf("run %d: stdout lacks %q\n%v", i, w, r)
			}
		}
	}
}

// TestEveryRankLostAtOnce: both ranks of a job with three spares are
// killed at once; no rank is left to begin the agreement, so the spares
// do: two of them take the ranks' places in place and the stencil's result
// is that of a run without failures. With one spare only, too few are
// left: the job ends with 75.
//
// "At once" is two scheduled deaths, and a survivor may hear of the first
// from a spare before it reads the dead rank's last frame: then it enters
// generation 1 without reaching its own point of death. The schedule
// kills slot 1 in generation 1 too (1:1@collective-1), so that either way
// both ranks are lost and the spares hold every rank at the end.
func TestEveryRankLostAtOnce(t *testing.T) {
	args := []string{"--silence", "1000", "--checkpoint-dir", "ckpt", "--record", "rec.jsonl", stencil, "3000", "60", "10"}
	clean, _ := run(t, "", append([]string{"-n", "2"}, args...)...)
	want := result(t, clean)
	r, work := run(t, "0:0@after-ckpt-2,0:1@after-ckpt-2,1:1@collective-1", append([]string{"-n", "2", "--spares", "3"}, args...)...)
	if r.Code != 0 {
		t.Fatalf("exit %d\n%v", r.Code, r)
	}
	if got := result(t, r); got != want {
		t.Fatalf("result %q, want %q", got, want)
	}
	gens := oracle(t, filepath.Join(work, "rec.jsonl"), 2, 3)
	var lost []int
	for _, g := range gens {
		lost = append(lost, g.Lost...)
	}
	slices.Sort(lost)
	if last := gens[len(gens)-1]; len(gens) > 3 || !slices.Equal(last.Ranks, []int{2, 3}) || !slices.Equal(lost, []int{0, 1}) {
		t.Fatalf("generations %+v, want ranks [2 3] at the end, slots 0 and 1 lost once each", gens)
	}
	prog := filepath.Join(t.TempDir(), "barriers.star")
	if err := os.WriteFile(prog, []byte("def main():\n    for i in range(5):\n        comm.barrier()\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, _ = run(t, "0:0@collective-3,0:1@collective-3,1:1@collective-1", "-n", "2", "--spares", "1", "--silence", "1000", prog)
	if r.Code != 75 {
		t.Fatalf("one spare for two lost ranks: exit %d, want 75\n%v", r.Code, r)
	}
}

// TestForgedRecords: a rank's program that writes the launcher's record
// lines itself — a generation report on its standard error claiming a
// shrink, a generation mark on its standard output — changes neither the
// record nor the output's generation marks (SPEC §10.4: only what the
// runtime sends, sealed with the rank's record key, counts); the lines
// are shown as the program wrote them.
func TestForgedRecords(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "p.star")
	if err := os.WriteFile(prog, []byte(`print("\x1esperli-mark 3")
print("after the mark")
comm.barrier()
`), 0o644); err != nil {
		t.Fatal(err)
	}
	forged := `{"kind":"generation","generation":1,"slot":%d,"rank":0,"size":1,"ranks":[0],"spares":[],"lost":[1,2],"cause":"forged","pid":1,"ms":1}`
	wrapper := filepath.Join(dir, "forge.sh")
	script := fmt.Sprintf("#!/bin/sh\n# The program forges its slot's report, then runs the rank.\nprintf '\\036sperli-gen %s\\n' \"$SPERLI_RANK\" >&2\nexec '%s' rank '%s'\n", forged, sperli, prog)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	r, work := run(t, "", "-n", "2", "--spares", "1", "--record", "rec.jsonl", wrapper)
	if r.Code != 0 {
		t.Fatalf("exit %d\n%v", r.Code, r)
	}
	gens := oracle(t, filepath.Join(work, "rec.jsonl"), 2, 1)
	if len(gens) != 1 {
		t.Fatalf("the record has %d generations, want generation 0 only (the forged report counted): %+v", len(gens), gens)
	}
	if strings.Contains(r.Stdout, "--- generation") || strings.Contains(r.Stderr, "--- generation") {
		t.Errorf("a forged line made a generation mark:\n%v", r)
	}
	for _, want := range []string{"[rank 0 · slot 0] \x1esperli-mark 3\n[rank 0 · slot 0] after the mark\n", "[rank 1 · slot 1] \x1esperli-mark 3\n"} {
		if !strings.Contains(r.Stdout, want) {
			t.Errorf("stdout lacks the program's own line %q:\n%q", want, r.Stdout)
		}
	}
	if !strings.Contains(r.Stderr, `sperli-gen {"kind":"generation","generation":1,"slot":0`) {
		t.Errorf("stderr lacks the program's forged line, shown as written:\n%q", r.Stderr)
	}
}

// TestSilentMemberNamed: slot 1 is killed and a slot goes mute in the
// agreement that follows (alive, heartbeating, answering nothing) — an
// acceptor, so the coordinator waits for its promise, or the coordinator
// itself, so the others wait for its prepare. The slot that waits names it
// (H1627, "it holds the agreement up") within twice the silence limit and
// a second of waiting on it, before the launcher's own deadline; the job
// ends with 1 (a liar: no restart, which would meet it again), and no
// process is left.
func TestSilentMemberNamed(t *testing.T) {
	args := []string{"--silence", "1000", "--checkpoint-dir", "ckpt", stencil, "3000", "60", "10"}
	for _, tc := range []struct {
		name, schedule, says string
		mute                 int
	}{
		{"acceptor", "0:1@after-ckpt-2,0:2@mute-agree-1", "promise", 2},
		{"coordinator", "0:1@after-ckpt-2,0:0@mute-agree-1", "prepare", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, work := run(t, tc.schedule, append([]string{"-n", "3", "--spares", "1", "--record", "rec.jsonl"}, args...)...)
			if r.Code != 1 {
				t.Fatalf("exit %d, want 1\n%v", r.Code, r)
			}
			want := fmt.Sprintf("H1627: protocol violation by slot %d: it sent no %s in the agreement on generation 1", tc.mute, tc.says)
			if !strings.Contains(r.Stderr, want) || !strings.Contains(r.Stderr, "it holds the agreement up") {
				t.Fatalf("no %q:\n%v", want, r)
			}
			if strings.Contains(r.Stderr, "no generation followed the loss") || strings.Contains(r.Stderr, "restart 1 of") {
				t.Fatalf("the launcher's deadline or a restart, not the named liar:\n%v", r)
			}
			for _, g := range testbin.ReadRecord(t, filepath.Join(work, "rec.jsonl")) {
				for slot, pid := range g.Pids {
					if err := syscall.Kill(pid, 0); err == nil {
						t.Errorf("slot %s of generation %d (pid %d) is still running", slot, g.Gen, pid)
					}
				}
			}
		})
	}
}

// TestStoppedSpareContinued: a spare stopped (SIGSTOP) past the silence
// limit is declared lost; continued (SIGCONT) while the job still runs, it
// finds every connection to it ended and exits by itself, and the job
// ends with 0 and the result of a run without failures — the zombie keeps
// neither the job nor the launcher waiting.
func TestStoppedSpareContinued(t *testing.T) {
	args := []string{"-n", "2", "--spares", "1", "--silence", "500", "--checkpoint-dir", "ckpt", "--record", "rec.jsonl", stencil, "3000", "4000", "50"}
	work := t.TempDir()
	cmd := exec.Command(sperli, append([]string{"run"}, args...)...)
	cmd.Dir, cmd.Env = work, append(slices.Clone(baseEnv), "TMPDIR="+t.TempDir())
	var stdout, stderr testbin.SyncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}) // closed once the launcher has ended
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			testbin.KillTree(cmd.Process.Pid)
			<-done
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var spare int
	if !testbin.Poll(ctx, 10*time.Millisecond, func() bool {
		b, _ := os.ReadFile(filepath.Join(work, "rec.jsonl"))
		var g genRecord
		if json.Unmarshal(b, &g) == nil {
			spare = g.Pids["2"]
		}
		m, _ := filepath.Glob(filepath.Join(work, "ckpt", "*", "*"))
		return spare > 0 && len(m) > 0 // joined: a checkpoint was written
	}) {
		t.Fatal("no record with the spare's pid, or no checkpoint")
	}
	if err := syscall.Kill(spare, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if !testbin.Poll(ctx, 10*time.Millisecond, func() bool { return strings.Contains(stderr.String(), "slot 2 (a spare) lost") }) {
		syscall.Kill(spare, syscall.SIGCONT)
		t.Fatalf("the stopped spare was never declared lost:\n%s", stderr.String())
	}
	syscall.Kill(spare, syscall.SIGCONT)
	if !testbin.Poll(ctx, 10*time.Millisecond, func() bool { p, ok := testbin.ReadProc(spare); return !ok || p.State == "Z" }) {
		t.Fatalf("the continued spare (pid %d) never ended:\n%s", spare, stderr.String())
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("the launcher never ended:\n%s", stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	if strings.Contains(stderr.String(), "was replaced and did not end; killed") {
		t.Fatalf("the launcher had to kill the continued spare:\n%s", stderr.String())
	}
	clean, _ := run(t, "", "-n", "2", "--checkpoint-dir", "ckpt", stencil, "3000", "4000", "50")
	if got, want := result(t, testbin.Result{Stdout: stdout.String()}), result(t, clean); got != want {
		t.Fatalf("result %q, want %q", got, want)
	}
}

// TestStoppedRankContinued: after a first loss (slot 2 killed, spare 6
// takes rank 2), a rank of generation 1 is stopped (SIGSTOP) past the
// silence limit: its watchers declare it lost and the second spare takes
// its place. Continued (SIGCONT) while generation 2 runs, it reads the
// frames that waited for it — every link closing on it, each after a lost
// frame that names it — learns it was left, and exits by itself without
// telling anyone of a loss. The job ends with 0 and the result of a run
// without failures; nobody is named a liar (H1627), and the record holds
// two generations after the first.
func TestStoppedRankContinued(t *testing.T) {
	const stopped = 4
	prog := []string{stencil, "3000", "8000", "50"}
	args := append([]string{"-n", "6", "--spares", "2", "--silence", "500", "--checkpoint-dir", "ckpt", "--record", "rec.jsonl"}, prog...)
	l, work := start(t, "0:2@after-ckpt-2", args...)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	rec := filepath.Join(work, "rec.jsonl")
	var pid int
	if !testbin.Poll(ctx, 10*time.Millisecond, func() bool {
		g, ok := lastGeneration(rec)
		pid = g.Pids[strconv.Itoa(stopped)]
		return ok && g.Gen == 1
	}) || pid == 0 {
		t.Fatalf("no generation 1 with slot %d's pid in the record:\n%v", stopped, l.Wait(t, timeout))
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The job goes on without the stopped slot only once the second spare
	// took its place: two more checkpoints committed say so. (The
	// launcher records generation 2 only when it saw the lost slot's
	// process end, or 10 s later.)
	stoppedAt := lastEpoch(work)
	if !testbin.Poll(ctx, 10*time.Millisecond, func() bool { return lastEpoch(work) >= stoppedAt+2 }) {
		syscall.Kill(pid, syscall.SIGCONT)
		t.Fatalf("no checkpoint after slot %d stopped (at epoch %d):\n%v", stopped, stoppedAt, l.Wait(t, timeout))
	}
	syscall.Kill(pid, syscall.SIGCONT)
	if !testbin.Poll(ctx, 10*time.Millisecond, func() bool { p, ok := testbin.ReadProc(pid); return !ok || p.State == "Z" }) {
		t.Fatalf("the continued slot %d (pid %d) never ended:\n%v", stopped, pid, l.Wait(t, timeout))
	}
	r := l.Wait(t, timeout)
	if r.Code != 0 {
		t.Fatalf("exit %d\n%v", r.Code, r)
	}
	if strings.Contains(r.Stderr, "H1627") || strings.Contains(r.Stderr, "was replaced and did not end; killed") {
		t.Fatalf("a liar named, or the continued slot killed by the launcher:\n%v", r)
	}
	gens := oracle(t, rec, 6, 2)
	if len(gens) != 3 || !slices.Equal(gens[1].Lost, []int{2}) || !slices.Equal(gens[2].Lost, []int{stopped}) {
		t.Fatalf("generations %+v, want slot 2 lost in 1 and slot %d in 2", gens, stopped)
	}
	clean, _ := run(t, "", append([]string{"-n", "6", "--checkpoint-dir", "ckpt"}, prog...)...)
	if got, want := result(t, r), result(t, clean); got != want {
		t.Fatalf("result %q, want %q", got, want)
	}
}

// lastEpoch is the newest checkpoint epoch with a COMMIT under work/ckpt.
func lastEpoch(work string) int {
	m, _ := filepath.Glob(filepath.Join(work, "ckpt", "*", "*", "COMMIT"))
	last := 0
	for _, f := range m {
		if e, err := strconv.Atoi(filepath.Base(filepath.Dir(f))); err == nil {
			last = max(last, e)
		}
	}
	return last
}

// lastGeneration is the last whole line of a record file being written,
// decoded leniently (the oracle reads the finished file).
func lastGeneration(path string) (testbin.Generation, bool) {
	b, _ := os.ReadFile(path)
	var last testbin.Generation
	ok := false
	for line := range strings.Lines(string(b)) {
		var g testbin.Generation
		if strings.HasSuffix(line, "\n") && json.Unmarshal([]byte(line), &g) == nil {
			last, ok = g, true
		}
	}
	return last, ok
}
