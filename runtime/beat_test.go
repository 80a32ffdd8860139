package runtime_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"sperli/job"
	"sperli/memnet"
	"sperli/runtime"
	"sperli/runtime/topo"
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
		spec := job.Spec{Size: n, Hosts: table, SilenceMS: 1000, JoinMS: 60000, Expires: time.Now().Add(time.Hour)}.Compacted()
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
				errs[s] = func() error {
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
						// Only rank 0's sends make links: a receive would
						// make its own at once.
						time.Sleep(n*pace + time.Second)
						if b, err := c.Recv(ctx, 0, 5); err != nil || len(b) != 1 || int(b[0]) != c.Rank() {
							return fmt.Errorf("receive from rank 0: %q, %v", b, err)
						}
					}
					if err := c.Barrier(ctx); err != nil {
						return err
					}
					losses[s] = runtime.KnownLossesForTest(c)
					return c.Finish()
				}()
			}()
		}
		wg.Wait()
		for s := range n {
			if errs[s] != nil || len(losses[s]) > 0 {
				t.Errorf("rank %d: %v; losses known: %v", s, errs[s], losses[s])
			}
		}
	})
}
