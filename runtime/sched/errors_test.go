package sched

import (
	"errors"
	"fmt"
	"testing"

	"sperli/wire"
)

// TestMismatch: a rank whose frames disagree with what another rank's
// schedule takes is reported by that rank's Link.Mismatch, whose error the
// schedule returns; the other ranks see the job end.
func TestMismatch(t *testing.T) {
	cases := []struct {
		name string
		kind wire.CollKind
		n    int
		root int
		size func(rank int) int // the rank's data
		lie  func(rank int, f *Frame)
		sees map[int]string // rank: the message of its Mismatch
	}{
		{"a frame says more than it carries", wire.CollGather, 5, 0, each(8), liar(2, func(f *Frame) { f.Len = 16 }),
			map[int]string{0: "collective frame of call 7 from rank 2 says 16 bytes and carries 8"}},
		{"a result sent to the root", wire.CollGather, 3, 0, each(8), liar(1, func(f *Frame) { f.Ack = true }),
			map[int]string{0: "collective mismatch in call 7: rank 1 sent a result of fake gather, which has root 0"}},
		{"gather contributions of different lengths", wire.CollGather, 5, 1, odd(3, 16, 8), nil,
			map[int]string{1: "gather: contributions of different lengths: rank 3 gave 16 bytes, rank 0 gave 8"}},
		{"star reduction of different lengths", wire.CollAllreduce, 5, 0, odd(1, 16, 8), nil,
			map[int]string{0: "reduce: contributions of different lengths: rank 1 gave 16 bytes, rank 0 gave 8"}},
		{"bruck blocks of different lengths", wire.CollAllreduce, 2, 0, odd(1, 16, 8), nil, map[int]string{
			0: "collective mismatch in call 7: rank 1 sent a frame of 16 bytes (ack false) where this rank's schedule takes 8 (ack false)",
			1: "collective mismatch in call 7: rank 0 sent a frame of 8 bytes (ack false) where this rank's schedule takes 16 (ack false)"}},
		{"block schedule of different lengths", wire.CollAllreduce, 2, 0, odd(0, chainMin+16, chainMin), nil, map[int]string{
			0: "collective mismatch in call 7: rank 1 sent a frame of 32768 bytes (ack false) where this rank's schedule takes 32776 (ack false)",
			1: "collective mismatch in call 7: rank 0 sent a frame of 32776 bytes (ack false) where this rank's schedule takes 32768 (ack false)"}},
		{"data to the root of a large bcast", wire.CollBcast, 3, 0, odd(0, chainMin, 0), liar(2, func(f *Frame) { f.Data = make([]byte, 4) }),
			map[int]string{0: "collective mismatch in call 7: rank 2 sent 4 bytes to the root of a bcast"}},
		{"scatter of no whole blocks", wire.CollScatter, 3, 1, odd(1, 10, 0), nil,
			map[int]string{1: "scatter: 10 bytes are no whole number of 3 blocks"}},
		// On 40 ranks, over the tree: rank 0's kids are 1, 6, 11, … 36;
		// rank 1's are 2 to 5 and rank 36's 37 to 39, all leaves, so
		// that only their parent takes their frames.
		{"tree: gather contributions of different lengths", wire.CollGather, 40, 7, odd(3, 16, 8), nil,
			map[int]string{1: "gather: contributions of different lengths: rank 3 gave 16 bytes, rank 1 gave 8"}},
		{"tree: reduction of different lengths", wire.CollAllreduce, 40, 0, odd(39, 16, 8), nil,
			map[int]string{36: "allreduce: contributions of different lengths: rank 39 gave 16 bytes, rank 36 gave 8"}},
		{"chain: reduction of different lengths", wire.CollAllreduce, 40, 0, odd(20, chainMin+16, chainMin), nil,
			map[int]string{16: "allreduce: contributions of different lengths: rank 20 gave 65552 bytes, rank 16 gave 65536"}},
		// Rank 2 runs the chain, the others the tree: rank 1 waits for
		// its first kid's data, rank 2 for rank 1's fold.
		{"chain and tree: one rank's data of chainMin", wire.CollAllreduce, 40, 0, odd(2, chainMin, 8), nil,
			map[int]string{1: "allreduce: contributions of different lengths: rank 2 gave 65536 bytes, rank 1 gave 8"}},
		{"tree and chain: one rank's data under chainMin", wire.CollReduce, 40, 3, odd(37, 8, chainMin), nil,
			map[int]string{36: "reduce: contributions of different lengths: rank 37 gave 8 bytes, rank 36 gave 65536"}},
		{"tree: a result sent up", wire.CollGather, 40, 0, each(8), liar(3, func(f *Frame) { f.Ack = true }),
			map[int]string{1: "collective mismatch in call 7: rank 3 sent a frame of 8 bytes (ack true) where this rank's schedule takes 8 (ack false)"}},
		{"tree: data up the tree of a bcast", wire.CollBcast, 40, 0, odd(0, 8, 0), liar(37, func(f *Frame) { f.Data = make([]byte, 4) }),
			map[int]string{36: "collective mismatch in call 7: rank 37 sent a frame of 4 bytes (ack false) where this rank's schedule takes 0 (ack false)"}},
		{"tree: a frame longer than a chunk", wire.CollBcast, 40, 2, odd(2, 8, 0), liar(2, func(f *Frame) { f.Data = make([]byte, chunk+1) }),
			map[int]string{1: "collective mismatch in call 7: rank 2 sent a frame of 262145 bytes (ack false) where this rank's schedule takes at most 262144 (ack false)"}},
		// Bruck's alltoall on 40 ranks of 8-byte blocks: rank 5's first
		// frame (20 blocks, 160 bytes) goes to rank 6, and every other
		// rank's result waits, directly or through others, for rank 6's
		// later frames.
		{"bruck alltoall: a frame of a block less", wire.CollAlltoall, 40, 0, each(40 * 8), liar(5, first(func(f *Frame) { f.Data = f.Data[:152] })),
			map[int]string{6: "collective mismatch in call 7: rank 5 sent a frame of 152 bytes (ack false) where this rank's schedule takes 160 (ack false)"}},
		{"bruck alltoall: a result", wire.CollAlltoall, 40, 0, each(40 * 8), liar(5, first(func(f *Frame) { f.Ack = true })),
			map[int]string{6: "collective mismatch in call 7: rank 5 sent a frame of 160 bytes (ack true) where this rank's schedule takes 160 (ack false)"}},
		{"tree: scatter of no whole blocks", wire.CollScatter, 40, 7, odd(7, 10, 0), nil,
			map[int]string{7: "scatter: 10 bytes are no whole number of 40 blocks"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			links, _, errs := run(t, tc.n, func(l *fakeLink) Call {
				data := make([]byte, tc.size(l.rank))
				l.desc = descLen(tc.kind, l.rank, tc.root, len(data))
				if tc.lie != nil {
					l.lie = func(f *Frame) { tc.lie(l.rank, f) }
				}
				c := Call{Kind: tc.kind, Root: tc.root, Data: data}
				if tc.kind == wire.CollAllreduce || tc.kind == wire.CollReduce {
					c.Fold = folds(tc.n, 8)[0]
				}
				return c
			})
			for r, l := range links {
				want, sees := tc.sees[r]
				var mis *mismatchError
				switch {
				case sees && (!errors.As(errs[r], &mis) || mis.msg != want || l.mismatch != want):
					t.Errorf("rank %d: %v (Mismatch %q), want H1613: %s", r, errs[r], l.mismatch, want)
				case !sees && (errs[r] != errEnded || l.mismatch != ""):
					t.Errorf("rank %d: %v (Mismatch %q), want %v", r, errs[r], l.mismatch, errEnded)
				}
			}
		})
	}
}

