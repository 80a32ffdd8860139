// Command p2pbench is a Go rank that measures one-way point-to-point
// between two real rank processes over TLS on loopback: rank 0 sends
// COUNT messages of SIZE bytes to rank 1, which receives each (and hands
// its buffer back, Comm.Release, as an MPI program receives into one
// buffer), then acknowledges the last. Rank 0 prints the rate; each rank
// prints the processor time (user and system, getrusage) it spent a
// message.
//
//	sperli run -n 2 /tmp/p2pbench 1048576 400
//	sperli run -n 2 /tmp/p2pbench 1048576 400 -cpuprofile p2p.prof
//
// With -cpuprofile FILE, rank 0 writes a CPU profile of the timed
// messages to FILE, rank 1 to FILE.rank1. The output is lines of
//
//	sperli p2p rank=0 bytes=1048576 count=400 mb_s=... cpu_us_per_msg=... user_us=... sys_us=...
package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"syscall"
	"time"

	"sperli/runtime"
	"sperli/wire"
)

const usage = "usage: p2pbench SIZE COUNT [-cpuprofile FILE]"

func main() { os.Exit(run()) }

func run() int {
	args := os.Args[1:]
	profile := ""
	if len(args) == 4 && args[2] == "-cpuprofile" {
		profile, args = args[3], args[:2]
	}
	size, err1 := strconv.Atoi(cmdArg(args, 0))
	count, err2 := strconv.Atoi(cmdArg(args, 1))
	if len(args) != 2 || err1 != nil || err2 != nil || size < 0 || size > wire.MaxPayload || count < 1 {
		fmt.Fprintf(os.Stderr, "p2pbench: want SIZE (0 to %d) and COUNT (≥ 1), got %q\n%s\n", wire.MaxPayload, os.Args[1:], usage)
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
	if c.Size() != 2 {
		return runtime.Exit(c, fmt.Errorf("p2pbench: runs on 2 ranks, not %d", c.Size()))
	}
	return runtime.Exit(c, measure(ctx, c, size, count, profile))
}

func cmdArg(args []string, i int) string {
	if i < len(args) {
		return args[i]
	}
	return ""
}

func measure(ctx context.Context, c *runtime.Comm, size, count int, profile string) error {
	msg := make([]byte, size)
	for i := range msg {
		msg[i] = byte(i)
	}
	// Warm-up: a tenth of the messages, then the acknowledgement.
	warm := max(1, count/10)
	if err := oneWay(ctx, c, msg, warm); err != nil {
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
	u0, s0 := cpuTime()
	t0 := time.Now()
	if err := oneWay(ctx, c, msg, count); err != nil {
		return err
	}
	took := time.Since(t0)
	u1, s1 := cpuTime()
	user, sys := (u1-u0)/time.Duration(count), (s1-s0)/time.Duration(count)
	rate := ""
	if c.Rank() == 0 {
		rate = fmt.Sprintf(" mb_s=%.0f", float64(size)*float64(count)/took.Seconds()/1e6)
	}
	fmt.Printf("sperli p2p rank=%d bytes=%d count=%d%s cpu_us_per_msg=%.1f user_us=%.1f sys_us=%.1f\n",
		c.Rank(), size, count, rate, float64(user+sys)/1e3, float64(user)/1e3, float64(sys)/1e3)
	return nil
}

// oneWay sends k messages from rank 0 to rank 1, which acknowledges the
// last one.
func oneWay(ctx context.Context, c *runtime.Comm, msg []byte, k int) error {
	if c.Rank() == 0 {
		for i := 0; i < k; i++ {
			if err := c.Send(ctx, 1, 1, msg); err != nil {
				return err
			}
		}
		_, err := c.Recv(ctx, 1, 2)
		return err
	}
	for i := 0; i < k; i++ {
		m, err := c.Recv(ctx, 0, 1)
		if err != nil {
			return err
		}
		if len(m) != len(msg) {
			return fmt.Errorf("p2pbench: got %d bytes, want %d", len(m), len(msg))
		}
		c.Release(m)
	}
	return c.Send(ctx, 0, 2, []byte("k"))
}

// cpuTime is this process's user and system processor time so far.
func cpuTime() (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}
