// Command collbench is the Sperli side of scripts/bench/collectives.sh: a
// Go rank embedding runtime that times what scripts/bench/mpi_coll.c times
// in Open MPI, between real processes over TLS on loopback.
//
//	sperli run -n 3 bin/collbench allreduce 20
//	sperli run -n 8 bin/collbench barrier 2000
//	sperli run -n 3 bin/collbench allreduce 20 -cpuprofile allreduce.prof
//
// allreduce is allreduce(int64, sum) of 2,000,000 elements (16,000,000
// bytes). Every rank warms up with one call, then all start together after
// a barrier; rank 0 prints one line:
//
//	sperli op=allreduce ranks=3 iters=20 total_s=... per_call_us=...
//
// With -cpuprofile FILE, rank 0 (the root, which reduces) writes a CPU
// profile of the timed calls to FILE, and every other rank to FILE.rankN.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime/pprof"
	"strconv"
	"time"

	"sperli/runtime"
)

const elems = 2000000

func main() { os.Exit(run()) }

func run() int {
	args := os.Args[1:]
	var profile string
	if len(args) == 4 && args[2] == "-cpuprofile" {
		profile, args = args[3], args[:2]
	}
	iters := 0
	if len(args) == 2 {
		iters, _ = strconv.Atoi(args[1])
	}
	if len(args) != 2 || (args[0] != "allreduce" && args[0] != "barrier") || iters < 1 {
		fmt.Fprintln(os.Stderr, "usage: collbench allreduce|barrier ITERS [-cpuprofile FILE]")
		return 2
	}
	job, err := runtime.ReadJob(os.Stdin)
	if err != nil {
		return runtime.Exit(nil, err)
	}
	ctx := context.Background()
	c, err := runtime.Init(ctx, job)
	if err != nil {
		return runtime.Exit(nil, err)
	}
	return runtime.Exit(c, bench(ctx, c, args[0], iters, profile))
}

func bench(ctx context.Context, c *runtime.Comm, op string, iters int, profile string) error {
	var data, out []byte
	call := func() error { return c.Barrier(ctx) }
	if op == "allreduce" {
		data = make([]byte, 8*elems)
		for i := 0; i < elems; i++ {
			binary.LittleEndian.PutUint64(data[8*i:], uint64(i+c.Rank()))
		}
		call = func() (err error) {
			out, err = c.Allreduce(ctx, runtime.Int64, runtime.Sum, data)
			return err
		}
	}
	if err := call(); err != nil { // warm-up
		return err
	}
	if err := c.Barrier(ctx); err != nil {
		return err
	}
	if profile != "" {
		name := profile
		if c.Rank() != 0 {
			name = fmt.Sprintf("%s.rank%d", profile, c.Rank())
		}
		f, err := os.Create(name)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	start := time.Now()
	for i := 0; i < iters; i++ {
		if err := call(); err != nil {
			return err
		}
	}
	took := time.Since(start).Seconds()
	if op == "allreduce" {
		n := uint64(c.Size())
		if got, want := binary.LittleEndian.Uint64(out[8:]), n+n*(n-1)/2; got != want {
			return fmt.Errorf("collbench: element 1 = %d, want %d", got, want)
		}
	}
	// The slowest rank's time, as mpi_coll reports it.
	t, err := c.Reduce(ctx, 0, runtime.Float64, runtime.Max, binary.LittleEndian.AppendUint64(nil, math.Float64bits(took)))
	if err != nil {
		return err
	}
	if c.Rank() == 0 {
		if len(t) != 8 {
			return errors.New("collbench: no time from the reduce")
		}
		slowest := math.Float64frombits(binary.LittleEndian.Uint64(t))
		fmt.Printf("sperli op=%s ranks=%d iters=%d total_s=%.6f per_call_us=%.1f\n", op, c.Size(), iters, slowest, slowest/float64(iters)*1e6)
	}
	return nil
}