// each gives every rank n bytes.
func each(n int) func(int) int { return func(int) int { return n } }

// odd gives rank r n bytes and the others other.
func odd(r, n, other int) func(int) int {
	return func(rank int) int {
		if rank == r {
			return n
		}
		return other
	}
}

// first applies lie to the first frame only.
func first(lie func(f *Frame)) func(f *Frame) {
	done := false
	return func(f *Frame) {
		if !done {
			done = true
			lie(f)
		}
	}
}

// liar changes the frames rank r sends with lie.
func liar(r int, lie func(f *Frame)) func(int, *Frame) {
	return func(rank int, f *Frame) {
		if rank == r {
			lie(f)
		}
	}
}

// TestLinkErrors: an error of Send or Take is what the schedule returns,
// on every line of the table, at the root and off it.
func TestLinkErrors(t *testing.T) {
	// ranks, bytes per rank (whole blocks of 8-byte elements at 33 ranks)
	probes := [][2]int{{2, 80}, {2, chainMin}, {5, 80}, {33, 33 * 8}, {33, 33 * 8 * 249}}
	for _, rule := range table {
		found := false
		for _, p := range probes {
			n, size := p[0], p[1]
			if got, _ := Choose(rule.Kind, n, size); got.Name != rule.Name || found {
				continue
			}
			found = true
			for _, fault := range []string{"send", "take"} {
				for bad := range 2 {
					t.Run(fmt.Sprintf("%s/%s/n=%d/%dB/%s at rank %d", rule.Kind, rule.Name, n, size, fault, bad), func(t *testing.T) {
						checkLinkError(t, rule.Kind, n, size, bad, fault)
					})
				}
			}
		}
		if !found {
			t.Errorf("no probe runs the line %s %s of the table", rule.Kind, rule.Name)
		}
	}
}

func checkLinkError(t *testing.T, kind wire.CollKind, n, size, bad int, fault string) {
	_, _, errs := run(t, n, func(l *fakeLink) Call {
		c := Call{Kind: kind, Data: make([]byte, size)}
		if kind == wire.CollBarrier {
			c.Data = nil
		}
		l.desc = descLen(kind, l.rank, 0, len(c.Data))
		if kind == wire.CollReduce || kind == wire.CollAllreduce || kind == wire.CollReduceScatter {
			c.Fold = folds(n, 8)[0]
		}
		if l.rank == bad && fault == "send" {
			l.failSend = 1
		}
		if l.rank == bad && fault == "take" {
			l.failTake = 1
		}
		return c
	})
	for r, err := range errs {
		switch {
		case r == bad && err != errInjected:
			t.Errorf("rank %d = %v, want %v", r, err, errInjected)
		case r != bad && err != nil && err != errEnded:
			t.Errorf("rank %d = %v, want nil or %v", r, err, errEnded)
		}
	}
}
