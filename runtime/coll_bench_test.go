package runtime_test

import (
	"context"
	"encoding/binary"
	"sync"
	"testing"

	"sperli/runtime"
)

// Collective benchmarks of docs/benchmarks.md: in-process ranks joined over
// loopback with real TLS, so every byte is encrypted as between processes.
// scripts/bench/collectives.sh measures the same between real processes,
// beside Open MPI.
//
//	go test -run '^$' -bench 'Allreduce16MB|Barrier' -benchtime 20x ./runtime/

// benchJob joins n ranks for a benchmark.
func benchJob(b *testing.B, n int) []*runtime.Comm {
	b.Helper()
	return newFixtureB(b, n).initAll(context.Background())
}

// onEveryRank runs body(c, i) for i in 0 … b.N-1 on every rank at once,
// one goroutine per rank for the whole run, and times the lot.
func onEveryRank(b *testing.B, comms []*runtime.Comm, body func(c *runtime.Comm, i int) error) {
	b.Helper()
	// One call first, so that connections are warm and buffers grown.
	for _, err := range each(comms, func(c *runtime.Comm) error { return body(c, -1) }) {
		if err != nil {
			b.Fatal(err)
		}
	}
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	b.ResetTimer()
	for r, c := range comms {
		wg.Add(1)
		go func(r int, c *runtime.Comm) {
			defer wg.Done()
			for i := 0; i < b.N; i++ {
				if err := body(c, i); err != nil {
					errs[r] = err
					return
				}
			}
		}(r, c)
	}
	wg.Wait()
	b.StopTimer()
	for r, err := range errs {
		if err != nil {
			b.Fatalf("rank %d: %v", r, err)
		}
	}
}

// BenchmarkAllreduce16MB: allreduce(int64, sum) of 2,000,000 elements
// (16,000,000 bytes) over 3 ranks; MB/s counts one rank's data per call.
func BenchmarkAllreduce16MB(b *testing.B) {
	const elems = 2000000
	comms := benchJob(b, 3)
	data := make([][]byte, len(comms))
	for r := range data {
		data[r] = make([]byte, 8*elems)
		for i := 0; i < elems; i++ {
			binary.LittleEndian.PutUint64(data[r][8*i:], uint64(i+r))
		}
	}
	ctx := context.Background()
	b.SetBytes(8 * elems)
	onEveryRank(b, comms, func(c *runtime.Comm, _ int) error {
		out, err := c.Allreduce(ctx, runtime.Int64, runtime.Sum, data[c.Rank()])
		if err == nil && binary.LittleEndian.Uint64(out[8:]) != 6 { // (1+0) + (1+1) + (1+2)
			b.Errorf("allreduce: element 1 = %d, want 6", binary.LittleEndian.Uint64(out[8:]))
		}
		return err
	})
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/call")
}

// BenchmarkAllreduce8B2: the latency of an 8-byte allreduce(int64, sum)
// at 2 ranks, the small-call path (bruck: one exchange).
func BenchmarkAllreduce8B2(b *testing.B) {
	comms := benchJob(b, 2)
	ctx := context.Background()
	data := make([][]byte, len(comms))
	for r := range data {
		data[r] = binary.LittleEndian.AppendUint64(nil, uint64(r+1))
	}
	onEveryRank(b, comms, func(c *runtime.Comm, _ int) error {
		out, err := c.Allreduce(ctx, runtime.Int64, runtime.Sum, data[c.Rank()])
		if err == nil && binary.LittleEndian.Uint64(out) != 3 {
			b.Errorf("allreduce = %d, want 3", binary.LittleEndian.Uint64(out))
		}
		return err
	})
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/1e3/float64(b.N), "µs/call")
}

func benchBarrier(b *testing.B, n int) {
	comms := benchJob(b, n)
	ctx := context.Background()
	onEveryRank(b, comms, func(c *runtime.Comm, _ int) error { return c.Barrier(ctx) })
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/call")
}

// BenchmarkBarrier3 and BenchmarkBarrier8: the latency of one barrier.
func BenchmarkBarrier3(b *testing.B) { benchBarrier(b, 3) }
func BenchmarkBarrier8(b *testing.B) { benchBarrier(b, 8) }
