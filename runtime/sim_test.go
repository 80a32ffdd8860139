// The simulation is left out of the race detector's build: 1,000 slots
// take 74 s and 6.8 GB under it, 9 s and 1.2 GB without, and make test
// runs it without (its own line).

//go:build !race

package runtime_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	goruntime "runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"sperli/codes"
	"sperli/job"
	"sperli/memnet"
	"sperli/runtime"
	"sperli/runtime/mesh"
	"sperli/topo"
)

// The simulation (SPEC §18): the real join, links, detector, news and
// agreement of n ranks and a spare, each slot a Comm of this process, over
// an in-memory network (memnet) with a latency on every byte, on the
// virtual clock of testing/synctest: every timer, deadline and sleep of
// the runtime runs on it, and simulated time passes only when every slot
// waits. A link's handshake costs its CPU time on top (simHandshake): the
// clock does not count the CPU the real handshake takes here.
//
// The job joins, meets at a barrier, loses the rank in its middle (its
// process crashes: its connections break, no bye), recovers in place (the
// spare takes the lost rank) and meets again in generation 1, where an
// allreduce checks every rank's value; then a rank of generation 1 falls
// silent, as a stopped process, is declared lost by its watchers and
// replaced by the second spare, and generation 2's allreduce checks every
// value again. simulate reports per-slot links, handshakes and frames,
// and the job-wide hops and simulated time until every live slot knows of
// each loss and until the next generation runs.
//
// TestSimulation runs 1,000 slots (make test, without the race detector);
// SPERLI_SIM=1000,10000 (make sim) runs the sizes it lists and prints
// their figures; SPERLI_SIM_BUF_KIB=N makes the links' buffers N KiB, and
// SPERLI_SIM_HEAP=FILE writes a heap profile of what the slots hold when
// they are done, or SPERLI_SIM_HEAP_MS of simulated time after the start
// (docs/scale.md, where the simulation's memory goes);
// SPERLI_SIM_LAUNCH_US=G starts a slot every G µs of simulated time, the
// highest first, rather than every slot at once (what lets 100,000 fit:
// the handshakes of a join at once are most of the peak).

const (
	// simLatency is one way's latency of the simulated network: a
	// cluster's Ethernet.
	simLatency = 50 * time.Microsecond
	// simHandshake is the CPU one link's handshake costs (TLS 1.3 with
	// Ed25519 certificates both ways, the hello and the token's check),
	// measured on the project's machine: a join of 32 ranks makes 496
	// links in 0.5 s on two processors (docs/benchmarks.md), 2 ms each.
	simHandshake = 2 * time.Millisecond
	// simSilence is the silence limit of the simulated job.
	simSilence = 2 * time.Second
)

func TestSimulation(t *testing.T) {
	sizes := []int{1000}
	if s := os.Getenv("SPERLI_SIM"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 3 || n > job.MaxSize-1 {
				t.Fatalf("SPERLI_SIM=%q: want sizes of 3 to %d, comma-separated", s, job.MaxSize-1)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			r := simulate(t, n)
			r.print(t.Output())
			r.check(t)
		})
	}
}

// simResult is what a simulation measured.
type simResult struct {
	n, spares           int
	victim, coordinator int
	stopped             int           // the rank of generation 1 that stops (silent)
	known2, nextGen2    time.Duration // from the stop until every live slot knew, until generation 2 ran
	hops2, sawIt2       int
	sums2               []int64       // each rank's allreduce in generation 2
	launchGap           time.Duration // between the starts of two slots (0: every slot at once)
	joined              time.Duration // from the start until every slot joined
	firstBarrier        time.Duration // from the start until the first barrier ended everywhere
	known               time.Duration // from the crash until every live slot knew of it
	nextGen             time.Duration // from the crash until every rank ran generation 1
	hops                int           // the longest chain of news from a slot that saw the loss
	sawIt               int           // slots that saw the loss themselves
	links, made, frames stat          // per slot, at the end
	joinLinks           stat          // per slot, after the join
	dials               int64         // connections dialed, job-wide
	framesTotal         int64         // frames read, job-wide
	sums                []int64       // each rank's allreduce in generation 1
	spareRank           int           // the spare's rank in generation 1
	linksOfCoordinator  int64         // the recovery's coordinator's links at the end
	maxLinksOther       int64         // the most links of any other slot
	maxSlotOf           int           // which
	relayed             int64         // relay frames sent or passed on, job-wide, both recoveries
}

