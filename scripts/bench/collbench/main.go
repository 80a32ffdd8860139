// Command collbench is the Sperli side of scripts/bench/collectives.sh: a
// Go rank embedding runtime that times what scripts/bench/mpi_coll.c times
// in Open MPI, the same way, between real processes over TLS on loopback.
//
//	sperli run -n 3 bin/collbench allreduce 20
//	sperli run -n 8 bin/collbench barrier 2000
//	sperli run -n 3 bin/collbench allreduce 20 -cpuprofile allreduce.prof
//	sperli run -n 8 bin/collbench [-target-ms MS] OP:BYTES[:ITERS] ...
//
// allreduce is allreduce(int64, sum) of 2,000,000 elements (16,000,000
// bytes). The last form runs every measurement given, in order, in one
// job; OP is one of
//
//	allreduce-int64    Allreduce of BYTES/8 int64, sum
//	allreduce-float64  Allreduce of BYTES/8 float64, sum
//	bcast              Bcast of BYTES from rank 0
//	allgather          Allgather of BYTES per rank
//	alltoall           Alltoall of BYTES per rank in all (BYTES/size to
//	                   each rank; BYTES is rounded down to a multiple)
//	barrier            Barrier (BYTES is ignored, give 0)
//
// For each: one warm-up call; then, unless ITERS is given (and not 0), a
// calibration: the slowest rank's time of one call (of 10 calls when one
// takes under a fiftieth of the target) sets ITERS to about MS (default
// 300) milliseconds of calls; then a barrier, ITERS timed calls, and rank 0
// prints the slowest rank's time:
//
//	sperli op=allreduce-int64 bytes=16000000 ranks=3 iters=20 total_s=... per_call_us=...
//
// With -cpuprofile FILE (first form only), rank 0 writes a CPU profile of
// the timed calls to FILE, and every other rank to FILE.rankN.
package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"sperli/runtime"
)

type meas struct {
	op    string
	bytes int
	iters int
}

var ops = map[string]bool{"allreduce-int64": true, "allreduce-float64": true, "bcast": true, "allgather": true, "alltoall": true, "barrier": true}

const usage = `usage: collbench allreduce|barrier ITERS [-cpuprofile FILE]
       collbench [-target-ms MS] OP:BYTES[:ITERS] ...
OP: allreduce-int64 allreduce-float64 bcast allgather alltoall barrier`

func main() { os.Exit(run()) }

func run() int {
	ms, target, profile, err := parseArgs(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "collbench: %v\n%s\n", err, usage)
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
	for _, m := range ms {
		if err = bench(ctx, c, m, target, profile); err != nil {
			break
		}
	}
	return runtime.Exit(c, err)
}

func parseArgs(args []string) (ms []meas, target time.Duration, profile string, err error) {
	target = 300 * time.Millisecond
	if len(args) == 4 && args[2] == "-cpuprofile" {
		profile, args = args[3], args[:2]
	}
	if len(args) == 2 && (args[0] == "allreduce" || args[0] == "barrier") {
		iters, err := strconv.Atoi(args[1])
		if err != nil || iters < 1 {
			return nil, 0, "", fmt.Errorf("ITERS %q is no whole number ≥ 1", args[1])
		}
		if args[0] == "allreduce" {
			return []meas{{"allreduce-int64", 16000000, iters}}, target, profile, nil
		}
		return []meas{{"barrier", 0, iters}}, target, profile, nil
	}
	if profile != "" {
		return nil, 0, "", fmt.Errorf("-cpuprofile goes with allreduce|barrier ITERS only")
	}
	if len(args) >= 2 && args[0] == "-target-ms" {
		t, err := strconv.ParseFloat(args[1], 64)
		if err != nil || t <= 0 {
			return nil, 0, "", fmt.Errorf("-target-ms %q is no positive number", args[1])
		}
		target, args = time.Duration(t*float64(time.Millisecond)), args[2:]
	}
	if len(args) == 0 {
		return nil, 0, "", fmt.Errorf("no measurement given")
	}
	for _, a := range args {
		f := strings.Split(a, ":")
		if len(f) < 2 || len(f) > 3 || !ops[f[0]] {
			return nil, 0, "", fmt.Errorf("%q is no OP:BYTES[:ITERS]", a)
		}
		m := meas{op: f[0]}
		if m.bytes, err = strconv.Atoi(f[1]); err != nil || m.bytes < 0 || m.bytes > runtime.MaxCollective {
			return nil, 0, "", fmt.Errorf("%q: BYTES is no whole number from 0 to %d", a, runtime.MaxCollective)
		}
		if len(f) == 3 {
			if m.iters, err = strconv.Atoi(f[2]); err != nil || m.iters < 0 {
				return nil, 0, "", fmt.Errorf("%q: ITERS is no whole number ≥ 0", a)
			}
		}
		if strings.HasPrefix(m.op, "allreduce") && (m.bytes < 8 || m.bytes%8 != 0) {
			return nil, 0, "", fmt.Errorf("%q: an allreduce takes a positive multiple of 8 bytes", a)
		}
		if m.op == "barrier" {
			m.bytes = 0
		}
		ms = append(ms, m)
	}
	return ms, target, "", nil
}

