package clib

import (
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"sperli/tests/internal/testbin"
)

var (
	workItemRE  = regexp.MustCompile(`(?m)^(?:\[rank \d+\] )?item (\d+) (\d+)$`)
	workStatsRE = regexp.MustCompile(`(?m)^(?:\[rank \d+\] )?stats items=(\d+) published=(\d+) executed=(\d+) duplicates=(\d+) generations=1 ranks=(\d+)$`)
)

// wantWork checks a queue's output: every item of n once with
// f(x) = (x·x·31 + 7) mod 100003 (libsperli/test/cwork.c,
// tests/elastic/testdata/wq.star), and every item published.
func wantWork(t *testing.T, out string, n int) {
	t.Helper()
	seen := map[int]bool{}
	for _, m := range workItemRE.FindAllStringSubmatch(out, -1) {
		id, _ := strconv.Atoi(m[1])
		v, _ := strconv.Atoi(m[2])
		if seen[id] || id >= n || v != (id*id*31+7)%100003 {
			t.Fatalf("item %d = %d (seen before: %v)\n%s", id, v, seen[id], out)
		}
		seen[id] = true
	}
	st := workStatsRE.FindStringSubmatch(out)
	if len(seen) != n || st == nil || st[1] != strconv.Itoa(n) || st[2] != strconv.Itoa(n) {
		t.Fatalf("%d items printed, stats %q; want %d, all published\n%s", len(seen), st, n, out)
	}
	// by_rank: the slots that executed an item, one to the job's three.
	if k, _ := strconv.Atoi(st[5]); k < 1 || k > 3 {
		t.Fatalf("stats %q: %d ranks executed items, want 1 to 3\n%s", st, k, out)
	}
}

// TestCWorkQueue: C ranks run a work queue (sperli_work_*), its wrong
// arguments refused first (cwork.c checks their codes).
func TestCWorkQueue(t *testing.T) {
	t.Parallel()
	r := run(t, sperli, "run", "-n", "3", filepath.Join(bin, "cwork"), "200")
	if r.Code != 0 {
		t.Fatalf("%v", r)
	}
	wantWork(t, r.Stdout, 200)
}

// TestMixedWorkQueue: Starlark and C ranks share one work queue, rank 0
// either.
func TestMixedWorkQueue(t *testing.T) {
	t.Parallel()
	star := []string{sperli, "rank", "tests/elastic/testdata/wq.star", "200", "inplace"}
	crank := []string{filepath.Join(bin, "cwork"), "200"}
	for _, tc := range []struct {
		name  string
		ranks [][]string
	}{
		{"star0-c1-star2", [][]string{star, crank, star}},
		{"c0-star1-c2", [][]string{crank, star, crank}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, res := testbin.HandJob(t, sperli, root, env, tc.ranks, jobTimeout)
			for i, r := range res {
				if r.Code != 0 {
					t.Fatalf("rank %d: exit status %d\nstdout:\n%s\nstderr:\n%s", i, r.Code, r.Stdout, r.Stderr)
				}
			}
			wantWork(t, res[0].Stdout, 200)
		})
	}
}