// stat is the max and mean of a per-slot figure.
type stat struct {
	max  int64
	mean float64
}

func statOf(xs []int64) stat {
	var s stat
	for _, x := range xs {
		s.max = max(s.max, x)
		s.mean += float64(x)
	}
	if len(xs) > 0 {
		s.mean /= float64(len(xs))
	}
	return s
}

func (r simResult) print(w io.Writer) {
	fmt.Fprintf(w, "simulation of %d ranks and %d spare(s) (latency %v, handshake %v, silence %v)\n", r.n, r.spares, simLatency, simHandshake, simSilence)
	if r.launchGap > 0 {
		fmt.Fprintf(w, "  launch: a slot started every %v, the highest first: the last at %v\n", r.launchGap, r.launchGap*time.Duration(r.n+r.spares-1))
	}
	fmt.Fprintf(w, "  join: every slot joined at %v simulated, first barrier at %v; links per slot max %d mean %.1f\n",
		r.joined, r.firstBarrier, r.joinLinks.max, r.joinLinks.mean)
	fmt.Fprintf(w, "  loss of slot %d: %d slots saw it, every live slot knew after %v, in at most %d hops\n", r.victim, r.sawIt, r.known, r.hops)
	fmt.Fprintf(w, "  generation 1 ran everywhere %v after the crash (coordinator slot %d, spare took rank %d)\n", r.nextGen, r.coordinator, r.spareRank)
	fmt.Fprintf(w, "  stop of slot %d (silent, as SIGSTOP) in generation 1: %d slots declared it lost, every live slot knew %v after it stopped, in at most %d hops; generation 2 ran everywhere %v after it stopped\n",
		r.stopped, r.sawIt2, r.known2, r.hops2, r.nextGen2)
	fmt.Fprintf(w, "  per slot after generation 1's allreduce: links max %d mean %.1f (coordinator %d, any other at most %d: slot %d); handshakes max %d mean %.1f; frames read max %d mean %.1f\n",
		r.links.max, r.links.mean, r.linksOfCoordinator, r.maxLinksOther, r.maxSlotOf, r.made.max, r.made.mean, r.frames.max, r.frames.mean)
	fmt.Fprintf(w, "  job-wide: %d connections dialed, %d frames read, %d relay frames sent or passed on\n", r.dials, r.framesTotal, r.relayed)
}

