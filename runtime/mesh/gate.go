package mesh

import (
	"cmp"
	"net"
	"slices"
	"sync"
)

// Gate bounds how many of a slot's handshakes compute at once. A
// handshake is a few bursts of processor time (the key exchange, the
// signatures, the peer's certificate and token) between waits for the
// peer. A rank that makes a hundred links at once (a program that sends
// to every rank, a pairwise alltoall) has a hundred handshakes runnable,
// and Go runs them in turn with everything else of the process: on a
// machine with far more ranks than processors, where a process gets a
// sliver of one, its heartbeats and the frames of its links waited
// seconds behind them, and its peers took the silence for a loss.
//
// A handshake computes only while it holds one of the gate's turns: it
// gives its turn up while it waits for the peer (its connection's reads)
// and takes one again before it goes on. The others wait off the run
// queue, so what else the process does waits behind a few bursts at
// most. A turn is never held across a wait for the peer: a peer that does
// not answer holds no turn. Turns go to the oldest handshake first, so
// that handshakes end one after another rather than all together at the
// end of the storm (and a peer waiting for one of them is answered as
// soon as this slot can).
type Gate struct {
	mu    sync.Mutex
	free  int       // turns not held
	next  uint64    // the order of the next handshake entered
	waits []*ticket // waiting for a turn, oldest first
}

// ticket is one handshake's place at the gate.
type ticket struct {
	order uint64
	turn  chan struct{} // a turn handed over by give
}

// NewGate is a gate of n turns (at least one).
func NewGate(n int) *Gate { return &Gate{free: max(n, 1)} }

// take waits for a turn for t.
func (g *Gate) take(t *ticket) {
	g.mu.Lock()
	if g.free > 0 && len(g.waits) == 0 {
		g.free--
		g.mu.Unlock()
		return
	}
	i, _ := slices.BinarySearchFunc(g.waits, t.order, func(w *ticket, o uint64) int { return cmp.Compare(w.order, o) })
	g.waits = slices.Insert(g.waits, i, t)
	g.mu.Unlock()
	<-t.turn
}

// give hands a turn to the oldest handshake waiting, or frees it.
func (g *Gate) give() {
	g.mu.Lock()
	if len(g.waits) == 0 {
		g.free++
		g.mu.Unlock()
		return
	}
	t := g.waits[0]
	g.waits = slices.Delete(g.waits, 0, 1)
	g.mu.Unlock()
	t.turn <- struct{}{} // buffered: never waits
}

// Enter gates conn, a connection of Wrap's, for its handshake: it waits
// for a turn, and from then on conn's reads give the turn up while they
// wait and take one back before they return. The goroutine that
// handshakes calls leave, outside a read, once the work of the handshake
// is done (or it failed), and before any other goroutine reads conn: it
// ends the gating and gives the turn back. Leave may be called more than
// once. A nil gate, or a connection not of Wrap's, gates nothing.
func (g *Gate) Enter(conn net.Conn) (leave func()) {
	cc, ok := conn.(*corkConn)
	if g == nil || !ok {
		return func() {}
	}
	g.mu.Lock()
	t := &ticket{order: g.next, turn: make(chan struct{}, 1)}
	g.next++
	g.mu.Unlock()
	g.take(t)
	cc.gated = g
	cc.gate.Store(t)
	var once sync.Once
	return func() {
		once.Do(func() {
			cc.gate.Store(nil)
			g.give()
		})
	}
}

// readBelow reads from the connection below (corkConn.Read, gulp.go); a
// gated one (Gate.Enter) without its turn while it waits.
func (c *corkConn) readBelow(b []byte) (int, error) {
	t := c.gate.Load()
	if t == nil {
		return c.Conn.Read(b)
	}
	c.gated.give()
	n, err := c.Conn.Read(b)
	c.gated.take(t)
	return n, err
}
