// Command gostencil is scripts/examples/stencil.star as a Go rank, step for
// step: the same cells, the same halo exchange, the same checkpoint every
// EVERY steps (the state packed as int64 little-endian, step first), and
// the same checksum line, so its result can be compared with the Starlark
// program's. It tells on stdout where it runs and what it resumed:
//
//	rank R inc I host H resumed E
//
// With PAUSEDIR and PAUSE, every rank of incarnation 0 stops after its
// PAUSE-th checkpoint: it writes its process id to PAUSEDIR/rank-R.pid and
// waits for a message that never comes, so that a test can kill a rank
// from outside between two checkpoints.
//
//	sperli run -n 3 --checkpoint-dir ckpt gostencil CELLS STEPS EVERY [PAUSEDIR PAUSE]
package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"sperli/runtime"
)

const mod = 1000003

func main() { os.Exit(run()) }

func run() int {
	if len(os.Args) != 4 && len(os.Args) != 6 {
		fmt.Fprintln(os.Stderr, "usage: gostencil CELLS STEPS EVERY [PAUSEDIR PAUSE]")
		return 2
	}
	var n [4]int
	for i, a := range os.Args[1:4] {
		v, err := strconv.Atoi(a)
		if err != nil || v < 1 {
			fmt.Fprintf(os.Stderr, "gostencil: %q: want a whole number of at least 1\n", a)
			return 2
		}
		n[i] = v
	}
	pauseDir := ""
	if len(os.Args) == 6 {
		pauseDir = os.Args[4]
		v, err := strconv.Atoi(os.Args[5])
		if err != nil || v < 1 {
			fmt.Fprintf(os.Stderr, "gostencil: PAUSE %q: want a whole number of at least 1\n", os.Args[5])
			return 2
		}
		n[3] = v
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
	return runtime.Exit(c, stencil(ctx, c, n[0], n[1], n[2], pauseDir, n[3]))
}

func pack(v []int64) []byte {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, uint64(x))
	}
	return b
}

func unpack(b []byte) []int64 {
	v := make([]int64, len(b)/8)
	for i := range v {
		v[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return v
}

func stencil(ctx context.Context, c *runtime.Comm, cells, steps, every int, pauseDir string, pause int) error {
	rank, size := c.Rank(), c.Size()
	base, extra := cells/size, cells%size
	count := base
	if rank < extra {
		count++
	}
	first := rank*base + min(rank, extra)
	if err := c.UseCheckpoints(""); err != nil {
		return err
	}
	state, ok, err := c.Resume(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("rank %d inc %d host %s resumed %d\n", rank, c.Incarnation(), c.Job().HostOf(rank).Host, c.Epoch())
	step, u := 0, make([]int64, count)
	if ok {
		saved := unpack(state)
		if len(saved) != count+1 {
			return fmt.Errorf("gostencil: resumed state of %d values, want %d", len(saved), count+1)
		}
		step, u = int(saved[0]), saved[1:]
	} else {
		for i := range u {
			u[i] = int64(first+i) * 7919 % mod
		}
	}
	left, right := rank-1, rank+1
	taken := 0
	for s := step; s < steps; s++ {
		var lo, hi int64
		if count > 0 {
			if left >= 0 {
				if err := c.Send(ctx, left, 1, pack(u[:1])); err != nil {
					return err
				}
			}
			if right < size {
				if err := c.Send(ctx, right, 2, pack(u[count-1:])); err != nil {
					return err
				}
			}
			if left >= 0 {
				b, err := c.Recv(ctx, left, 2)
				if err != nil {
					return err
				}
				lo = unpack(b)[0]
			}
			if right < size {
				b, err := c.Recv(ctx, right, 1)
				if err != nil {
					return err
				}
				hi = unpack(b)[0]
			}
		}
		ext := append(append([]int64{lo}, u...), hi)
		next := make([]int64, count)
		for i := range next {
			next[i] = (ext[i] + ext[i+1] + ext[i+2]) % mod
		}
		u = next
		if (s+1)%every == 0 {
			if err := c.Checkpoint(ctx, pack(append([]int64{int64(s + 1)}, u...))); err != nil {
				return err
			}
			taken++
			if pauseDir != "" && c.Incarnation() == 0 && taken == pause {
				if err := waitForKill(ctx, c, pauseDir); err != nil {
					return err
				}
			}
		}
	}
	var mine int64
	for i := 0; i < count; i++ {
		mine = (mine + int64(first+i+1)*u[i]) % mod
	}
	total, err := c.Reduce(ctx, 0, runtime.Int64, runtime.Sum, pack([]int64{mine}))
	if err != nil {
		return err
	}
	if rank == 0 {
		fmt.Printf("cells=%d steps=%d checksum=%d\n", cells, steps, unpack(total)[0]%mod)
	}
	return nil
}

// waitForKill writes this rank's pid (by a temporary name, so a reader
// never sees half of it) and waits on a message that never comes: rank 1
// from rank 0, every other rank from rank 1.
func waitForKill(ctx context.Context, c *runtime.Comm, dir string) error {
	path := filepath.Join(dir, fmt.Sprintf("rank-%d.pid", c.Rank()))
	if err := os.WriteFile(path+".part", []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return err
	}
	if err := os.Rename(path+".part", path); err != nil {
		return err
	}
	from := 1
	if c.Rank() == 1 {
		from = 0
	}
	_, err := c.Recv(ctx, from, 999)
	if err == nil {
		err = fmt.Errorf("gostencil: rank %d: a message on tag 999 came, none was sent", c.Rank())
	}
	return err
}