// check asserts what SPEC §18 promises of the run.
func (r simResult) check(t *testing.T) {
	t.Helper()
	want := int64(r.n * (r.n + 1) / 2)
	for k, s := range r.sums {
		if s != want {
			t.Fatalf("rank %d's allreduce in generation 1 = %d, want %d", k, s, want)
		}
	}
	for k, s := range r.sums2 {
		if s != want {
			t.Fatalf("rank %d's allreduce in generation 2 = %d, want %d", k, s, want)
		}
	}
	// A silent slot is declared lost within the silence limit and half
	// a second (SPEC §18), and the news follows at the network's speed.
	if lim := simSilence + 500*time.Millisecond + time.Duration(r.hops2+2)*4*simLatency; r.known2 > lim {
		t.Errorf("every slot knew of the silent slot %v after it stopped, want within %v", r.known2, lim)
	}
	// The first barrier's missing links (its tree is over the ranks, the
	// join's over the slots, spares too) are dialed together when it
	// starts (collCall.Partners): a handshake's time and the tree's hops
	// after the join, not a handshake a kid, one after another.
	if lim := r.joined + 2*simHandshake + time.Duration(2*depth(r.n)+4)*4*simLatency; r.firstBarrier > lim {
		t.Errorf("the first barrier ended everywhere at %v, want within %v: a handshake and the tree's hops after the join (%v)", r.firstBarrier, lim, r.joined)
	}
	if r.spareRank != r.victim {
		t.Errorf("the spare took rank %d, want the lost rank %d", r.spareRank, r.victim)
	}
	// The join makes the links of the tree and the ring only (up to 33
	// slots the first barrier's dissemination links more).
	lim := int64(maxNeighbours(r.n + 1))
	if r.n+1 <= 33 {
		lim = int64(r.n)
	}
	if r.joinLinks.max > lim {
		t.Errorf("a slot had %d links after the join, want at most %d (tree and ring)", r.joinLinks.max, lim)
	}
	// The loss is news for all within a few hops: the tree's depth
	// twice and the ring's steps.
	if lim := 2*depth(r.n+1) + 4; r.hops > lim {
		t.Errorf("the news of the loss took %d hops, want at most %d", r.hops, lim)
	}
	// A crash is seen at once; the news travels at the network's
	// speed, not at the detector's.
	if lim := time.Duration(r.hops+2) * 4 * simLatency; r.known > lim+simSilence/2 {
		t.Errorf("every slot knew of the loss after %v, want within %v", r.known, lim+simSilence/2)
	}
	// No slot holds links beyond its neighbours and the collectives'
	// partners; in a small job the recovery's coordinator links to every
	// slot, above runtime.RelayAbove its messages go over the tree.
	if lim := 2*lim + 10; r.maxLinksOther > lim {
		t.Errorf("slot %d had %d links at the end, want at most %d", r.maxSlotOf, r.maxLinksOther, lim)
	} else if r.n+1 > runtime.RelayAbove() && r.linksOfCoordinator > lim {
		t.Errorf("the coordinator, slot %d, had %d links at the end, want at most %d: the agreement's messages go over the tree", r.coordinator, r.linksOfCoordinator, lim)
	}
	if r.n+1 > runtime.RelayAbove() && r.relayed == 0 {
		t.Errorf("no agreement message was relayed in a job of %d slots", r.n+1)
	}
	// The coordinator reads a promise and an accepted of every slot; the
	// slots' reports to it are held back while its prepare comes first
	// (recover.go, holdReport): 3n frames when they were not. Beside them
	// it reads the collectives', the news' and the check's frames, about
	// a hundred whatever n (at 100 slots a quarter more is too few).
	if lim := int64(2*(r.n+1) + max(r.n/4, 128)); r.n+1 > runtime.RelayAbove() && r.frames.max > lim {
		t.Errorf("a slot read %d frames by generation 1, want at most %d (a promise and an accepted of each slot, and a quarter more or 128)", r.frames.max, lim)
	}
}

// maxNeighbours is the most links topo gives a slot of a job of n.
func maxNeighbours(n int) int {
	m := 0
	for s := range n {
		m = max(m, len(topo.Neighbours(n, s, nil)))
	}
	return m
}

// depth is the number of levels of topo's tree of n slots.
func depth(n int) int {
	d := 0
	for s := n - 1; s > 0; s = topo.Parent(n, s) {
		d++
	}
	return max(d, 1)
}

// lossNews returns, of the loss of slot lost at t0, how long until every
// slot but the skipped ones knew of it, the longest chain of news from a
// slot that saw it itself, and how many saw it.
func lossNews(t *testing.T, comms []*runtime.Comm, lost int, t0 time.Time, skip ...int) (known time.Duration, hops, saw int) {
	t.Helper()
	from := make([]int, len(comms))
	for s, c := range comms {
		if slices.Contains(skip, s) {
			from[s] = -1
			continue
		}
		f, at, ok := runtime.LossNewsForTest(c, lost)
		if !ok {
			t.Fatalf("slot %d never learned that slot %d was lost", s, lost)
		}
		from[s] = f
		if f < 0 {
			saw++
		}
		known = max(known, at.Sub(t0))
	}
	for s := range comms {
		h := 0
		for x := s; from[x] >= 0 && h <= len(comms); x = from[x] {
			h++
		}
		hops = max(hops, h)
	}
	return known, hops, saw
}

// meetAndSum is a generation's program after a recovery: a barrier, then
// the allreduce of every rank's rank+1.
func meetAndSum(ctx context.Context, c *runtime.Comm) (int64, error) {
	if err := c.Barrier(ctx); err != nil {
		return 0, err
	}
	sum, err := c.Allreduce(ctx, runtime.Int64, runtime.Sum, binary.LittleEndian.AppendUint64(nil, uint64(c.Rank()+1)))
	if err != nil {
		return 0, err
	}
	return int64(binary.LittleEndian.Uint64(sum)), nil
}

// simNet is the simulation's network: memnet, where a dial costs a
// handshake's CPU before its connection is made.
type simNet struct{ *memnet.Network }

func (n simNet) DialContext(ctx context.Context, addr string) (net.Conn, error) {
	t := time.NewTimer(simHandshake)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return n.Network.DialContext(ctx, addr)
}

