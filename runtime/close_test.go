package runtime_test

import (
	"context"
	"fmt"
	goruntime "runtime"
	"strings"
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
