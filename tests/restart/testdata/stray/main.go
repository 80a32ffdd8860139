// Command stray leaves in a committed epoch what a SIGKILL in the middle of
// storing a file leaves there, and checkpoints on: every rank takes
// checkpoint 1, then rank 1 puts COMMIT.tmp.1 (the temporary name under
// which rank 1 stores a COMMIT) and rank-1.ckpt.tmp (the one under which a
// resume writes rank 1's file back) into epoch 1's directory, and every
// rank takes checkpoints 2 to STEPS. When the job ends, epoch 1 must be
// gone with everything in it, so that only the newest two epochs stay and
// no temporary file is left.
//
//	sperli run -n 3 --checkpoint-dir ckpt stray STEPS
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
	steps := 0
	if len(os.Args) == 2 {
		steps, _ = strconv.Atoi(os.Args[1])
	}
	if steps < 1 {
		fmt.Fprintln(os.Stderr, "usage: stray STEPS (at least 1)")
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
	return runtime.Exit(c, stray(ctx, c, steps))
}

func stray(ctx context.Context, c *runtime.Comm, steps int) error {
	for k := 1; k <= steps; k++ {
		if err := c.Checkpoint(ctx, []byte(fmt.Sprintf("rank %d step %d", c.Rank(), k))); err != nil {
			return err
		}
		if k == 1 && c.Rank() == 1 {
			dir := filepath.Join(c.Job().CheckpointDir, c.JobID(), "1")
			for _, name := range []string{"COMMIT.tmp.1", "rank-1.ckpt.tmp"} {
				if err := os.WriteFile(filepath.Join(dir, name), []byte("half written"), 0o600); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
