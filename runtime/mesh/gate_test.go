package mesh

import (
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// gatedPipe is one end of a pipe, wrapped as a join wraps its
// connections, and the other end.
func gatedPipe(t *testing.T) (net.Conn, net.Conn) {
	a, b := net.Pipe()
	c, err := Wrap(a, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); b.Close() })
	return c, b
}

// TestGateBounds: ten handshakes of three bursts each through a gate of
// three turns: never more than three compute at once, three do at some
// time, and every one ends. A burst is a sleep on synctest's clock with
// the turn held; between bursts the handshake reads what its peer sends.
func TestGateBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate(3)
		var (
			mu           sync.Mutex
			active, most int
			ended        int
			wg           sync.WaitGroup
		)
		burst := func() {
			mu.Lock()
			active++
			most = max(most, active)
			mu.Unlock()
			time.Sleep(time.Millisecond)
			mu.Lock()
			active--
			mu.Unlock()
		}
		for range 10 {
			c, peer := gatedPipe(t)
			wg.Add(2)
			go func() { // the peer answers each burst after a while
				defer wg.Done()
				for range 2 {
					time.Sleep(5 * time.Millisecond)
					peer.Write([]byte{1})
				}
			}()
			go func() {
				defer wg.Done()
				leave := g.Enter(c)
				defer leave()
				for i := range 3 {
					burst()
					if i < 2 {
						var b [1]byte
						if _, err := io.ReadFull(c, b[:]); err != nil {
							t.Error(err)
							return
						}
					}
				}
				mu.Lock()
				ended++
				mu.Unlock()
			}()
		}
		wg.Wait()
		if most != 3 || ended != 10 {
			t.Errorf("at most %d handshakes computed at once (want 3, the turns), %d of 10 ended", most, ended)
		}
		if g.free != 3 || len(g.waits) != 0 {
			t.Errorf("after every handshake left: %d turns free, %d waiting; want 3, 0", g.free, len(g.waits))
		}
	})
}

// TestGateReadGivesTurnUp: with one turn, a handshake waiting for its
// peer does not hold it (here B could not start, and the test would
// deadlock), takes one back when its bytes come, and gets it before a
// younger handshake that began to wait for it earlier (oldest first, not
// first come).
func TestGateReadGivesTurnUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate(1)
		ca, pa := gatedPipe(t)
		cb, _ := gatedPipe(t)
		cc, _ := gatedPipe(t)
		var (
			mu    sync.Mutex
			order []string
		)
		note := func(s string) {
			mu.Lock()
			order = append(order, s)
			mu.Unlock()
		}
		var wg sync.WaitGroup
		wg.Add(4)
		go func() { // A, the oldest: waits for its peer, then computes
			defer wg.Done()
			leave := g.Enter(ca)
			defer leave()
			note("A in")
			var b [1]byte
			if _, err := io.ReadFull(ca, b[:]); err != nil {
				t.Error(err)
			}
			note("A read")
		}()
		synctest.Wait() // A waits in its read, without the turn
		go func() {     // B takes the turn A gave up, and holds it a while
			defer wg.Done()
			leave := g.Enter(cb)
			note("B in")
			time.Sleep(10 * time.Millisecond)
			note("B out")
			leave()
			leave() // twice: the second does nothing
		}()
		synctest.Wait()
		go func() { // C, younger than A, waits for the turn while A reads
			defer wg.Done()
			leave := g.Enter(cc)
			note("C in")
			leave()
		}()
		synctest.Wait()
		go func() { // A's peer answers while B holds the turn: A waits behind C
			defer wg.Done()
			pa.Write([]byte{1})
		}()
		wg.Wait()
		want := []string{"A in", "B in", "B out", "A read", "C in"}
		if !slices.Equal(order, want) {
			t.Errorf("order %v, want %v (A's read without the turn, then A before the younger C)", order, want)
		}
		if g.free != 1 {
			t.Errorf("%d turns free after all left, want 1", g.free)
		}
	})
}

// TestGateLeft: after leave, reads of the connection do not touch the
// gate (a link's reader must never wait for a handshake's turn), and a
// nil gate or a connection not of Wrap's gates nothing.
func TestGateLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate(1)
		c, peer := gatedPipe(t)
		leave := g.Enter(c)
		leave()
		hold, _ := gatedPipe(t)
		holdLeave := g.Enter(hold) // the only turn, held from now on
		go peer.Write([]byte{7})
		var b [1]byte
		if _, err := io.ReadFull(c, b[:]); err != nil || b[0] != 7 {
			t.Fatalf("read after leave: %v %v", b, err)
		}
		holdLeave()
		raw, _ := net.Pipe()
		defer raw.Close()
		g.Enter(raw)() // not a Wrap connection: no turn taken
		var nilGate *Gate
		nilGate.Enter(c)()
		if g.free != 1 {
			t.Errorf("%d turns free, want 1", g.free)
		}
	})
}
