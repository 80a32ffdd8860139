package sched

import (
	"slices"
	"testing"

	"sperli/wire"
)

// TestChoose: the line of the table each call runs by, on both sides of
// every switch.
func TestChoose(t *testing.T) {
	cases := []struct {
		kind    wire.CollKind
		size, n int
		want    string
	}{
		{wire.CollBarrier, 1, 0, "dissemination"},
		{wire.CollBarrier, bruckRanks, 0, "dissemination"},
		{wire.CollBarrier, bruckRanks + 1, 0, "star"},
		{wire.CollBcast, 1, chainMin, "star"},
		{wire.CollBcast, 2, chainMin - 1, "star"},
		{wire.CollBcast, 2, chainMin, "chain"},
		{wire.CollBcast, 32, chainMin, "chain"},
		{wire.CollReduce, 1, 8, "star"},
		{wire.CollReduce, 2, 8, "bruck"},
		{wire.CollReduce, 4, bruckMax / 4, "bruck"},
		{wire.CollReduce, 4, bruckMax/4 + 8, "star"},
		{wire.CollReduce, 5, 8, "star"},
		{wire.CollReduce, 2, chainMin - 8, "star"},
		{wire.CollReduce, 2, chainMin, "blocks"},
		{wire.CollReduce, 1, chainMin, "star"},
		{wire.CollAllreduce, 2, bruckMax / 2, "bruck"},
		{wire.CollAllreduce, 2, bruckMax/2 + 8, "star"},
		{wire.CollAllreduce, 17, chainMin, "blocks"},
		{wire.CollReduceScatter, 3, 24, "bruck"},
		{wire.CollReduceScatter, 9, 72, "star"},
		{wire.CollReduceScatter, 3, chainMin + 8, "blocks"},
		{wire.CollAllgather, 3, 8, "bruck"},
		{wire.CollAllgather, 8, 8, "star"},
		{wire.CollAllgather, 2, chainMin, "ring"},
		{wire.CollAlltoall, 2, chainMin, "pairwise"},
		{wire.CollAlltoall, 1, 0, "pairwise"},
		{wire.CollAlltoall, treeMin - 1, 8 * (treeMin - 1), "pairwise"},
		{wire.CollAlltoall, treeMin, 0, "bruck"},
		{wire.CollAlltoall, treeMin, treeMin * bruckBlock, "bruck"},
		{wire.CollAlltoall, treeMin, treeMin * (bruckBlock + 1), "pairwise"},
		{wire.CollAlltoall, 256, 256 * 2048, "bruck"},   // alltoall-2k.star at 256 ranks
		{wire.CollAlltoall, 1024, 1024 * 2048, "bruck"}, // and at 1,024
		{wire.CollAlltoall, 512, bruckAlltoallMax, "bruck"},
		{wire.CollAlltoall, 1024, bruckAlltoallMax + 1024, "pairwise"},
		{wire.CollGather, 2, chainMin, "star"},
		{wire.CollScatter, 2, chainMin, "star"},
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
	for _, k := range append(slices.Clone(matrixKinds), wire.CollBarrier) {
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
	if r, ok := Choose(wire.CollKind(99), 2, 8); ok {
		t.Errorf("Choose(collective(99)) = %q, want none", r.Name)
	}
	links, _, errs := run(t, 1, func(l *fakeLink) Call { return Call{Kind: wire.CollKind(99)} })
	if errs[0] == nil || links[0].sends+links[0].takes != 0 {
		t.Errorf("Run(collective(99)) = %v after %d sends and %d takes, want an error and none", errs[0], links[0].sends, links[0].takes)
	}
}
