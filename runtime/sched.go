package runtime

// Schedules: which algorithm runs a collective call, chosen by kind, size
// and rank count (SPEC §8.1). Every rank picks the same schedule for a call
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
// A new algorithm is one file with a method on collCall, and a line here.
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
// Frames of at most directMax bytes are written by the calling goroutine
// (peer.post), larger ones by the connection's writer, so that the
// schedule takes frames while its chunks are sealed and written.

// chainMin is the data size from which reductions, bcast and allgather
// pipeline (blocks, chain, ring) instead of meeting at the root: below it
// the star's two steps of latency win, above it the root's links are the
// bottleneck (measured: docs/benchmarks.md).
const chainMin = 64 << 10

// chunk is the pipeline's unit: small enough that every rank works at
// once, large enough that a frame's fixed costs vanish.
const chunk = 256 << 10

// pipelined reports whether a call of n bytes per rank pipelines.
func (c *Comm) pipelined(n int) bool { return c.size > 1 && n >= chainMin }
