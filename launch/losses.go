package launch

import (
	"fmt"
	"sync"
)

// lossCount counts the job's losses for --max-losses: every slot whose
// loss the launcher learned (its process seen killed, a generation or a
// survivor naming it lost), each slot once an incarnation, over the
// whole job — in-place generations and restarts alike. When the count
// reaches the limit, reached is closed and the wait loop ends the job
// (exit 75, no restart).
type lossCount struct {
	max int // 0: no limit
	// name names a lost slot in the line, when the line is said: by
	// then every process has ended and its reports were read, so the
	// rank a spare took at the last moment is known (rank is the one
	// known when the loss was counted, -1 a spare).
	name func(slot, rank int) string

	mu     sync.Mutex
	before int          // the losses of the incarnations before this one
	slots  map[int]bool // the slots lost in this incarnation
	last   *countedLoss // the loss that reached the limit
	said   bool         // line was said
	once   sync.Once
	hit    chan struct{}
}

// countedLoss is the loss that reached the limit, and the how many-th.
type countedLoss struct {
	slot, rank, n int
	why           string
}

func newLossCount(max int, name func(slot, rank int) string) *lossCount {
	return &lossCount{max: max, name: name, hit: make(chan struct{})}
}

// nextIncarnation starts the count of a new incarnation: its slots are
// the old numbers again, its losses are new ones.
func (c *lossCount) nextIncarnation() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.before += len(c.slots)
	c.slots = nil
}

// add counts the loss of slot (rank: the rank it served as far as is
// known now, -1 a spare; why: how it was lost); a slot counts once an
// incarnation, whoever says it.
func (c *lossCount) add(slot, rank int, why string) {
	if c == nil || c.max <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.slots[slot] || c.before+len(c.slots) >= c.max {
		return
	}
	if c.slots == nil {
		c.slots = map[int]bool{}
	}
	c.slots[slot] = true
	if n := c.before + len(c.slots); n == c.max {
		c.last = &countedLoss{slot: slot, rank: rank, n: n, why: why}
		c.once.Do(func() { close(c.hit) })
	}
}

// reached is closed once the limit is reached; nil without a limit.
func (c *lossCount) reached() <-chan struct{} {
	if c == nil || c.max <= 0 {
		return nil
	}
	return c.hit
}

// isReached reports whether the limit was reached.
func (c *lossCount) isReached() bool {
	select {
	case <-c.reached():
		return true
	default:
		return false
	}
}

// line returns the line that says the limit was reached, once: "" the
// second time. The job's processes have ended when it is asked (their
// reports were read), so it names the loss with what is known then.
func (c *lossCount) line() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.said || c.last == nil {
		return ""
	}
	c.said = true
	l := c.last
	return fmt.Sprintf("--max-losses %d reached: %s lost (%s), the job's %s loss: ending the job", c.max, c.name(l.slot, l.rank), l.why, ordinal(l.n))
}

// ordinal is 1st, 2nd, 3rd, 4th … 11th, 12th, 13th, 21st.
func ordinal(n int) string {
	suffix := "th"
	switch n % 10 {
	case 1:
		suffix = "st"
	case 2:
		suffix = "nd"
	case 3:
		suffix = "rd"
	}
	if n%100 >= 11 && n%100 <= 13 {
		suffix = "th"
	}
	return fmt.Sprintf("%d%s", n, suffix)
}
