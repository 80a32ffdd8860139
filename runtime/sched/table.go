package sched

import (
	"fmt"

	"sperli/wire"
)

// The table: which algorithm runs a collective call, chosen by kind, size
// and rank count (SPEC §8.1). Every rank picks the same line for a call
// from what every rank knows alike (the kind, the job's size, the data
// length all ranks give); where ranks disagree on that, their frames'
// descriptors disagree too and the call is H1613. Every schedule:
//
//   - makes each rank's completion depend on a frame from every rank, so a
//     rank that voids the call (H1618) or makes another one (H1613) is
//     seen by all before anyone returns;
//   - folds reductions in rank order ((r0 ∘ r1) ∘ r2) …, so every result
//     is the same bytes whatever the schedule (and float results never
//     depend on timing);
//   - sends data as gather lists (no copy per destination), in chunks
//     where it pipelines.
//
// A new algorithm is one file with a Schedule, and a line in table below.
//
// On 2 to 32 ranks (below treeMin):
//
// | call | small (at most bruckRanks ranks, all ranks' data ≤ bruckMax) | middle | large (≥ chainMin bytes per rank, 2 ranks or more) |
// | --- | --- | --- | --- |
// | barrier | dissemination (dissem.go), ⌈log2 n⌉ rounds, to bruckRanks ranks; star beyond | — | — |
// | reduce, allreduce, reduce_scatter | bruck (bruck.go), then the fold on every rank | star (star.go) | blocks: reduce-scatter to block owners, each folding in rank order, then the blocks to all or the root (rsag.go) |
// | allgather | bruck | star | ring (ring.go) |
// | bcast | star | star | pipelined chain from the root, done back (chain.go) |
// | alltoall | pairwise exchange (pairwise.go) | pairwise | pairwise |
// | gather, scatter | star | star | star |
//
// On treeMin (33) ranks or more, where a rank's partners are the links it
// opens (tree.go), every line but alltoall's has at most topo.Radix+2 (10)
// partners a rank, where the star's root has every rank and the blocks
// give every rank every other; alltoall's bruck has 2⌈log2 n⌉ (20 at
// 1,024 ranks), its pairwise every rank:
//
// | call | below chainMin bytes per rank | from chainMin | partners a rank |
// | --- | --- | --- | --- |
// | barrier, bcast, gather, scatter | tree: up to rank 0, down from it (tree.go) | tree, pipelined | parent and kids: ≤ 9 |
// | reduce, allreduce, reduce_scatter | tree: gathered to rank 0, folded there in rank order, down | chain: folded down 0 → 1 → … → n−1, spread from n−1 over the tree (chainfold.go) | ≤ 9; chain ≤ 10 |
// | allgather | tree | ring | ≤ 9; ring 2 |
// | alltoall | bruck (bruck.go) for blocks of at most bruckBlock and at most bruckAlltoallMax a rank, pairwise beyond | the same | bruck 2⌈log2 n⌉; pairwise n−1 |

// chainMin is the data size from which reductions, bcast and allgather
// pipeline (blocks, chain, ring) instead of meeting at the root: below it
// the star's two steps of latency win, above it the root's links are the
// bottleneck (measured: docs/benchmarks.md).
const chainMin = 64 << 10

// chunk is the pipeline's unit: small enough that every rank works at
// once, large enough that a frame's fixed costs vanish.
const chunk = 256 << 10

// bruckMax is the most data (all ranks' blocks together) that the
// small-call schedules gather with bruck: every rank then holds, and for a
// reduction folds, all of it.
const bruckMax = 64 << 10

// bruckRanks is the most ranks a small call runs by bruck (and a barrier
// by dissemination) on: beyond it the star. On this project's two-core
// machine, where more ranks than cores block instead of spinning and every
// step costs each rank a wake-up, bruck's ⌈log2 n⌉ steps beat the star's
// two at 2 and 4 ranks and lost from 8 (16 ranks: 2.6 ms against 2.1, 32:
// 7.1 against 4.7; docs/benchmarks.md). Every rank must choose alike, so
// the rule is on what all know, the size, not on whether this host spins.
const bruckRanks = 4