func bench(ctx context.Context, c *runtime.Comm, m meas, target time.Duration, profile string) error {
	n := c.Size()
	if m.op == "alltoall" {
		m.bytes -= m.bytes % n
	}
	data := fill(m, c.Rank())
	elems := m.bytes / 8
	var out []byte
	call := func() (err error) {
		switch m.op {
		case "allreduce-int64":
			out, err = c.Allreduce(ctx, runtime.Int64, runtime.Sum, data)
		case "allreduce-float64":
			out, err = c.Allreduce(ctx, runtime.Float64, runtime.Sum, data)
		case "bcast":
			out, err = c.Bcast(ctx, 0, data)
		case "allgather":
			out, err = c.Allgather(ctx, data)
		case "alltoall":
			out, err = c.Alltoall(ctx, data)
		default:
			err = c.Barrier(ctx)
		}
		return err
	}
	// timed: the slowest rank's seconds for k calls, on every rank.
	timed := func(k int) (float64, error) {
		start := time.Now()
		for i := 0; i < k; i++ {
			if err := call(); err != nil {
				return 0, err
			}
		}
		took := time.Since(start).Seconds()
		t, err := c.Allreduce(ctx, runtime.Float64, runtime.Max, binary.LittleEndian.AppendUint64(nil, math.Float64bits(took)))
		if err != nil {
			return 0, err
		}
		if len(t) != 8 {
			return 0, fmt.Errorf("collbench: the time's allreduce gave %d bytes", len(t))
		}
		return math.Float64frombits(binary.LittleEndian.Uint64(t)), nil
	}
	if err := call(); err != nil { // warm-up
		return err
	}
	if m.iters <= 0 {
		var err error
		if m.iters, err = calibrate(timed, target); err != nil {
			return err
		}
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
	slowest, err := timed(m.iters)
	if err != nil {
		return err
	}
	if strings.HasPrefix(m.op, "allreduce") {
		// element e is the sum over ranks of e + rank
		e := 0
		if elems > 1 {
			e = 1
		}
		want := float64(n*e + n*(n-1)/2)
		got := math.Float64frombits(binary.LittleEndian.Uint64(out[8*e:]))
		if m.op == "allreduce-int64" {
			got = float64(int64(binary.LittleEndian.Uint64(out[8*e:])))
		}
		if got != want {
			return fmt.Errorf("collbench: %s element %d = %g, want %g", m.op, e, got, want)
		}
	}
	if c.Rank() == 0 {
		fmt.Printf("sperli op=%s bytes=%d ranks=%d iters=%d total_s=%.6f per_call_us=%.1f\n", m.op, m.bytes, n, m.iters, slowest, slowest/float64(m.iters)*1e6)
	}
	return nil
}

// fill is a rank's data for m: element i is i + rank (int64 or float64
// for the allreduces, bytes otherwise).
func fill(m meas, rank int) []byte {
	data := make([]byte, m.bytes)
	elems := m.bytes / 8
	switch m.op {
	case "allreduce-int64":
		for i := 0; i < elems; i++ {
			binary.LittleEndian.PutUint64(data[8*i:], uint64(i+rank))
		}
	case "allreduce-float64":
		for i := 0; i < elems; i++ {
			binary.LittleEndian.PutUint64(data[8*i:], math.Float64bits(float64(i+rank)))
		}
	default:
		for i := range data {
			data[i] = byte(i + rank)
		}
	}
	return data
}

// calibrate is the call count that takes about target, from one call on
// the clock (ten when one is too short to tell).
func calibrate(timed func(int) (float64, error), target time.Duration) (int, error) {
	one, err := timed(1)
	if err != nil {
		return 0, err
	}
	if one < target.Seconds()/50 {
		if one, err = timed(10); err != nil {
			return 0, err
		}
		one /= 10
	}
	k := target.Seconds() / math.Max(one, 1e-9)
	return int(math.Max(1, math.Min(1e6, math.Round(k)))), nil
}
