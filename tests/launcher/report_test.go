package launcher

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// launcherSays returns the launcher's lines on stderr, its notes left out.
func launcherSays(stderr string) []string {
	var out []string
	for _, l := range lines(stderr) {
		if strings.HasPrefix(l, "sperli: ") && !strings.HasPrefix(l, "sperli: note: ") {
			out = append(out, strings.TrimPrefix(l, "sperli: "))
		}
	}
	return out
}

// wantSays fails unless the launcher's lines match want, one expression
// a line, in order.
func wantSays(t *testing.T, what string, r result, want ...string) {
	t.Helper()
	got := launcherSays(r.Stderr)
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = regexp.MustCompile("^(?:" + want[i] + ")$").MatchString(got[i])
	}
	if !ok {
		t.Errorf("%s: the launcher says\n  %s\nwant lines matching\n  %s\n%v", what, strings.Join(got, "\n  "), strings.Join(want, "\n  "), r)
	}
}

const sigkill = `killed by signal 9 \(SIGKILL\)`

// TestLossOneCause: a rank killed by a signal is lost with that one cause
// in every run, whichever process the launcher sees end first (the
// survivors see the connection close), said as it happens and again as
// the last line with the ranks it ended (exit status 75).
func TestLossOneCause(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "p.star"), "def main():\n    comm.barrier()\n    comm.barrier()\n", 0o644)
	for run := 0; run < 3; run++ {
		r := sperliRun(t, withEnv("SPERLI_TEST_FAILURE_SCHEDULE=0:1"), dir, "run", "-n", "3", "p.star")
		if r.Code != 75 {
			t.Fatalf("run %d: exit status %d, want 75\n%v", run, r.Code, r)
		}
		wantSays(t, "a lost rank", r, "rank 1 lost: "+sigkill, "rank 1 lost: "+sigkill+`; ranks 0, 2 ended by it \(H1611(, H1612)?\)`)
	}
}

// TestLossReturned: a loss the program manages itself
// (set_on_loss("return")) gets its line from the launcher, and --stats
// shows the lost rank; --timeout's report says how a killed rank ended.
func TestLossReturned(t *testing.T) {
	dir := t.TempDir()
	// Rank 1 is killed in its third collective: after every rank has
	// made set_on_loss and the barrier after it.
	writeFile(t, filepath.Join(dir, "ret.star"), `def main():
    comm.set_on_loss("return")
    comm.barrier()
    code = "none"
    for i in range(2):
        r = sperli.attempt(lambda: comm.barrier())
        if not r.ok:
            code = r.code
            break
    print("barrier %s failed %s" % (code, comm.failed()))
    if len(sperli.args) > 0 and comm.rank != 1:
        comm.recv(2 - comm.rank, 9)   # never sent: the job waits for --timeout
`, 0o644)
	env := withEnv("SPERLI_TEST_FAILURE_SCHEDULE=0:1@collective-3")
	r := sperliRun(t, env, dir, "run", "-n", "3", "--stats", "ret.star")
	if r.Code != 0 {
		t.Fatalf("exit status %d, want 0\n%v", r.Code, r)
	}
	for _, rank := range []int{0, 2} {
		if got := rankLines(r.Stdout, rank); len(got) != 1 || got[0] != "barrier H1611 failed [1]" {
			t.Errorf("rank %d printed %q, want barrier H1611 failed [1]", rank, got)
		}
	}
	wantSays(t, "a returned loss", r, "rank 1 lost: "+sigkill+`; the program went on without it \(set_on_loss\("return"\)\)`)
	if !regexp.MustCompile(`(?m)^1( +-){11} +lost: ` + sigkill + `$`).MatchString(r.Stderr) {
		t.Errorf("--stats shows no line of lost rank 1:\n%s", r.Stderr)
	}
	r = sperliRun(t, env, dir, "run", "-n", "3", "--stats=json", "ret.star")
	if !strings.Contains(r.Stderr, `"lost":[{"rank":1,"why":"killed by signal 9 (SIGKILL)"}]`) {
		t.Errorf("--stats=json shows no lost rank 1:\n%s", r.Stderr)
	}

	r = sperliRun(t, env, dir, "run", "-n", "3", "--timeout", "6s", "ret.star", "wait")
	if r.Code != 1 {
		t.Errorf("--timeout: exit status %d, want 1\n%v", r.Code, r)
	}
	if !strings.Contains(r.Stderr, "sperli:   rank 1: ended: killed by signal 9 (SIGKILL)\n") || strings.Contains(r.Stderr, "exit status -1") {
		t.Errorf("--timeout's report does not say rank 1 was killed by signal 9 (SIGKILL):\n%s", r.Stderr)
	}
}

// TestSlotWords: in a job with spares, processes are slots and ranks are
// ranks: a second loss that no spare is left for is said of its rank with
// its own cause; the abandoned output is marked with the generation that
// was abandoned (1, after an in-place recovery), and the next
// generation's output starts under its own mark.
func TestSlotWords(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "count.star"), `def main():
    comm.use_checkpoints()
    state = comm.resume()
    step = 0 if state == None else int(str(state))
    if comm.rank == 0:
        print("generation %d at step %d" % (comm.generation, step))
    for k in range(step + 1, 6):
        comm.allreduce("int64", "sum", array.pack("int64", [k]))
        comm.checkpoint(str(k))
`, 0o644)
	r := sperliRun(t, withEnv("SPERLI_TEST_FAILURE_SCHEDULE=0:1@after-ckpt-1,1:2@after-ckpt-3"), dir,
		"run", "-n", "3", "--spares", "1", "--checkpoint-dir", "ck", "count.star")
	if r.Code != 0 {
		t.Fatalf("exit status %d, want 0\n%v", r.Code, r)
	}
	wantSays(t, "two losses, one spare", r,
		`generation 1: rank 1 \(slot 1 on 127\.0\.0\.1\) lost: `+sigkill+`; slot 3 on 127\.0\.0\.1 takes rank 1; back in \d+ ms`,
		"rank 2 lost: "+sigkill,
		`rank 2 restarts where it was, on 127\.0\.0\.1: no unused host line is left`,
		`restart 1 of 3: incarnation 2`,
		`incarnation 2: every rank back in its program \d+ ms after the loss`)
	want := regexp.MustCompile(`^--- generation 1 \(abandoned\) ---\n\[rank 0 · slot 0\] generation 0 at step 0\n\[rank 0 · slot 0\] --- generation 1 ---\n\[rank 0 · slot 0\] generation 1 at step 1\n--- generation 2 ---\n\[rank 0 · slot 0\] generation 2 at step 4\n$`)
	if !want.MatchString(r.Stdout) {
		t.Errorf("stdout:\n%s\nwant it to match %v", r.Stdout, want)
	}
}