// bruckBlock is the largest block an alltoall on treeMin ranks or more
// sends by bruck, and bruckAlltoallMax the most data a rank (all its
// blocks). Bruck sends about half of the data in each of its ⌈log2 n⌉
// rounds; pairwise sends each block once but needs a link to every rank:
// the first time, n(n−1)/2 handshakes job-wide (2 ms of processor time
// each on this project's machine — 32,640 of them at 256 ranks outlast a
// join window on two processors, and a dial whose handshake does not end
// within one is a loss), and a link's buffers in every rank for every
// other. With the links made, on this machine (docs/benchmarks.md,
// 2026-12-06) bruck took 0.7× and 0.45× pairwise's time a call at 64 and
// 128 ranks with 2 KiB blocks, 1.03–1.13× with 8 KiB and 1.4× with 16 KiB;
// the 8 KiB bound is bought by the first call, whose handshakes pairwise
// pays (256 ranks of 8 KiB blocks: 21.6 s by bruck, ranks lost pairwise). Open MPI and MPICH take bruck for blocks of up to
// a few hundred bytes, where their links are made already and cost no
// cryptography. Until 2026-12-06 this table took bruck for blocks of at
// most 1 KiB and at most 1 MiB a rank: 256 ranks of 2 KiB blocks ended
// with ranks lost, and 1,024 of 2 KiB ran out of memory (docs/scale.md).
const (
	bruckBlock       = 8 << 10
	bruckAlltoallMax = 4 << 20
)

// manySmallBlocks: an alltoall of n bytes per rank on size ranks runs by
// bruck.
func manySmallBlocks(size, n int) bool {
	return many(size, n) && n/size <= bruckBlock && n <= bruckAlltoallMax
}

// large: a call of n bytes per rank pipelines.
func large(size, n int) bool { return size > 1 && n >= chainMin }

// small: a call of n bytes per rank runs by bruck.
func small(size, n int) bool { return size > 1 && size <= bruckRanks && size*n <= bruckMax }

// few: a barrier runs by dissemination.
func few(size, _ int) bool { return size <= bruckRanks }

// A Schedule runs one call over l and returns this rank's result: new
// bytes, or the Data of a frame it took and did not release.
type Schedule func(l Link, c Call) ([]byte, error)

// A Rule is a line of the table: a call of Kind whose size (ranks) and n
// (bytes per rank) satisfy When runs by Run.
type Rule struct {
	Kind wire.CollKind
	Name string                 // the algorithm, as the table above names it
	When func(size, n int) bool // nil: always
	Run  Schedule
}

// table is read from the top: the first line of the call's kind whose
// When holds is the call's schedule. Each kind ends with a line that
// always holds.
var table = []Rule{
	{wire.CollBarrier, "tree", many, treeBarrier},
	{wire.CollBarrier, "dissemination", few, dissemination},
	{wire.CollBarrier, "star", nil, starBarrier},
	{wire.CollBcast, "tree", many, treeBcast},
	{wire.CollBcast, "chain", large, bcastChain},
	{wire.CollBcast, "star", nil, bcastStar},
	{wire.CollReduce, "chain", manyLarge, chainReduce},
	{wire.CollReduce, "tree", many, treeReduce},
	{wire.CollReduce, "blocks", large, reduceBlocks},
	{wire.CollReduce, "bruck", small, bruckReduce},
	{wire.CollReduce, "star", nil, starReduce},
	{wire.CollAllreduce, "chain", manyLarge, chainAllreduce},
	{wire.CollAllreduce, "tree", many, treeAllreduce},
	{wire.CollAllreduce, "blocks", large, allreduceBlocks},
	{wire.CollAllreduce, "bruck", small, bruckAllreduce},
	{wire.CollAllreduce, "star", nil, starAllreduce},
	{wire.CollReduceScatter, "chain", manyLarge, chainReduceScatter},
	{wire.CollReduceScatter, "tree", many, treeReduceScatter},
	{wire.CollReduceScatter, "blocks", large, reduceScatterBlocks},
	{wire.CollReduceScatter, "bruck", small, bruckReduceScatter},
	{wire.CollReduceScatter, "star", nil, starReduceScatter},
	{wire.CollAllgather, "ring", large, allgatherRing},
	{wire.CollAllgather, "tree", many, treeAllgather},
	{wire.CollAllgather, "bruck", small, bruckAllgather},
	{wire.CollAllgather, "star", nil, starAllgather},
	// alltoall sends every rank a block of every rank: on many ranks,
	// small blocks go by bruck's ⌈log2 n⌉ rounds and partners, the rest
	// pairwise, every rank a partner.
	{wire.CollAlltoall, "bruck", manySmallBlocks, bruckAlltoall},
	{wire.CollAlltoall, "pairwise", nil, pairwise},
	{wire.CollGather, "tree", many, treeGather},
	{wire.CollGather, "star", nil, starGather},
	{wire.CollScatter, "tree", many, treeScatter},
	{wire.CollScatter, "star", nil, starScatter},
}

