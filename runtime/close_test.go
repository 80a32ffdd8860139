package runtime_test

import (
	"context"
	"encoding/binary"
	"fmt"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"

	"sperli/runtime"
)

// waitingInRuntime returns the stacks of the goroutines that wait (are
// neither running nor runnable) inside runtime's code, from one snapshot.
// A goroutine past its last statement may still be runnable when Close
// returns; one that still waits is one nothing ended.
func waitingInRuntime() []string {
	buf := make([]byte, 4<<20)
	var out []string
	for _, g := range strings.Split(string(buf[:goruntime.Stack(buf, true)]), "\n\n") {
		head, _, _ := strings.Cut(g, "\n")
		if strings.Contains(g, "sperli/runtime.") && !strings.Contains(head, "[running]") && !strings.Contains(head, "[runnable]") {
			out = append(out, g)
		}
	}
	return out
}

// TestCloseLeavesNoGoroutine: a job that joined, ran a collective and a
// send, and was closed — after Finish, or closed without it — leaves no
// goroutine of the runtime waiting: Close returns after every goroutine it
// started (readers, writers, the monitor, the recovery loop) has ended.
// The snapshot is taken at once, without waiting: Close must have waited.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	for _, finish := range []bool{true, false} {
		t.Run(fmt.Sprintf("finish=%v", finish), func(t *testing.T) {
			before := len(waitingInRuntime())
			ctx := context.Background()
			comms := newFixture(t, 3).initAll(ctx)
			for _, err := range each(comms, func(c *runtime.Comm) error {
				if err := c.Barrier(ctx); err != nil {
					return err
				}
				if c.Rank() == 0 {
					return c.Send(ctx, 1, 5, []byte("x"))
				}
				if c.Rank() == 1 {
					_, err := c.Recv(ctx, 0, 5)
					return err
				}
				return nil
			}) {
				if err != nil {
					t.Fatal(err)
				}
			}
			if finish {
				for r, err := range each(comms, func(c *runtime.Comm) error { return c.Finish() }) {
					if err != nil {
						t.Fatalf("rank %d: Finish: %v", r, err)
					}
				}
			}
			for _, c := range comms {
				c.Close()
			}
			if after := waitingInRuntime(); len(after) > before {
				t.Fatalf("%d goroutines waited in the runtime before the job, %d after Close:\n%s", before, len(after), strings.Join(after, "\n\n"))
			}
		})
	}
}

// TestRecoveryLeavesNoGoroutine: a job of three ranks and a spare whose
// slot 2 dies (its connections close, no bye) recovers in place — the
// spare takes rank 2 and the program runs again in generation 1 — and once
// every slot, the dead one too, is closed, no goroutine of the runtime
// waits: neither the old generation's nor the recovery's.
func TestRecoveryLeavesNoGoroutine(t *testing.T) {
	before := len(waitingInRuntime())
	ctx := testCtx(t)
	f := newFixture(t, 4)
	f.spec.Size, f.spec.Spares, f.spec.SilenceMS = 3, 1, 200
	type out struct {
		c    *runtime.Comm
		gen  uint32
		sum  int64
		err  error
		rank int
	}
	outs := make([]out, 4)
	var dead *runtime.Comm
	var wg sync.WaitGroup
	for s := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s == 2 {
				c, err := runtime.Init(ctx, f.job(s))
				if err != nil {
					outs[s].err = err
					return
				}
				dead = c
				runtime.CrashForTest(c)
				return
			}
			c, err := runtime.Run(ctx, f.job(s), func(ctx context.Context, c *runtime.Comm) error {
				if err := c.Barrier(ctx); err != nil {
					return err
				}
				res, err := c.Allreduce(ctx, runtime.Int64, runtime.Sum, binary.LittleEndian.AppendUint64(nil, uint64(c.Rank()+1)))
				if err != nil {
					return err
				}
				outs[s].gen, outs[s].rank = c.Incarnation(), c.Rank()
				outs[s].sum = int64(binary.LittleEndian.Uint64(res))
				return nil
			})
			if err == nil {
				err = c.Finish()
			}
			outs[s].c, outs[s].err = c, err
		}()
	}
	wg.Wait()
	for s, o := range outs {
		if s == 2 {
			continue
		}
		if o.err != nil {
			t.Fatalf("slot %d: %v", s, o.err)
		}
		if o.gen != 1 || o.sum != 6 {
			t.Errorf("slot %d: generation %d, sum %d; want generation 1 and 1+2+3", s, o.gen, o.sum)
		}
	}
	if outs[3].rank != 2 {
		t.Errorf("the spare ended as rank %d, want rank 2", outs[3].rank)
	}
	for s, o := range outs {
		if o.c != nil {
			o.c.Close()
		} else if s == 2 && dead != nil {
			dead.Close()
		}
	}
	if after := waitingInRuntime(); len(after) > before {
		t.Fatalf("%d goroutines waited in the runtime before the job, %d after it recovered and closed:\n%s", before, len(after), strings.Join(after, "\n\n"))
	}
}
