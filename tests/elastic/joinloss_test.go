package elastic

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"sperli/tests/internal/testbin"
)

var scaleSumRE = regexp.MustCompile(`(?m)^\[rank 0[^\]]*\] sum=(\d+) want=(\d+)$`)

// checkScaleSum checks scripts/bench/scale.star's line: the allreduce of
// every rank's number is the sum of 1 … n.
func checkScaleSum(t *testing.T, r testbin.Result) {
	t.Helper()
	m := scaleSumRE.FindStringSubmatch(r.Stdout)
	if m == nil || m[1] != m[2] {
		t.Fatalf("no right sum line from rank 0\n%v", r)
	}
}

// TestLossDuringJoin: a slot that dies while the job joins — once it has
// one or two of its join's links, so that some of its neighbours have a
// link to it and others wait for it — is replaced by a spare in place
// (the others heal their join around it), and ends a job without spares
// with 75 at once, with no rank left for the launcher to kill.
func TestLossDuringJoin(t *testing.T) {
	prog := filepath.Join(root, "scripts", "bench", "scale.star")
	for _, tc := range []struct {
		schedule string
		spares   int
		lost     int
	}{
		{"0:5@join-1", 2, 5},
		{"0:0@join-1", 2, 0},
		{"0:8@join-2", 2, 8},
		{"0:12@join-1", 1, 12},
		{"0:5@join-1", 0, 5},
		{"0:0@join-2", 0, 0},
	} {
		t.Run(fmt.Sprintf("%s, %d spares", tc.schedule, tc.spares), func(t *testing.T) {
			r, work := run(t, tc.schedule, "-n", "16", "--spares", fmt.Sprint(tc.spares), "--silence", "1000", "--record", "rec.jsonl", prog)
			if strings.Contains(r.Stderr, "did not end") {
				t.Fatalf("the launcher had to kill ranks\n%v", r)
			}
			if tc.spares == 0 {
				if r.Code != 75 || !strings.Contains(r.Stderr, fmt.Sprintf("sperli: rank %d lost: killed by signal 9", tc.lost)) {
					t.Fatalf("exit %d, want 75 naming rank %d lost\n%v", r.Code, tc.lost, r)
				}
				return
			}
			if r.Code != 0 {
				t.Fatalf("exit %d, want 0 (a spare for the loss)\n%v", r.Code, r)
			}
			checkScaleSum(t, r)
			gens := oracle(t, filepath.Join(work, "rec.jsonl"), 16, tc.spares)
			if len(gens) != 2 || !slices.Equal(gens[1].Lost, []int{tc.lost}) {
				t.Fatalf("generations %+v, want one recovery of slot %d", gens, tc.lost)
			}
		})
	}
}

// TestKillDuringJoinAt128: 128 ranks and 2 spares; the test SIGKILLs a
// rank process from outside while the launcher is still starting the
// others (once it has started a third, a half or all of them): some of
// the victim's neighbours have a link to it, others wait for it in their
// join, others are not started yet. A spare takes its place, the job
// exits 0 with the right sum, and the record's oracle holds. Without
// spares the job ends with 75 and the launcher kills no rank.
func TestKillDuringJoinAt128(t *testing.T) {
	const n = 128
	prog := filepath.Join(root, "scripts", "bench", "scale.star")
	rng := rand.New(rand.NewSource(1))
	for _, tc := range []struct {
		started, spares int
	}{{n / 3, 2}, {n / 2, 2}, {n + 2, 2}, {n / 2, 0}} {
		t.Run(fmt.Sprintf("after %d started, %d spares", tc.started, tc.spares), func(t *testing.T) {
			l, work := start(t, "", "-n", fmt.Sprint(n), "--spares", fmt.Sprint(tc.spares), "--record", "rec.jsonl", prog)
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			var kids []testbin.Proc
			if !testbin.Poll(ctx, 5*time.Millisecond, func() bool {
				kids = testbin.Children(l.Cmd.Process.Pid)
				return len(kids) >= tc.started
			}) {
				t.Fatalf("the launcher did not start %d ranks", tc.started)
			}
			victim := kids[rng.Intn(len(kids))]
			syscall.Kill(victim.PID, syscall.SIGKILL)
			r := l.Wait(t, timeout)
			t.Logf("killed pid %d with %d of %d slots started; %s", victim.PID, len(kids), n+tc.spares, strings.TrimSpace(r.Stderr))
			if strings.Contains(r.Stderr, "did not end") {
				t.Fatalf("the launcher had to kill ranks\n%v", r)
			}
			if tc.spares == 0 {
				if r.Code != 75 {
					t.Fatalf("exit %d, want 75\n%v", r.Code, r)
				}
				return
			}
			if r.Code != 0 {
				t.Fatalf("exit %d, want 0 (a spare for the loss)\n%v", r.Code, r)
			}
			checkScaleSum(t, r)
			oracle(t, filepath.Join(work, "rec.jsonl"), n, tc.spares)
		})
	}
}
