// Command recovery measures recovery time: from the SIGKILL of one rank to
// resume() returning in the restarted job.
//
// Incarnation 0: every rank resumes (nothing), checkpoints its state, and
// meets the others in a barrier; then the last rank writes the wall-clock
// time to DIR/killed and kills itself with SIGKILL while the others wait
// in a second barrier. Incarnation 1: every rank writes one line to
// DIR/resumed-R,
//
//	started=T joined=T resumed=T epoch=E ok=B state=B
//
// the times its process started, its join returned and resume() returned,
// the epoch resumed, and whether the state is the one checkpointed; then
// the job finishes.
//
// Times are Unix nanoseconds, written by a temporary name and renamed, so
// a reader never sees half of one.
//
//	sperli run -n 4 --checkpoint-dir ckpt --silence 500 recovery DIR [STATEBYTES]
package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"sperli/runtime"
)

func main() { os.Exit(run()) }

func run() int {
	started := time.Now()
	if len(os.Args) != 2 && len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: recovery DIR [STATEBYTES]")
		return 2
	}
	dir := os.Args[1]
	size := 1 << 20
	if len(os.Args) == 3 {
		n, err := strconv.Atoi(os.Args[2])
		if err != nil || n < 0 {
			fmt.Fprintf(os.Stderr, "recovery: STATEBYTES %q: want a whole number\n", os.Args[2])
			return 2
		}
		size = n
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
	joined := time.Now()
	return runtime.Exit(c, recovery(ctx, c, dir, size, started, joined))
}

// stateOf is rank's state: size bytes that differ by rank.
func stateOf(rank, size int) []byte {
	return bytes.Repeat([]byte{byte('a' + rank%26)}, size)
}

func writeAtomic(path, content string) error {
	if err := os.WriteFile(path+".part", []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(path+".part", path)
}

func recovery(ctx context.Context, c *runtime.Comm, dir string, size int, started, joined time.Time) error {
	if err := c.UseCheckpoints(""); err != nil {
		return err
	}
	state, ok, err := c.Resume(ctx)
	resumed := time.Now()
	if err != nil {
		return err
	}
	if c.Incarnation() > 0 {
		good := ok && bytes.Equal(state, stateOf(c.Rank(), size))
		rec := fmt.Sprintf("started=%d joined=%d resumed=%d epoch=%d ok=%v state=%v\n",
			started.UnixNano(), joined.UnixNano(), resumed.UnixNano(), c.Epoch(), ok, good)
		return writeAtomic(filepath.Join(dir, fmt.Sprintf("resumed-%d", c.Rank())), rec)
	}
	if err := c.Checkpoint(ctx, stateOf(c.Rank(), size)); err != nil {
		return err
	}
	if err := c.Barrier(ctx); err != nil {
		return err
	}
	if c.Rank() == c.Size()-1 {
		if err := writeAtomic(filepath.Join(dir, "killed"), strconv.FormatInt(time.Now().UnixNano(), 10)+"\n"); err != nil {
			return err
		}
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	err = c.Barrier(ctx)
	if err == nil {
		err = fmt.Errorf("recovery: rank %d: the barrier passed without rank %d", c.Rank(), c.Size()-1)
	}
	return err
}