// Choose returns the line of the table that runs a call of kind on size
// ranks with n bytes per rank, or false for a kind the table has none for.
func Choose(kind wire.CollKind, size, n int) (Rule, bool) {
	for _, r := range table {
		if r.Kind == kind && (r.When == nil || r.When(size, n)) {
			return r, true
		}
	}
	return Rule{}, false
}

// Run runs c over l by its line of the table and returns this rank's
// result, which the caller owns: new bytes, or the Data of a frame taken
// and not released. Reduce and gather return no bytes (nil or empty) off
// the root. An error is the Link's (from Send, Take or Mismatch), returned
// as it is.
func Run(l Link, c Call) ([]byte, error) {
	c.n = len(c.Data)
	if c.Kind == wire.CollBcast && l.Rank() != c.Root && l.Size() > 1 && !many(l.Size(), 0) {
		// Off the root the length is unknown until the root's
		// announcement, which says which line follows. On treeMin ranks
		// or more one line, the tree, runs every length, which its last
		// frame tells.
		n, err := announced(l, c.Root)
		if err != nil {
			return nil, err
		}
		c.n = n
	}
	r, ok := Choose(c.Kind, l.Size(), c.n)
	if !ok {
		return nil, fmt.Errorf("sched: no schedule for %s", c.Kind)
	}
	return r.Run(l, c)
}

// announced is a bcast's first step off the root: a descriptor to the
// root, the root's announcement back, which says its data's length.
func announced(l Link, root int) (int, error) {
	if err := l.Send(root, false, nil); err != nil {
		return 0, err
	}
	f, err := takeChunk(l, root, false, 0)
	if err != nil {
		return 0, err
	}
	l.Release(f)
	return f.Len, nil
}

// takeChunk takes the next frame from rank from and checks it is a frame
// of want bytes with the ack flag (a result) or without (data going on).
// The caller copies f.Data out and then may Release f.
func takeChunk(l Link, from int, ack bool, want int) (Frame, error) {
	f, err := l.Take(from)
	if err != nil {
		return f, err
	}
	return f, checkChunk(l, from, f, ack, want)
}

// checkChunk checks a frame from rank from is a frame of want bytes with
// the ack flag or without.
func checkChunk(l Link, from int, f Frame, ack bool, want int) error {
	if f.Ack != ack || len(f.Data) != want {
		return l.Mismatch("collective mismatch in call %d: rank %d sent a frame of %d bytes (ack %v) where this rank's schedule takes %d (ack %v)", l.Seq(), from, len(f.Data), f.Ack, want, ack)
	}
	return nil
}

// chunks cuts n bytes into the pipeline's chunks: [lo, hi) pairs, one
// empty chunk for no data.
func chunks(n int) [][2]int {
	if n == 0 {
		return [][2]int{{0, 0}}
	}
	out := make([][2]int, 0, (n+chunk-1)/chunk)
	for lo := 0; lo < n; lo += chunk {
		out = append(out, [2]int{lo, min(lo+chunk, n)})
	}
	return out
}