// simulate runs the scenario in a synctest bubble and returns what it
// measured.
func simulate(t *testing.T, n int) simResult {
	var r simResult
	synctest.Test(t, func(t *testing.T) {
		r = simulateIn(t, n)
	})
	return r
}

func simulateIn(t *testing.T, n int) simResult {
	// A second loss: a rank of generation 1 falls silent (StopForTest:
	// its monitor and recovery stop, its connections stay open and it
	// still reads, as a stopped process that runs again) and the second
	// spare takes its place. The slot the others left sees its links
	// close one by one; it must learn it was left, not flood those closes
	// as losses (news.go, drop and declaredLost).
	spares, stopped := 2, n/4
	slots := n + spares
	r := simResult{n: n, spares: spares, victim: n / 2, stopped: stopped}
	if us, err := strconv.Atoi(os.Getenv("SPERLI_SIM_LAUNCH_US")); err == nil && us > 0 {
		r.launchGap = time.Duration(us) * time.Microsecond
	}
	mn := memnet.New()
	mn.Latency = simLatency
	mn.Buffer = 256 << 10
	if kb, err := strconv.Atoi(os.Getenv("SPERLI_SIM_BUF_KIB")); err == nil && kb > 0 {
		// The links' read and write buffers (mesh.BufSize): smaller ones
		// let more slots fit in one process (docs/scale.md).
		old := mesh.BufSize
		mesh.BufSize = kb << 10
		t.Cleanup(func() { mesh.BufSize = old })
	}
	id, err := job.NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	// Slots listen at consecutive ports of hosts of 50,000 slots each.
	table := make([]runtime.Host, slots)
	lns := make([]net.Listener, slots)
	for s := range slots {
		h := runtime.Host{Host: fmt.Sprintf("10.0.0.%d", s/50000+1), Port: 10000 + s%50000}
		ln, err := mn.Listen(fmt.Sprintf("%s:%d", h.Host, h.Port))
		if err != nil {
			t.Fatal(err)
		}
		table[s], lns[s] = h, ln
	}
	spec := job.Spec{Size: n, Spares: spares, Hosts: table, SilenceMS: int(simSilence / time.Millisecond),
		JoinMS: 600000, Expires: time.Now().Add(24 * time.Hour)}.Compacted()
	sn := simNet{mn}
	start := time.Now()
	var ran1, ran2 atomic.Int64 // ranks that ran generation 1, 2 (told when all have)
	heapAt := time.Duration(-1)
	if ms, err := strconv.Atoi(os.Getenv("SPERLI_SIM_HEAP_MS")); err == nil && ms >= 0 && os.Getenv("SPERLI_SIM_HEAP") != "" {
		// A profile while the slots run: SPERLI_SIM_HEAP_MS of simulated
		// time after the start.
		heapAt = time.Duration(ms) * time.Millisecond
		go func() {
			time.Sleep(heapAt)
			writeHeap(t, os.Getenv("SPERLI_SIM_HEAP"))
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()

	var (
		mu        sync.Mutex
		joinedAt  = make([]time.Time, slots)
		barrierAt = make([]time.Time, slots)
		gen1At    = make([]time.Time, slots)
		gen2At    = make([]time.Time, slots)
		sums      = make([]int64, n)
		sums2     = make([]int64, n)
		stoppedAt time.Time
		comms     = make([]*runtime.Comm, slots)
		joinLinks = make([]int64, slots)
		endStats  = make([][3]int64, slots) // links, handshakes, frames after generation 1's allreduce
		crashed   = make(chan time.Time, 1)
		errs      = make([]error, slots)
		wg        sync.WaitGroup
	)
	barrier := make(chan struct{}) // closed when every live slot passed the first barrier
	var passed sync.WaitGroup
	passed.Add(n)
	// The links a slot has after the join are counted once every rank
	// has joined and before any starts its first barrier: the barrier's
	// partners dial links the join did not make (its tree is over the
	// ranks, the join's over the slots), and a slot whose join waited for
	// a parent started late (SPERLI_SIM_LAUNCH_US) would count links a
	// barrier made, not its join. Time stands still from the wait's end
	// until the count, so no link is made in between.
	var joinedAll sync.WaitGroup
	joinedAll.Add(n)
	left := make([]sync.Once, n) // a rank that fails before it joined leaves the wait too
	joinDone := func(s int) {
		if s < n {
			left[s].Do(joinedAll.Done)
		}
	}
	joinCount := func(s int, c *runtime.Comm) {
		joinDone(s)
		joinedAll.Wait()
		joinLinks[s] = int64(len(runtime.LinkedForTest(c)))
	}
	for i := range slots {
		s := i
		if r.launchGap > 0 {
			// The launcher starts a slot every launchGap, the highest
			// first: the lower slot of a pair dials in the join, and finds
			// the higher one listening, so no handshake waits for a slot
			// not started (each would hold its TLS state meanwhile).
			s = slots - 1 - i
			if i > 0 {
				time.Sleep(r.launchGap)
			}
		}
		j, err := id.Describe(spec, s)
		if err != nil {
			t.Fatal(err)
		}
		j.Listener, j.Net = lns[s], sn
		j.Logf = func(string, ...any) {}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer joinDone(s)
			if s == r.victim {
				c, err := runtime.Init(ctx, j)
				if err != nil {
					errs[s] = err
					return
				}
				mu.Lock()
				comms[s], joinedAt[s] = c, time.Now()
				mu.Unlock()
				joinCount(s, c)
				errs[s] = c.Barrier(ctx)
				barrierAt[s] = time.Now()
				passed.Done()
				<-barrier
				runtime.CrashForTest(c)
				crashed <- time.Now()
				return
			}
			c, err := runtime.Run(ctx, j, func(ctx context.Context, c *runtime.Comm) error {
				if c.Incarnation() == 0 {
					mu.Lock()
					comms[s], joinedAt[s] = c, time.Now()
					mu.Unlock()
					joinCount(s, c)
					if err := c.Barrier(ctx); err != nil {
						return err
					}
					barrierAt[s] = time.Now()
					passed.Done()
					// The second barrier waits for the rank that
					// crashes: it ends with H1611 and Run recovers.
					return c.Barrier(ctx)
				}
				if c.Incarnation() == 2 {
					gen2At[s] = time.Now()
					if ran2.Add(1) == int64(n) {
						t.Logf("every rank ran generation 2 by %v simulated", time.Since(start))
					}
					sum, err := meetAndSum(ctx, c)
					if err != nil {
						return err
					}
					mu.Lock()
					sums2[c.Rank()] = sum
					comms[s] = c
					mu.Unlock()
					return nil
				}
				gen1At[s] = time.Now()
				if ran1.Add(1) == int64(n) {
					t.Logf("every rank ran generation 1 by %v simulated", time.Since(start))
				}
				sum, err := meetAndSum(ctx, c)
				if err != nil {
					return err
				}
				l, m, fr := runtime.SimStatsForTest(c)
				mu.Lock()
				endStats[s] = [3]int64{int64(l), m, fr}
				sums[c.Rank()] = sum
				if s == n {
					r.spareRank = c.Rank()
				}
				comms[s] = c
				mu.Unlock()
				if s == r.stopped {
					// Silent from now on, as a stopped process: no
					// heartbeat; the watchers' detectors declare it
					// lost, and it ends when told so.
					mu.Lock()
					stoppedAt = time.Now()
					mu.Unlock()
					runtime.StopForTest(c)
					// It sends nothing more: it waits for a message
					// that never comes until it is told it was lost.
					_, err := c.Recv(ctx, (c.Rank()+1)%c.Size(), 77)
					return err
				}
				// The third barrier waits for the stopped rank: H1611,
				// and Run recovers into generation 2.
				return c.Barrier(ctx)
			})
			if err == nil {
				err = c.Finish()
			}
			if s == r.stopped {
				// Declared lost by the others, and told so.
				if codes.Of(err) != codes.PeerLost || !strings.Contains(err.Error(), "declared lost") {
					t.Errorf("the silent slot %d ended with %v, want H1611 saying it was declared lost", s, err)
				}
				err = nil
			}
			errs[s] = err
		}()
	}
	// The spares join but pass no barrier of generation 0.
	go func() {
		passed.Wait()
		// Told at once (with -test.v), so that a run that does not
		// finish still shows its join.
		var joined, first time.Duration
		mu.Lock()
		for s := range slots {
			if !joinedAt[s].IsZero() {
				joined = max(joined, joinedAt[s].Sub(start))
			}
			first = max(first, barrierAt[s].Sub(start))
		}
		mu.Unlock()
		t.Logf("every rank joined by %v simulated and passed the first barrier by %v", joined, first)
		close(barrier)
	}()
	wg.Wait()
	failed := false
	for s, err := range errs {
		if err != nil {
			t.Errorf("slot %d (generation 1 at %v, 2 at %v): %v", s, gen1At[s].Sub(start), gen2At[s].Sub(start), err)
			failed = true
		}
	}
	if failed {
		// Which slots knew which losses, and from whom: a loss besides
		// the crash and the stop is how a recovery goes wrong.
		for s, c := range comms {
			if c == nil || s == r.victim || s == r.stopped {
				continue
			}
			for _, k := range runtime.KnownLossesForTest(c) {
				if !strings.HasPrefix(k, fmt.Sprintf("slot %d ", r.victim)) && !strings.HasPrefix(k, fmt.Sprintf("slot %d ", r.stopped)) {
					t.Logf("slot %d knew %s", s, k)
				}
			}
		}
		for _, c := range comms {
			if c != nil {
				c.Close()
			}
		}
		t.FailNow()
	}
	if path := os.Getenv("SPERLI_SIM_HEAP"); path != "" && heapAt < 0 {
		// What the slots still hold when every one has finished
		// (docs/scale.md: where the simulation's memory goes).
		writeHeap(t, path)
	}
	crash := <-crashed
	r.sums, r.joinLinks = sums, statOf(joinLinks)
	for s := range slots {
		if !joinedAt[s].IsZero() {
			r.joined = max(r.joined, joinedAt[s].Sub(start))
		}
		r.firstBarrier = max(r.firstBarrier, barrierAt[s].Sub(start))
		if s != r.victim && !gen1At[s].IsZero() {
			r.nextGen = max(r.nextGen, gen1At[s].Sub(crash))
		}
	}
	// Who learned of each loss from whom, and when.
	var sawIt int
	r.known, r.hops, sawIt = lossNews(t, comms, r.victim, crash, r.victim, r.stopped)
	r.sawIt = sawIt
	r.known2, r.hops2, r.sawIt2 = lossNews(t, comms, r.stopped, stoppedAt, r.victim, r.stopped)
	for s := range slots {
		if s != r.victim && s != r.stopped && !gen2At[s].IsZero() {
			r.nextGen2 = max(r.nextGen2, gen2At[s].Sub(stoppedAt))
		}
	}
	r.sums2 = sums2
	var links, made, frames []int64
	r.coordinator = -1
	for s := range comms {
		if s == r.victim || endStats[s] == ([3]int64{}) {
			continue // the crashed slot, the spare still waiting
		}
		l, m, fr := endStats[s][0], endStats[s][1], endStats[s][2]
		links, made, frames = append(links, l), append(made, m), append(frames, fr)
		r.framesTotal += fr
		if r.coordinator < 0 {
			r.coordinator = s // the lowest live slot coordinates the recovery
			r.linksOfCoordinator = l
		} else if l > r.maxLinksOther {
			r.maxLinksOther, r.maxSlotOf = l, s
		}
	}
	r.links, r.made, r.frames = statOf(links), statOf(made), statOf(frames)
	r.dials = mn.Dials()
	for _, c := range comms {
		if c != nil {
			r.relayed += runtime.RelayedForTest(c)
		}
	}
	for _, c := range comms {
		c.Close()
	}
	for _, ln := range lns {
		ln.Close()
	}
	return r
}

// writeHeap writes a heap profile of what is live now to path.
func writeHeap(t *testing.T, path string) {
	f, err := os.Create(path)
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	goruntime.GC()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		t.Error(err)
		return
	}
	// The goroutines beside it: their stacks are not in the heap.
	g, err := os.Create(path + ".goroutine")
	if err != nil {
		t.Error(err)
		return
	}
	defer g.Close()
	if err := pprof.Lookup("goroutine").WriteTo(g, 0); err != nil {
		t.Error(err)
		return
	}
	var m goruntime.MemStats
	goruntime.ReadMemStats(&m)
	t.Logf("live now: %d goroutines, heap in use %d MiB, stacks %d MiB, other runtime %d MiB",
		goruntime.NumGoroutine(), m.HeapInuse>>20, m.StackInuse>>20, (m.Sys-m.HeapSys-m.StackSys)>>20)
}
