// Command killme is a rank that joins, writes its process id to
// DIR/rank-<rank>.pid, and then waits for a message that never comes: every
// rank but the last receives from the last rank, the last from rank 0. The
// launcher tests kill it or interrupt its launcher.
//
//	sperli run -n 3 killme DIR
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"sperli/runtime"
)

func main() { os.Exit(run()) }

func run() int {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: killme DIR")
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
	// Written by a temporary name and renamed, so a reader never sees half.
	path := filepath.Join(os.Args[1], fmt.Sprintf("rank-%d.pid", c.Rank()))
	if err := os.WriteFile(path+".tmp", []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return runtime.Exit(c, err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return runtime.Exit(c, err)
	}
	from := c.Size() - 1
	if c.Rank() == from {
		from = 0
	}
	_, err = c.Recv(ctx, from, 99)
	return runtime.Exit(c, err)
}
