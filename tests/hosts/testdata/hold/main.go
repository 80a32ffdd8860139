// Command hold is a rank for the tests across test hosts (tests/hosts). It
// joins and says where it runs, on standard output:
//
//	rank R inc I host H resumed E
//
// In incarnation 0 it takes one checkpoint when the job has a checkpoint
// directory, writes its process id to DIR/inc-0-rank-R.pid (by a temporary
// name, so a reader never sees half of it) and waits for a message that
// never comes, so that a test can interrupt the launcher or kill a rank
// from outside. In a later incarnation it resumes, meets the others in a
// barrier and ends.
//
//	sperli run -n 3 --hosts H [--checkpoint-dir ckpt] hold DIR
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
		fmt.Fprintln(os.Stderr, "usage: hold DIR")
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
	return runtime.Exit(c, hold(ctx, c, os.Args[1]))
}

func hold(ctx context.Context, c *runtime.Comm, dir string) error {
	ckpt := c.Job().CheckpointDir != ""
	if ckpt {
		if err := c.UseCheckpoints(""); err != nil {
			return err
		}
		if _, _, err := c.Resume(ctx); err != nil {
			return err
		}
	}
	fmt.Printf("rank %d inc %d host %s resumed %d\n", c.Rank(), c.Incarnation(), c.Job().HostOf(c.Rank()).Host, c.Epoch())
	if c.Incarnation() > 0 {
		return c.Barrier(ctx)
	}
	if ckpt {
		if err := c.Checkpoint(ctx, []byte(fmt.Sprintf("rank %d", c.Rank()))); err != nil {
			return err
		}
	}
	path := filepath.Join(dir, fmt.Sprintf("inc-0-rank-%d.pid", c.Rank()))
	if err := os.WriteFile(path+".part", []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return err
	}
	if err := os.Rename(path+".part", path); err != nil {
		return err
	}
	// Every rank but the last waits for the last, the last for rank 0.
	from := c.Size() - 1
	if c.Rank() == from {
		from = 0
	}
	_, err := c.Recv(ctx, from, 999)
	if err == nil {
		err = fmt.Errorf("hold: rank %d: a message on tag 999 came, none was sent", c.Rank())
	}
	return err
}
