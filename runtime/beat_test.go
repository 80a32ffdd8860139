package runtime_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"sperli/job"
	"sperli/memnet"
	"sperli/runtime"
	"sperli/topo"
	"sperli/wire"
)

// TestBeatsWhileLinking: a rank that makes a link every 50 ms for more
// than two silence limits (rank 0 sends to every rank it has no link to
// yet, in turn: each send a new link) keeps heartbeating its other links, and no rank is
// declared lost. Every link attached woke the monitor to take the new
// peer's limit into account, and the wake started its wait anew, so a
// slot that made links faster than its wait (a tenth of its limit)
// neither heartbeat nor looked until it stopped: its ring watchers
// declared it lost. On synctest's clock: the sends' pace is exact.
func TestBeatsWhileLinking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 64
		const pace = 50 * time.Millisecond // a link every 50 ms for 2.5 s or more; a limit of 1 s
		linked := map[int]bool{0: true}
		for _, s := range topo.Neighbours(n, 0, nil) {
			linked[s] = true
		}
		if n-len(linked) < 50 {
			t.Fatalf("rank 0 is linked to %d of %d ranks after the join: too few sends left to make links", len(linked)-1, n)
		}
		memJob(t, n, 1000, func(ctx context.Context, c *runtime.Comm) error {
			if c.Rank() == 0 {
				for r := 1; r < n; r++ {
					if linked[r] {
						continue
					}
					time.Sleep(pace)
					if err := c.Send(ctx, r, 5, []byte{byte(r)}); err != nil {
						return fmt.Errorf("send to rank %d: %w", r, err)
					}
				}
			} else if !linked[c.Rank()] {
				// Only rank 0's sends make links: a receive would make its
				// own at once.
				time.Sleep(n*pace + time.Second)
				if b, err := c.Recv(ctx, 0, 5); err != nil || len(b) != 1 || int(b[0]) != c.Rank() {
					return fmt.Errorf("receive from rank 0: %q, %v", b, err)
				}
			}
			return c.Barrier(ctx)
		})
	})
}

// TestCollectiveLinkOnePerPair: a pairwise alltoall (40 ranks, blocks of
// 9,000 bytes: past bruck's 8 KiB) links every rank to every other with one connection a pair. Both
// ranks of a pair send to each other at the same moment; each used to
// dial the other, both handshakes ran to the end, and the listener's hello
// then named one a dup — twice the connections and the cryptography the
// links need. In a collective the lower slot makes the link and the
// higher waits for its dial (collLinkAt).
func TestCollectiveLinkOnePerPair(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, blk = 40, 9000
		var mu sync.Mutex
		links := 0
		mn := memJob(t, n, 1000, func(ctx context.Context, c *runtime.Comm) error {
			data := make([]byte, n*blk)
			for r := range n {
				for i := range blk {
					data[r*blk+i] = byte(c.Rank()*7 + r)
				}
			}
			got, err := c.Alltoall(ctx, data)
			if err != nil {
				return err
			}
			for r := range n {
				if got[r*blk] != byte(r*7+c.Rank()) || got[r*blk+blk-1] != byte(r*7+c.Rank()) {
					return fmt.Errorf("block of rank %d: %d, want %d", r, got[r*blk], byte(r*7+c.Rank()))
				}
			}
			if err := c.Barrier(ctx); err != nil {
				return err
			}
			mu.Lock()
			links += len(runtime.LinkedForTest(c))
			mu.Unlock()
			return nil
		})
		if links != n*(n-1) {
			t.Fatalf("%d link ends after the alltoall, want %d (every pair)", links, n*(n-1))
		}
		if d := mn.Dials(); d != int64(n*(n-1)/2) {
			t.Errorf("%d connections dialed for %d pairs, want one a pair", d, n*(n-1)/2)
		}
	})
}

