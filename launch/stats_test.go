package launch

import (
	"strings"
	"testing"

	"sperli/record"
)

func withStats(rank int, st record.RankStats) *rankProc {
	return &rankProc{rank: rank, status: &record.Status{Stats: &st}}
}

// TestStatsReport: the slowest rank of the job and of each kind of
// collective is the one the others waited for, when it is clearly behind;
// ranks without a record, records with negative waits and kinds the
// runtime does not have are left out.
func TestStatsReport(t *testing.T) {
	coll := func(kv ...any) map[string]record.CollStats {
		m := map[string]record.CollStats{}
		for i := 0; i < len(kv); i += 3 {
			m[kv[i].(string)] = record.CollStats{Calls: int64(kv[i+1].(int)), WaitMS: kv[i+2].(float64)}
		}
		return m
	}
	procs := []*rankProc{
		withStats(0, record.RankStats{Collectives: 3, CollWaitMS: 500, Coll: coll("barrier", 1, 500.0, "allreduce", 2, 0.0)}),
		withStats(1, record.RankStats{Collectives: 3, CollWaitMS: 900, Coll: coll("barrier", 1, 500.0, "allreduce", 2, 400.0, "mystery", 9, 1.0)}),
		withStats(2, record.RankStats{Collectives: 3, CollWaitMS: 400.5, Coll: coll("barrier", 1, 0.5, "allreduce", 2, 400.0)}),
		withStats(3, record.RankStats{Collectives: 3, CollWaitMS: -5}),
		nil,
		{rank: 5},
	}
	rep := statsReport(procs, map[int]string{5: "killed by signal 9 (SIGKILL)"})
	if len(rep.Lost) != 1 || rep.Lost[0] != (lostStat{5, "killed by signal 9 (SIGKILL)"}) {
		t.Errorf("statsReport: lost %+v, want rank 5 killed by signal 9", rep.Lost)
	}
	if len(rep.Ranks) != 3 {
		t.Fatalf("statsReport: %d ranks, want 3 (0, 1, 2): %+v", len(rep.Ranks), rep.Ranks)
	}
	for i, want := range []bool{false, false, true} {
		if rep.Ranks[i].Slowest != want {
			t.Errorf("rank %d: slowest = %v, want %v (%+v)", i, rep.Ranks[i].Slowest, want, rep.Ranks[i])
		}
	}
	want := []collStat{
		{Kind: "barrier", Calls: 1, Slowest: 2, BehindMS: 499.5, MinWaitMS: 0.5, MaxWaitMS: 500},
		{Kind: "allreduce", Calls: 2, Slowest: 0, BehindMS: 400, MinWaitMS: 0, MaxWaitMS: 400},
	}
	if len(rep.Colls) != len(want) {
		t.Fatalf("collectives %+v, want %+v", rep.Colls, want)
	}
	for i, w := range want {
		if rep.Colls[i] != w {
			t.Errorf("collective %d = %+v, want %+v", i, rep.Colls[i], w)
		}
	}

	// Waits that differ by less than a tenth flag nobody.
	even := statsReport([]*rankProc{
		withStats(0, record.RankStats{Collectives: 1, CollWaitMS: 100, Coll: coll("barrier", 1, 100.0)}),
		withStats(1, record.RankStats{Collectives: 1, CollWaitMS: 95, Coll: coll("barrier", 1, 95.0)}),
	}, nil)
	if even.Ranks[0].Slowest || even.Ranks[1].Slowest || even.Colls[0].Slowest != -1 {
		t.Errorf("even waits: %+v", even)
	}

	var b strings.Builder
	writeStats(&b, "table", rep, false)
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 8 || !strings.HasPrefix(lines[4], "5     -  ") || !strings.HasSuffix(lines[4], " lost: killed by signal 9 (SIGKILL)") ||
		!strings.HasPrefix(lines[5], "collective  calls  slowest rank") || !strings.HasPrefix(lines[6], "barrier     1      2 ") {
		t.Errorf("table:\n%s", b.String())
	}
	b.Reset()
	writeStats(&b, "table", even, false)
	if !strings.Contains(b.String(), "\nbarrier     1      -  ") {
		t.Errorf("table without a slowest rank:\n%s", b.String())
	}
}
