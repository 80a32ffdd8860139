// Command gopeer is the Go rank of the benchmark pairs of tests/clib: the
// protocol of libsperli/test/cpeer.c ("cpeer bench P M"), so that Go and C
// ranks pair up in any order.
//
//	gopeer bench PINGS MESSAGES < rank-N.job
//
// Rank 0 measures PINGS round trips of 64 bytes and the one-way rate of
// MESSAGES messages of 1 MiB to rank 1 and prints "rtt_us=… rate_mbs=…"
// (MB = 10^6 bytes). It prints "init=0" once joined.
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"sperli/codes"
	"sperli/runtime"
)

const (
	tagPing = 1
	tagData = 2
	tagAck  = 3
	small   = 64
	big     = 1 << 20
)

func main() { os.Exit(run()) }

func run() int {
	if len(os.Args) != 4 || os.Args[1] != "bench" {
		fmt.Fprintln(os.Stderr, "usage: gopeer bench PINGS MESSAGES")
		return 2
	}
	pings, err1 := strconv.Atoi(os.Args[2])
	msgs, err2 := strconv.Atoi(os.Args[3])
	if err1 != nil || err2 != nil || pings < 1 || msgs < 1 {
		fmt.Fprintln(os.Stderr, "gopeer: PINGS and MESSAGES: want whole numbers of at least 1")
		return 2
	}
	job, err := runtime.ReadJob(os.Stdin)
	if err != nil {
		fmt.Printf("init=%d\n", codes.Of(err))
		return runtime.Exit(nil, err)
	}
	ctx := context.Background()
	c, err := runtime.Init(ctx, job)
	if err != nil {
		fmt.Printf("init=%d\n", codes.Of(err))
		return runtime.Exit(nil, err)
	}
	fmt.Println("init=0")
	return runtime.Exit(c, bench(ctx, c, pings, msgs))
}

func bench(ctx context.Context, c *runtime.Comm, pings, msgs int) error {
	peer := 1 - c.Rank()
	if err := c.Barrier(ctx); err != nil {
		return err
	}
	warm := pings/10 + 10
	ping := make([]byte, small)
	data := make([]byte, big)
	if c.Rank() == 0 {
		var t0 time.Time
		for i := 0; i < warm+pings; i++ {
			if i == warm {
				t0 = time.Now()
			}
			if err := c.Send(ctx, peer, tagPing, ping); err != nil {
				return err
			}
			m, err := c.Recv(ctx, peer, tagPing)
			if err != nil {
				return err
			}
			ping = m
		}
		rtt := time.Since(t0).Seconds() / float64(pings) * 1e6
		for i := 0; i < 4; i++ {
			if err := c.Send(ctx, peer, tagData, data); err != nil {
				return err
			}
		}
		if _, err := c.Recv(ctx, peer, tagAck); err != nil {
			return err
		}
		t1 := time.Now()
		for i := 0; i < msgs; i++ {
			if err := c.Send(ctx, peer, tagData, data); err != nil {
				return err
			}
		}
		if _, err := c.Recv(ctx, peer, tagAck); err != nil {
			return err
		}
		rate := float64(msgs) * big / 1e6 / time.Since(t1).Seconds()
		fmt.Printf("rtt_us=%.2f rate_mbs=%.1f\n", rtt, rate)
		return nil
	}
	for i := 0; i < warm+pings; i++ {
		m, err := c.Recv(ctx, peer, tagPing)
		if err != nil {
			return err
		}
		if err := c.Send(ctx, peer, tagPing, m); err != nil {
			return err
		}
	}
	for _, k := range []int{4, msgs} {
		for i := 0; i < k; i++ {
			if _, err := c.Recv(ctx, peer, tagData); err != nil {
				return err
			}
		}
		if err := c.Send(ctx, peer, tagAck, nil); err != nil {
			return err
		}
	}
	return nil
}
