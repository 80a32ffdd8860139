package sched

import (
	"slices"
	"testing"
)

// TestChoose: the line of the table each call runs by, on both sides of
// every switch.
func TestChoose(t *testing.T) {
	cases := []struct {
		kind    Kind
		size, n int
		want    string
	}{
		{Barrier, 1, 0, "dissemination"},
		{Barrier, bruckRanks, 0, "dissemination"},
		{Barrier, bruckRanks + 1, 0, "star"},
		{Bcast, 1, chainMin, "star"},
		{Bcast, 2, chainMin - 1, "star"},
		{Bcast, 2, chainMin, "chain"},
		{Bcast, 32, chainMin, "chain"},
		{Reduce, 1, 8, "star"},
		{Reduce, 2, 8, "bruck"},
		{Reduce, 4, bruckMax / 4, "bruck"},
		{Reduce, 4, bruckMax/4 + 8, "star"},
		{Reduce, 5, 8, "star"},
		{Reduce, 2, chainMin - 8, "star"},
		{Reduce, 2, chainMin, "blocks"},
		{Reduce, 1, chainMin, "star"},
		{Allreduce, 2, bruckMax / 2, "bruck"},
		{Allreduce, 2, bruckMax/2 + 8, "star"},
		{Allreduce, 17, chainMin, "blocks"},
		{ReduceScatter, 3, 24, "bruck"},
		{ReduceScatter, 9, 72, "star"},
		{ReduceScatter, 3, chainMin + 8, "blocks"},
		{Allgather, 3, 8, "bruck"},
		{Allgather, 8, 8, "star"},
		{Allgather, 2, chainMin, "ring"},
		{Alltoall, 2, chainMin, "pairwise"},
		{Alltoall, 1, 0, "pairwise"},
		{Alltoall, treeMin - 1, 8 * (treeMin - 1), "pairwise"},
		{Alltoall, treeMin, 0, "bruck"},
		{Alltoall, treeMin, treeMin * bruckBlock, "bruck"},
		{Alltoall, treeMin, treeMin * (bruckBlock + 1), "pairwise"},
		{Alltoall, 256, 256 * 2048, "bruck"},   // alltoall-2k.star at 256 ranks
		{Alltoall, 1024, 1024 * 2048, "bruck"}, // and at 1,024
		{Alltoall, 512, bruckAlltoallMax, "bruck"},
		{Alltoall, 1024, bruckAlltoallMax + 1024, "pairwise"},
		{Gather, 2, chainMin, "star"},
		{Scatter, 2, chainMin, "star"},
	}
	for _, c := range cases {
		r, ok := Choose(c.kind, c.size, c.n)
		if !ok || r.Name != c.want {
			t.Errorf("Choose(%s, %d, %d) = %q, %v; want %q, true", c.kind, c.size, c.n, r.Name, ok, c.want)
		}
	}
}

// TestTableEnds: every kind's last line always holds, so that every call
// of it has a schedule, and a kind without lines has none.
func TestTableEnds(t *testing.T) {
	for _, k := range append(slices.Clone(matrixKinds), Barrier) {
		var last Rule
		for _, r := range table {
			if r.Kind == k {
				last = r
			}
		}
		if last.Run == nil || last.When != nil {
			t.Errorf("the last line of %s is %q, want one that always holds", k, last.Name)
		}
	}
	if r, ok := Choose(Kind(99), 2, 8); ok {
		t.Errorf("Choose(collective(99)) = %q, want none", r.Name)
	}
	links, _, errs := run(t, 1, func(l *fakeLink) Call { return Call{Kind: Kind(99)} })
	if errs[0] == nil || links[0].sends+links[0].takes != 0 {
		t.Errorf("Run(collective(99)) = %v after %d sends and %d takes, want an error and none", errs[0], links[0].sends, links[0].takes)
	}
}
