package runtime

import "time"

// NewFdConnForTest is an fdConn with no socket and spin limit ns, for
// the spin budget's tests.
func NewFdConnForTest(ns int64) *fdConn {
	c := &fdConn{fd: -1}
	c.setSpin(time.Duration(ns))
	return c
}

// AdaptForTest runs one adapt step from c's current budget and returns
// the new one.
func AdaptForTest(c *fdConn, hit bool, waited int64) int64 {
	c.adapt(c.budget.Load(), hit, waited)
	return c.budget.Load()
}
