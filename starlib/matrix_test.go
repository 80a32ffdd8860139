package starlib_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"sperli/codes"
	"sperli/starlib"
)

// runJobArgs runs file with args on every rank of a new job of n ranks and
// returns each rank's error and how long the slowest rank took.
func runJobArgs(t *testing.T, file string, n int, args ...string) ([]error, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	comms := startJob(t, ctx, n)
	errs := make([]error, n)
	start := time.Now()
	var wg sync.WaitGroup
	for r := range comms {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			errs[r] = starlib.Run(&starlib.Program{File: file, Args: args, Comm: comms[r], Context: ctx, Stdout: new(bytes.Buffer)})
		}(r)
	}
	wg.Wait()
	return errs, time.Since(start)
}

// TestStarlarkMatrix runs testdata/jobs/matrix.star, the collective matrix
// with its own reference computed in Starlark, on 1, 2, 3 and 5 ranks.
func TestStarlarkMatrix(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5} {
		t.Run(fmt.Sprintf("%d ranks", n), func(t *testing.T) {
			errs, _ := runJobArgs(t, "testdata/jobs/matrix.star", n)
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
	}
}

// TestStarlarkMismatch runs each case of testdata/jobs/matrix_mismatch.star:
// the rank that sees the mismatch ends with H1613, every other rank with
// H1612 caused by a failed rank's H1613, at once.
func TestStarlarkMismatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
	}{
		{"lengths", 3}, {"gather-lengths", 3}, {"scatter-blocks", 3}, {"kinds", 3},
		{"roots", 3}, {"types", 3}, {"ops", 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The outcome codes tell a mismatch from a silence loss (H1611):
			// no clock is read, the machine may be loaded.
			errs, _ := runJobArgs(t, "testdata/jobs/matrix_mismatch.star", tc.n, tc.name)
			seen := 0
			for r, err := range errs {
				switch codes.Of(err) {
				case codes.CollectiveMismatch:
					seen++
				case codes.JobEnded:
					if e := codes.As(err); e.Cause == nil || e.Cause.Kind != codes.CauseFailed || e.Cause.Code != codes.CollectiveMismatch {
						t.Errorf("rank %d: %v has cause %+v, want a failed rank's H1613", r, err, e.Cause)
					}
				default:
					t.Errorf("rank %d: %v, want H1613 or H1612", r, err)
				}
			}
			if seen == 0 {
				t.Errorf("no rank saw H1613: %v", errs)
			}
		})
	}
}
