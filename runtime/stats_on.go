//go:build !sperli_nocount

package runtime

// counting says whether the counters of stats.go count. Building with the
// tag sperli_nocount turns them off, only so that a benchmark can compare
// a round trip with and without them (docs/benchmarks.md); the waiting
// record of --timeout stays.
const counting = true
