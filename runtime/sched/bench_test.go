package sched

import (
	"fmt"
	"testing"

	"sperli/wire"
)

// BenchmarkMany runs calls of 8 bytes a rank on 64 and 1,024 ranks over
// the fake Link by the tree's lines and by the lines they replace there
// (the star, dissemination): what the fake measures is goroutines and
// channels, not TLS connections, so it compares the schedules' frames and
// steps, not the runtime's times.
func BenchmarkMany(b *testing.B) {
	lines := []struct {
		kind wire.CollKind
		name string
		s    Schedule
	}{
		{wire.CollBarrier, "tree", treeBarrier},
		{wire.CollBarrier, "dissemination", dissemination},
		{wire.CollBarrier, "star", starBarrier},
		{wire.CollAllreduce, "tree", treeAllreduce},
		{wire.CollAllreduce, "star", starAllreduce},
		{wire.CollBcast, "tree", treeBcast},
		{wire.CollGather, "tree", treeGather},
		{wire.CollGather, "star", starGather},
	}
	for _, n := range []int{64, 1024} {
		for _, ln := range lines {
			b.Run(fmt.Sprintf("n=%d/%s/%s", n, ln.kind, ln.name), func(b *testing.B) {
				fold := folds(n, 8)[0]
				for b.Loop() {
					runBy(b, n, ln.s, func(l *fakeLink) Call {
						c := Call{Kind: ln.kind, Data: make([]byte, 8)}
						switch ln.kind {
						case wire.CollBarrier:
							c.Data = nil
						case wire.CollAllreduce:
							c.Fold = fold
						}
						l.desc = descLen(ln.kind, l.rank, 0, len(c.Data))
						return c
					})
				}
			})
		}
	}
}
