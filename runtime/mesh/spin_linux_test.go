package mesh

import (
	"testing"
	"time"
)

// TestAdaptSpin: the spin budget halves after parks spinning could not
// have saved, down to a floor, and comes back after hits and after parks
// a longer spin would have saved; it never passes the limit.
func TestAdaptSpin(t *testing.T) {
	const limit = 1000_000 // 1 ms in ns
	c := &fdConn{fd: -1}
	c.setSpin(time.Duration(limit))
	steps := []struct {
		hit    bool
		waited int64
		want   int64
	}{
		{false, 5 * limit, limit / 2},   // a long wait: spinning did not pay
		{false, 5 * limit, limit / 4},   //
		{false, 2 * limit, limit / 8},   //
		{false, 9 * limit, limit / 16},  //
		{false, 9 * limit, limit / 32},  // the floor
		{false, 9 * limit, limit / 32},  // stays at the floor
		{false, limit / 10, limit / 16}, // woken soon after parking: spin longer
		{true, 0, limit / 8},            // a hit
		{true, 0, limit / 4},
		{true, 0, limit / 2},
		{true, 0, limit},
		{true, 0, limit}, // never past the limit
	}
	for i, s := range steps {
		c.adapt(c.budget.Load(), s.hit, s.waited)
		if got := c.budget.Load(); got != s.want {
			t.Fatalf("step %d: adapt(hit %v, waited %d) = budget %d, want %d", i, s.hit, s.waited, got, s.want)
		}
	}
}