// memJob runs body on every rank of a job of n ranks over an in-memory
// network, in the caller's synctest bubble, and fails t with every rank
// that erred or knew of a loss. It returns the network.
func memJob(t *testing.T, n, silenceMS int, body func(ctx context.Context, c *runtime.Comm) error) *memnet.Network {
	t.Helper()
	mn := memnet.New()
	mn.Latency = 50 * time.Microsecond
	id, err := job.NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	table := make([]runtime.Host, n)
	lns := make([]net.Listener, n)
	for s := range n {
		table[s] = runtime.Host{Host: "10.0.0.1", Port: 10000 + s}
		if lns[s], err = mn.Listen(fmt.Sprintf("10.0.0.1:%d", 10000+s)); err != nil {
			t.Fatal(err)
		}
	}
	spec := job.Spec{Size: n, Hosts: table, SilenceMS: silenceMS, JoinMS: 60000, Expires: time.Now().Add(time.Hour)}.Compacted()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var (
		wg     sync.WaitGroup
		errs   = make([]error, n)
		losses = make([][]string, n)
	)
	for s := range n {
		j, err := id.Describe(spec, s)
		if err != nil {
			t.Fatal(err)
		}
		j.Listener, j.Net = lns[s], mn
		j.Logf = func(string, ...any) {}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := runtime.Init(ctx, j)
			if err != nil {
				errs[s] = err
				return
			}
			defer c.Close()
			errs[s] = body(ctx, c)
			losses[s] = runtime.KnownLossesForTest(c)
			if errs[s] == nil {
				errs[s] = c.Finish()
			}
		}()
	}
	wg.Wait()
	for s := range n {
		if errs[s] != nil || len(losses[s]) > 0 {
			t.Errorf("rank %d: %v; losses known: %v", s, errs[s], losses[s])
		}
	}
	return mn
}

// TestLinkAfterWaits: a dial that waits for the peer's (a collective's
// frame to a lower slot) dials itself once its wait is over, and at once
// when a send needs the link; the lower slot, which needs nothing, never
// dials. On synctest's clock.
func TestLinkAfterWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 40
		// Two pairs (high, low) with no link after the join.
		free := func(hi int, taken int) int {
			nb := topo.Neighbours(n, hi, nil)
			for lo := 1; lo < hi; lo++ {
				if !slices.Contains(nb, lo) && lo != taken && !slices.Contains(topo.Neighbours(n, n-2, nil), lo) {
					return lo
				}
			}
			t.Fatalf("no slot below %d without a link to it", hi)
			return -1
		}
		loA := free(n-1, -1)
		loB := free(n-2, loA)
		linkedTo := func(c *runtime.Comm, s int) bool { return slices.Contains(runtime.LinkedForTest(c), s) }
		memJob(t, n, 1000, func(ctx context.Context, c *runtime.Comm) error {
			switch c.Rank() {
			case n - 1: // waits 500 ms for loA, which never dials
				runtime.LinkAfterForTest(c, loA, 500*time.Millisecond)
				time.Sleep(400 * time.Millisecond)
				if linkedTo(c, loA) {
					return fmt.Errorf("linked to %d before its wait was over", loA)
				}
				time.Sleep(200 * time.Millisecond)
				if !linkedTo(c, loA) {
					return fmt.Errorf("not linked to %d 100 ms after its wait", loA)
				}
			case n - 2: // would wait 10 s for loB; a send needs the link at 100 ms
				runtime.LinkAfterForTest(c, loB, 10*time.Second)
				time.Sleep(100 * time.Millisecond)
				if linkedTo(c, loB) {
					return fmt.Errorf("linked to %d before anything needed it", loB)
				}
				sent := time.Now()
				if err := c.Send(ctx, loB, 9, []byte("now")); err != nil {
					return err
				}
				time.Sleep(100 * time.Millisecond)
				if !linkedTo(c, loB) || time.Since(sent) > 200*time.Millisecond {
					return fmt.Errorf("a send did not end the wait for %d: linked %v after %v", loB, linkedTo(c, loB), time.Since(sent))
				}
			case loB:
				time.Sleep(time.Second)
				if b, err := c.Recv(ctx, n-2, 9); err != nil || string(b) != "now" {
					return fmt.Errorf("receive from rank %d: %q, %v", n-2, b, err)
				}
			}
			return c.Barrier(ctx)
		})
	})
}

// TestSilenceAnnouncedAgainAndAgain: a joined rank that announces a valid
// silence limit to rank 0 every 50 ms for three limits (each announcement
// woke rank 0's monitor, which used to start its wait anew) does not keep
// rank 0 from heartbeating: no rank declares rank 0 lost. The liar is
// rank 0's neighbour on the tree, linked since the join.
func TestSilenceAnnouncedAgainAndAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 16
		liar := topo.Neighbours(n, 0, nil)[0]
		memJob(t, n, 1000, func(ctx context.Context, c *runtime.Comm) error {
			if c.Rank() == liar {
				h := newHostile(t, c)
				payload := binary.BigEndian.AppendUint32(nil, 5000)
				for range 60 {
					h.write(0, rawFrame{Type: byte(wire.Silence), Payload: payload})
					time.Sleep(50 * time.Millisecond)
				}
			} else {
				time.Sleep(3 * time.Second)
			}
			return c.Barrier(ctx)
		})
	})
}
