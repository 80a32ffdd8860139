package runtime_test

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"sperli/codes"
	"sperli/job"
	"sperli/runtime"
)

// joinWith joins every rank of f concurrently, each description changed
// by edit first, and returns each rank's communicator and error.
func joinWith(ctx context.Context, f *fixture, edit func(rank int, j *runtime.Job)) ([]*runtime.Comm, []error) {
	n := f.spec.Size + f.spec.Spares
	comms, errs := make([]*runtime.Comm, n), make([]error, n)
	jobs := make([]*runtime.Job, n)
	for r := range n {
		jobs[r] = f.job(r)
		edit(r, jobs[r])
	}
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			comms[r], errs[r] = runtime.Init(ctx, jobs[r])
		}()
	}
	wg.Wait()
	f.t.Cleanup(func() {
		for _, c := range comms {
			if c != nil {
				c.Close()
			}
		}
	})
	return comms, errs
}

// digest is a program digest made of one byte.
func digest(b byte) []byte {
	var sum [job.DigestSize]byte
	sum[0] = b
	d := job.ProgramDigest(sum, []string{"x"})
	return d[:]
}

// wantMismatch checks that every rank's join failed for the difference:
// with H1628 itself, or with H1612 caused by a slot that found it (its
// abort came first). At least one error names slot `odd` and both
// digests, and says what differs (about).
func wantMismatch(t *testing.T, errs []error, odd int, about string, digests ...string) {
	t.Helper()
	named := false
	for r, err := range errs {
		ce := codes.As(err)
		switch {
		case ce == nil:
			t.Fatalf("rank %d joined (%v), want H1628", r, err)
		case ce.Code == codes.ProgramMismatch:
		case ce.Code == codes.JobEnded && ce.Cause != nil && ce.Cause.Code == codes.ProgramMismatch:
		default:
			t.Fatalf("rank %d: %v, want H1628 or H1612 caused by it", r, err)
		}
		msg := err.Error()
		ok := ce.Code == codes.ProgramMismatch && strings.Contains(msg, about) && strings.Contains(msg, fmt.Sprintf("slot %d's", odd))
		for _, d := range digests {
			ok = ok && strings.Contains(msg, d)
		}
		named = named || ok
	}
	if !named {
		t.Fatalf("no error names slot %d, %q and both digests %v: %v", odd, about, digests, errs)
	}
}

// TestJoinProgramMismatch: two slots of a job that runs one program;
// slot 1 runs another. Neither join returns a communicator: both end
// with H1628, and the message names the slot and both digests. (A third
// slot that has no link to either end of the difference yet ends by its
// join window, or at once by its launcher: tests/launcher.)
func TestJoinProgramMismatch(t *testing.T) {
	f := newFixture(t, 2)
	f.spec.OneProgram = true
	_, errs := joinWith(testCtx(t), f, func(r int, j *runtime.Job) {
		j.ProgramDigest = digest(map[bool]byte{true: 2, false: 1}[r == 1])
	})
	wantMismatch(t, errs, 1, "run different programs or arguments", hex.EncodeToString(digest(1)), hex.EncodeToString(digest(2)))
}

// TestJoinPolicyMismatch: slot 1's description gives another silence
// limit: the loss policies differ, which is H1628 whether or not the
// job runs one program.
func TestJoinPolicyMismatch(t *testing.T) {
	for _, one := range []bool{false, true} {
		f := newFixture(t, 2)
		f.spec.OneProgram = one
		var policies [2][job.DigestSize]byte
		_, errs := joinWith(testCtx(t), f, func(r int, j *runtime.Job) {
			j.ProgramDigest = digest(1)
			if r == 1 {
				j.SilenceMS = 7000
			}
			policies[r] = j.PolicyDigest()
		})
		if policies[0] == policies[1] {
			t.Fatalf("policy digests %x: want slot 1's to differ", policies)
		}
		wantMismatch(t, errs, 1, "have different loss policies", hex.EncodeToString(policies[0][:]), hex.EncodeToString(policies[1][:]))
	}
}

// TestJoinSpareMismatch: a spare is compared as a rank is: a job of one
// rank and one spare whose program differs ends in the join.
func TestJoinSpareMismatch(t *testing.T) {
	f := newFixture(t, 2)
	f.spec.Size, f.spec.Spares, f.spec.OneProgram = 1, 1, true
	_, errs := joinWith(testCtx(t), f, func(r int, j *runtime.Job) {
		j.ProgramDigest = digest(map[bool]byte{true: 9, false: 1}[r == 1])
	})
	wantMismatch(t, errs, 1, "run different programs or arguments", hex.EncodeToString(digest(9)), hex.EncodeToString(digest(1)))
}

// TestJoinProgramsMixed: without one_program (a job that mixes Starlark,
// Go and C ranks by design) different programs join, and so does one
// program everywhere with it.
func TestJoinProgramsMixed(t *testing.T) {
	for _, one := range []bool{false, true} {
		f := newFixture(t, 3)
		f.spec.OneProgram = one
		comms, errs := joinWith(testCtx(t), f, func(r int, j *runtime.Job) {
			b := byte(r + 1)
			if one {
				b = 7
			}
			j.ProgramDigest = digest(b)
		})
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("one_program %v: %v", one, err)
		}
		errs = each(comms, func(c *runtime.Comm) error { return c.Barrier(context.Background()) })
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("one_program %v: barrier: %v", one, err)
		}
	}
}
