package elastic

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sperli/tests/internal/testbin"
)

var slow = filepath.Join("testdata", "slow.star")

// killEach is a failure schedule that kills, in each of the first k
// generations g, slot slotOf(g) at its first collective.
func killEach(k int, slotOf func(g int) int) string {
	var s []string
	for g := range k {
		s = append(s, fmt.Sprintf("%d:%d", g, slotOf(g)))
	}
	return strings.Join(s, ",")
}

// absSlow is testdata/slow.star from any working directory.
func absSlow(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(slow)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// lineIndex is the index of the first launcher line matching re, -1 if
// none.
func lineIndex(r testbin.Result, re string) int {
	rx := regexp.MustCompile(re)
	for i, l := range strings.Split(r.Stderr, "\n") {
		if rx.MatchString(l) {
			return i
		}
	}
	return -1
}

// TestMaxLossesInPlace: 2 ranks and 3 spares, the slot serving rank 1
// killed in generations 0, 1 and 2. With --max-losses 2 the second loss
// ends the job (exit 75) with the line naming it, before a third
// generation; with --max-losses 4 the three losses are recovered and the
// job ends with 0.
func TestMaxLossesInPlace(t *testing.T) {
	schedule := killEach(3, func(g int) int { return g + 1 })
	args := func(k string) []string {
		return []string{"-n", "2", "--spares", "3", "--silence", "1000", "--max-losses", k, absSlow(t), "0"}
	}
	r, _ := run(t, schedule, args("2")...)
	if r.Code != 75 {
		t.Fatalf("--max-losses 2: exit %d, want 75\n%v", r.Code, r)
	}
	if lineIndex(r, `^sperli: --max-losses 2 reached: rank 1 \(slot 2\) lost \(.+\), the job's 2nd loss: ending the job$`) < 0 {
		t.Fatalf("--max-losses 2: no line naming the second loss\n%v", r)
	}
	if strings.Contains(r.Stdout, "done") || strings.Contains(r.Stderr, "generation 3:") {
		t.Fatalf("--max-losses 2: the job went on after its second loss\n%v", r)
	}
	r, _ = run(t, schedule, args("4")...)
	if r.Code != 0 || !strings.Contains(r.Stdout, "done in generation 3") {
		t.Fatalf("--max-losses 4 with 3 losses: exit %d, want 0 and the program done in generation 3\n%v", r.Code, r)
	}
	if strings.Contains(r.Stderr, "--max-losses") {
		t.Fatalf("--max-losses 4 said with 3 losses\n%v", r)
	}
}

// TestMaxLossesAcrossRestarts: without spares, with --checkpoint-dir,
// rank 1 killed in incarnations 0, 1 and 2. The count goes on over the
// restarts: with --max-losses 2 the loss of incarnation 1 ends the job
// (75) and no second restart follows; with --max-losses 4 the job ends
// with 0 after three restarts.
func TestMaxLossesAcrossRestarts(t *testing.T) {
	schedule := killEach(3, func(int) int { return 1 })
	args := func(k string) []string {
		return []string{"-n", "2", "--silence", "1000", "--checkpoint-dir", "ckpt", "--max-losses", k, absSlow(t), "0"}
	}
	r, _ := run(t, schedule, args("2")...)
	if r.Code != 75 {
		t.Fatalf("--max-losses 2: exit %d, want 75\n%v", r.Code, r)
	}
	if lineIndex(r, `^sperli: restart 1 of 3: incarnation 1$`) < 0 {
		t.Fatalf("--max-losses 2: the first loss was not restarted from\n%v", r)
	}
	if lineIndex(r, `^sperli: --max-losses 2 reached: rank 1 lost \(.+\), the job's 2nd loss: ending the job$`) < 0 {
		t.Fatalf("--max-losses 2: no line naming the second loss\n%v", r)
	}
	if strings.Contains(r.Stderr, "restart 2 of") || strings.Contains(r.Stdout, "done") {
		t.Fatalf("--max-losses 2: restarted after the second loss\n%v", r)
	}
	r, _ = run(t, schedule, args("4")...)
	if r.Code != 0 || lineIndex(r, `^sperli: restart 3 of 3: incarnation 3$`) < 0 || !strings.Contains(r.Stdout, "done") {
		t.Fatalf("--max-losses 4 with 3 losses: exit %d, want 0 after 3 restarts\n%v", r.Code, r)
	}
}

// TestMaxLossesUsage: a negative limit is a usage error.
func TestMaxLossesUsage(t *testing.T) {
	r, _ := run(t, "", "-n", "2", "--max-losses", "-1", absSlow(t), "0")
	if r.Code != 2 || !strings.Contains(r.Stderr, "sperli: --max-losses -1: want 1 or more") {
		t.Fatalf("exit %d, want 2 and the line\n%v", r.Code, r)
	}
}

// TestTimeoutAcrossRecoveries: --timeout bounds the whole job; an
// in-place recovery does not reset it. Twelve generations in a row lose
// the slot serving rank 1, each after rank 1 worked 1.5 s: the job needs
// 18 s at least, so a deadline of 10 s reset at each recovery would never
// pass and the job would end with 0. The one deadline ends it: exit 1,
// its line, after a recovery, and the program not done.
func TestTimeoutAcrossRecoveries(t *testing.T) {
	schedule := killEach(12, func(g int) int { return g + 1 })
	r, _ := run(t, schedule, "-n", "2", "--spares", "12", "--silence", "1000", "--timeout", "10s", absSlow(t), "1.5")
	if r.Code != 1 {
		t.Fatalf("exit %d, want 1\n%v", r.Code, r)
	}
	gen1 := lineIndex(r, `^sperli: generation 1: rank 1 \(slot 1 on 127\.0\.0\.1\) lost: `)
	end := lineIndex(r, `^sperli: --timeout 10s passed: ending every rank$`)
	if end < 0 || gen1 < 0 || gen1 > end {
		t.Fatalf("want a recovery (generation 1), then the --timeout line\n%v", r)
	}
	if strings.Contains(r.Stdout, "done") {
		t.Fatalf("the program was done before the deadline: it cannot be\n%v", r)
	}
}

// TestTimeoutAcrossRestarts: the same over launcher restarts from a
// checkpoint directory: thirty incarnations that each lose rank 1 after
// 1.5 s of work need 45 s; the deadline of 10 s, counted from the launch,
// ends the job after at least one restart, with exit 1 and its line.
func TestTimeoutAcrossRestarts(t *testing.T) {
	schedule := killEach(30, func(int) int { return 1 })
	r, _ := run(t, schedule, "-n", "2", "--silence", "1000", "--checkpoint-dir", "ckpt", "--restart-max", "30", "--timeout", "10s", absSlow(t), "1.5")
	if r.Code != 1 {
		t.Fatalf("exit %d, want 1\n%v", r.Code, r)
	}
	first := lineIndex(r, `^sperli: restart 1 of 30: incarnation 1$`)
	end := lineIndex(r, `^sperli: --timeout 10s passed: (ending every rank|no restart)$`)
	if first < 0 || end < 0 || first > end {
		t.Fatalf("want a restart, then the --timeout line\n%v", r)
	}
	if strings.Contains(r.Stdout, "done") || strings.Contains(r.Stderr, "no restart left") {
		t.Fatalf("the job ran past its deadline\n%v", r)
	}
}
