// Command gosum is the sum example of SPEC §16 as a Go rank, and the
// reference embedder of package runtime: it reads its job description
// from standard input, joins (runtime.Run), sums its rows, and reduces to
// rank 0.
//
//	sperli run -n 3 ./gosum [ROWS]
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"

	"sperli/runtime"
)

func main() { os.Exit(run()) }

func run() int {
	rows := int64(3000000)
	if len(os.Args) > 1 {
		n, err := strconv.ParseInt(os.Args[1], 10, 64)
		if err != nil || n < 0 {
			fmt.Fprintf(os.Stderr, "gosum: ROWS %q: want a whole number of at least 0\n", os.Args[1])
			return 2
		}
		rows = n
	}
	job, err := runtime.ReadJob(os.Stdin)
	if err != nil {
		return runtime.Exit(nil, err)
	}
	ctx := context.Background()
	// Run joins and calls sum; in a job with spares it calls it again, in
	// the next generation, after a rank was replaced in place.
	c, err := runtime.Run(ctx, job, func(ctx context.Context, c *runtime.Comm) error {
		return sum(ctx, c, rows)
	})
	if c == nil {
		return runtime.Exit(nil, err)
	}
	return runtime.Exit(c, err)
}

// part returns the first row and the row count of rank.
func part(rows int64, size, rank int) (first, count int64) {
	base, extra := rows/int64(size), rows%int64(size)
	count = base
	if int64(rank) < extra {
		count++
	}
	first = int64(rank)*base + min(int64(rank), extra)
	return first, count
}

func sum(ctx context.Context, c *runtime.Comm, rows int64) error {
	first, count := part(rows, c.Size(), c.Rank())
	var s int64
	for v := first + 1; v <= first+count; v++ {
		s += v
	}
	total, err := c.Reduce(ctx, 0, runtime.Int64, runtime.Sum, binary.LittleEndian.AppendUint64(nil, uint64(s)))
	if err != nil {
		return err
	}
	if c.Rank() != 0 {
		return nil
	}
	got := int64(binary.LittleEndian.Uint64(total))
	want := rows * (rows + 1) / 2
	verdict := "ok"
	if got != want {
		verdict = "bad"
	}
	fmt.Printf("rows=%d total=%d expected=%d %s\n", rows, got, want, verdict)
	if got != want {
		return errors.New("gosum: the total does not match")
	}
	return nil
}
