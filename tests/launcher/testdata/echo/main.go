// Command echo is a rank that writes two lines to standard error and two
// to standard output, interleaved, then meets the other ranks in a barrier
// so that no rank ends before every rank has written.
package main

import (
	"context"
	"fmt"
	"os"

	"sperli/runtime"
)

func main() { os.Exit(run()) }

func run() int {
	job, err := runtime.ReadJob(os.Stdin)
	if err != nil {
		return runtime.Exit(nil, err)
	}
	ctx := context.Background()
	c, err := runtime.Init(ctx, job)
	if err != nil {
		return runtime.Exit(nil, err)
	}
	r := c.Rank()
	fmt.Fprintf(os.Stderr, "err %d first\n", r)
	fmt.Fprintf(os.Stdout, "out %d first\n", r)
	fmt.Fprintf(os.Stderr, "err %d second\n", r)
	fmt.Fprintf(os.Stdout, "out %d second", r) // no line end: the launcher adds one
	return runtime.Exit(c, c.Barrier(ctx))
}
