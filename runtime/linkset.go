package runtime

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"sperli/codes"
	"sperli/runtime/mesh"
	"sperli/topo"
)

// Links on demand (SPEC §18). A slot's links are made when first needed:
// the join makes those of the spanning tree and the observation ring
// (package topo), and every other one is made the first time a send, a
// receive or a schedule needs it, with every check of the join (TLS,
// token, refusals). A link is a peer from the moment it is needed: what is
// sent to it waits in its queues, in order, until its connection is made
// and attached (mesh.NewPending), so a send never waits for a handshake.
//
// Either slot of a pair may dial the other; when both do at once, the
// lower slot's dial wins and the lower slot alone decides: a listener
// answers the hello of a higher dialer with the dup flag when it has the
// link already or dials itself (protocol.md §1.6), and the dialer then
// waits for the winning connection. A slot's table of links (peers, the
// keys of their certificates, the dials and accepts under way) is guarded
// by pmu; the map of peers is copied on write, so that a send looks its
// peer up without a lock.

// errDup is a dial answered with the dup flag: the other slot's dial wins.
var errDup = errors.New("the peer dials this slot itself (dup)")

// peerSet is the links of a slot at one time: never changed once stored
// in links.pmap, so that the monitor's steps, a send and the news read it
// without a lock and without a copy (an idle rank allocates nothing).
type peerSet struct {
	bySlot map[int]*peer
	list   []*peer // the same links in slot order
}

// with is a copy of ps (nil: no links) with p added: as long to make as
// the copy of the map, no sort.
func (ps *peerSet) with(p *peer) *peerSet {
	if ps == nil {
		return &peerSet{bySlot: map[int]*peer{p.rank: p}, list: []*peer{p}}
	}
	m := maps.Clone(ps.bySlot)
	m[p.rank] = p
	i, _ := slices.BinarySearchFunc(ps.list, p.rank, func(q *peer, slot int) int { return cmp.Compare(q.rank, slot) })
	return &peerSet{bySlot: m, list: slices.Insert(slices.Clip(ps.list), i, p)}
}

// peer returns the link to slot, or nil when none was needed yet.
func (l *links) peer(slot int) *peer {
	if ps := l.pmap.Load(); ps != nil {
		return ps.bySlot[slot]
	}
	return nil
}

// peerList returns every link, in slot order. The slice is shared: read
// it, never change it.
func (l *links) peerList() []*peer {
	if ps := l.pmap.Load(); ps != nil {
		return ps.list
	}
	return nil
}

// keyOf is the Ed25519 key of slot's certificate, nil while no link to it
// was made.
func (l *links) keyOf(slot int) ed25519.PublicKey {
	l.pmu.Lock()
	defer l.pmu.Unlock()
	return l.keys[slot]
}

// expectLocked returns the link to slot, made pending if there is none.
// Call with pmu held.
func (l *links) expectLocked(slot int) *peer {
	if p := l.peer(slot); p != nil {
		return p
	}
	p := newPeer(l, slot)
	l.pmap.Store(l.pmap.Load().with(p))
	return p
}

// link returns the link to slot, and dials it unless its connection is
// there, being made, or the link has ended: the send, receive or schedule
// that calls it queues its frames on the link at once. nil for this slot
// itself or a slot outside the job.
func (l *links) link(slot int) *peer { return l.linkAfter(slot, 0) }

// linkAfter is link, but a dial it starts first waits up to wait for the
// peer's own dial (a collective's frame to a lower slot: the lower slot
// dials when its schedule takes from this one, and its dial would win
// over this one's anyway — dialing too would cost both a handshake for
// nothing). A link needed at once (wait 0) ends such a wait.
func (l *links) linkAfter(slot int, wait time.Duration) *peer {
	if p := l.peer(slot); p != nil && (p.Attached() || p.Gone()) {
		return p
	}
	if slot == l.self || slot < 0 || slot >= l.slots {
		return nil
	}
	l.pmu.Lock()
	defer l.pmu.Unlock()
	p := l.expectLocked(slot)
	if l.knownLost(slot) {
		// A lost slot is not dialed: what is sent to it fails as on a
		// broken connection.
		p.Close()
		return p
	}
	if p.Attached() || p.Gone() || l.accepts[slot] > 0 || l.stopped {
		return p
	}
	if l.dials[slot] != nil {
		if h := l.hurry[slot]; h != nil && wait == 0 {
			close(h) // a dial that waits for the peer's starts now
			delete(l.hurry, slot)
		}
		return p
	}
	ctx, stop := context.WithCancel(l.life)
	l.dials[slot] = stop
	var hurry chan struct{}
	if wait > 0 {
		hurry = make(chan struct{})
		l.hurry[slot] = hurry
	}
	l.dialWG.Add(1)
	go l.dialer(ctx, p, time.Time{}, wait, hurry)
	return p
}

// linkRank is link for job rank w of c's generation.
func (c *core) linkRank(w int) *peer {
	s := c.layout.Slot(w)
	if s < 0 {
		return nil
	}
	return c.links.link(s)
}

// peerRank is the link to job rank w of c's generation, or nil.
func (c *core) peerRank(w int) *peer {
	s := c.layout.Slot(w)
	if s < 0 {
		return nil
	}
	return c.links.peer(s)
}

// dialer makes p's connection: it dials until the connection is attached
// (by this dial or by the peer's, which wins over a dup), the link ends,
// or ctx ends. With wait above zero it first waits that long for the
// peer's dial, or until hurry is closed. Before until (the join's window;
// zero after the join) a failure is retried every dialRetry; after the
// join, a slot that no connection reaches for a silence limit, or that
// does not finish its handshake within the join window, is lost.
func (l *links) dialer(ctx context.Context, p *peer, until time.Time, wait time.Duration, hurry chan struct{}) {
	defer l.dialWG.Done()
	defer func() {
		l.pmu.Lock()
		l.dials[p.rank]()
		delete(l.dials, p.rank)
		if l.hurry[p.rank] == hurry {
			delete(l.hurry, p.rank)
		}
		l.pmu.Unlock()
	}()
	if wait > 0 {
		// The peer's dial first (linkAfter): it attaches, or the wait
		// ends, or a send needs the link now.
		t := time.NewTimer(wait)
		select {
		case <-p.Ready():
		case <-ctx.Done():
		case <-t.C:
		case <-hurry:
		}
		t.Stop()
	}
	s := l.hs
	joining := !until.IsZero()
	start := time.Now()
	reached := false
	var lastErr error
	for !p.Attached() && !p.Gone() && ctx.Err() == nil {
		jn, err, final := s.dialOnce(ctx, p.rank, s.addrOf(p.rank))
		switch {
		case err == nil:
			l.attach(p, jn)
			return
		case errors.Is(err, errDup):
			l.awaitAttach(ctx, p, until)
			return
		case final:
			if joining {
				s.fatal(err)
			} else {
				p.Refused(err)
			}
			return
		}
		if p.Attached() || p.Gone() || ctx.Err() != nil {
			// The peer's dial made the link while this one was under way
			// (attach ended it), or the link ended: a failure of this
			// dial is no loss.
			return
		}
		lastErr = err
		reached = reached || answered(err)
		waited := time.Since(start)
		if joining && time.Now().After(until) {
			return
		}
		if !joining && ((!reached && waited > l.silence()) || waited > s.j.JoinWindow()) {
			l.lost(p.rank, fmt.Sprintf("no link could be made within %v: %v", waited.Round(time.Millisecond), lastErr))
			return
		}
		t := time.NewTimer(dialRetry)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		case <-p.Ready():
			t.Stop()
		}
	}
}

// awaitAttach waits for the winning connection of a dup: the peer's own
// dial. After the join, one that does not come within the join window
// is a loss.
func (l *links) awaitAttach(ctx context.Context, p *peer, until time.Time) {
	if until.IsZero() {
		until = time.Now().Add(l.hs.j.JoinWindow())
	}
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	select {
	case <-p.Ready():
	case <-ctx.Done():
	case <-t.C:
		if l.joined.Load() {
			l.lost(p.rank, "its dial of this slot, which won over this slot's own, did not come within the join window")
		}
	}
}

// silence is this slot's silence limit.
func (l *links) silence() time.Duration {
	return time.Duration(l.silenceMS.Load()) * time.Millisecond
}

// attach gives p the connection jn that has finished its handshake.
func (l *links) attach(p *peer, jn joined) {
	jn.conn.SetDeadline(time.Time{})
	mesh.SetSpin(jn.conn, l.hs.spin, &l.shared.Writing)
	l.pmu.Lock()
	l.keys[p.rank] = jn.key
	l.pmu.Unlock()
	if p.AttachWriting(jn.conn, jn.silence) {
		l.made.Add(1)
		l.pmu.Lock()
		if stop := l.dials[p.rank]; stop != nil {
			stop() // a dial of this slot's still under way is not needed
		}
		l.pmu.Unlock()
		// While this slot joins, what its peers send waits in the
		// connections (the join ends as a whole: an abort sent by a peer
		// that joined first is read by the program's first call, not
		// by the join); heartbeats go out at once. In a job that
		// recovers (spares) it is read at once: the news of a slot lost
		// while the job joins must reach a slot whose join waits for it,
		// which then heals around it (joinLinks). (A job that does not
		// recover learns such a loss from its launcher's crashed lines,
		// takeCrashes.)
		if l.joined.Load() || l.elastic() {
			p.StartReading()
		}
		l.attached(p)
	}
}

// arbitrate decides, for a connection dialed by slot from that passed its
// checks, whether it becomes the link (the accept then counts as under
// way until done is called) or is a dup: the lower slot's dial wins, and
// a link made already stays.
func (l *links) arbitrate(from int) (dup bool, p *peer, done func()) {
	l.pmu.Lock()
	defer l.pmu.Unlock()
	if q := l.peer(from); q != nil && (q.Attached() || q.Gone()) {
		return true, nil, nil
	}
	if l.accepts[from] > 0 || (from > l.self && l.dials[from] != nil) {
		return true, nil, nil
	}
	l.accepts[from]++
	p = l.expectLocked(from)
	return false, p, func() {
		l.pmu.Lock()
		l.accepts[from]--
		l.pmu.Unlock()
	}
}

// attached is told of every link whose connection was just attached.
func (l *links) attached(p *peer) {
	if l.elastic() {
		l.tellKnown(p)
	}
	n := 0
	for _, q := range l.peerList() {
		if q.Attached() && !q.Gone() {
			n++
		}
	}
	countLinks(n, openFDs())
	l.cur.Load().finishedOn(p)
	if l.joined.Load() {
		l.reschedule() // its silence limit may be the smallest
	}
	select {
	case l.linked <- struct{}{}:
	default:
	}
}

// stopLinks ends the accept loop and every dial under way, and waits for
// them (Close).
func (l *links) stopLinks() {
	l.pmu.Lock()
	l.stopped = true // no dial starts after: the wait below is the last
	l.pmu.Unlock()
	l.endLife()
	if l.ln != nil {
		l.ln.Close()
	}
	l.acceptWG.Wait()
	l.dialWG.Wait()
}

// joinLinks makes the links of the join (the tree and the ring): this
// slot dials those above it and waits for those below to dial; it returns
// when every one is attached, or with the join's error. A slot lost while
// the job joins (news of it, or a neighbour's connection closed before it
// came) is not waited for in a job that recovers (elastic): the tree and
// the ring heal around it (topo.Neighbours without it), this slot links
// its new neighbours, and the agreement on the next generation, which
// starts once the join is done, takes the loss. up is told of each link
// as the join has k of them.
func (l *links) joinLinks(ctx context.Context, gone <-chan struct{}, up func(k int)) error {
	s := l.hs
	var ps []*peer
	seen := map[int]bool{}
	l.pmu.Lock()
	for _, slot := range topo.Neighbours(l.slots, l.self, nil) {
		p := l.expectLocked(slot)
		ps = append(ps, p)
		seen[slot] = true
		if slot > l.self && l.dials[slot] == nil && !l.stopped {
			dctx, stop := context.WithCancel(ctx)
			l.dials[slot] = stop
			l.dialWG.Add(1)
			go l.dialer(dctx, p, s.deadline, 0, nil)
		}
	}
	l.pmu.Unlock()
	// heal adds the neighbours of this slot with the known losses left
	// out; each is dialed from this side, whichever is lower (either
	// side may dial; two dials at once end with one link), until the
	// join window ends, as the first ones are.
	heal := func() {
		l.pmu.Lock()
		defer l.pmu.Unlock()
		for _, slot := range topo.Neighbours(l.slots, l.self, l.knownLost) {
			if seen[slot] {
				continue
			}
			seen[slot] = true
			p := l.expectLocked(slot)
			ps = append(ps, p)
			if !p.Attached() && l.dials[slot] == nil && !l.stopped {
				dctx, stop := context.WithCancel(ctx)
				l.dials[slot] = stop
				l.dialWG.Add(1)
				go l.dialer(dctx, p, s.deadline, 0, nil)
			}
		}
	}
	dead, deadErr := l.cur.Load().dead, l.cur.Load().deadErr
	k := 0
	for i := 0; i < len(ps); i++ {
		p := ps[i]
		for {
			wake := l.losses() // taken before the look, so a loss after it wakes this wait
			if !p.Attached() && l.elastic() && l.knownLost(p.rank) {
				l.forget(p)
				heal()
				break
			}
			select {
			case <-p.Ready():
			case <-wake:
				if l.elastic() {
					heal() // a loss: maybe of a neighbour joined already
				}
				continue
			case err := <-s.fatalCh:
				return err
			case <-ctx.Done():
				return s.timeout(ps)
			case <-dead:
				return deadErr()
			case <-gone:
				return &codes.Error{Code: codes.JobEnded, Op: "join", Rank: -1, Msg: "the launcher is gone (end of the control channel)",
					Cause: &codes.Cause{Kind: codes.CauseLauncher, Rank: -1, Code: codes.JobEnded}}
			}
			if !p.Attached() {
				// Closed before its connection came: lost during the join.
				if err := deadErr(); err != nil {
					return err
				}
				if l.elastic() {
					l.lost(p.rank, "lost during the join")
					continue // known lost now: healed around
				}
				return codes.LostNoCause("join", p.rank, "rank %d lost during the join", p.rank)
			}
			k++
			up(k)
			break
		}
	}
	return nil
}

// forget ends the join's wait for p, whose slot is known lost before its
// connection came: its dial, if one is under way, ends, and the link is
// closed, as a lost slot's is.
func (l *links) forget(p *peer) {
	l.pmu.Lock()
	if stop := l.dials[p.rank]; stop != nil {
		stop()
	}
	p.Close()
	l.pmu.Unlock()
}

// linkAll makes the links to every slot of slots that has none yet (a
// wildcard receive needs to hear of every rank that could send).
func (l *links) linkAll(slots []int) {
	for _, s := range slots {
		if s != l.self {
			l.link(s)
		}
	}
}

// linkState is what a slot keeps of its links beside the map (pmu).
type linkState struct {
	pmu      sync.Mutex
	keys     map[int]ed25519.PublicKey  // the peers' certificates' keys, by slot
	dials    map[int]context.CancelFunc // a dial of this slot's is under way: ends it
	hurry    map[int]chan struct{}      // closed to start a dial that waits for the peer's (linkAfter)
	accepts  map[int]int                // accepted connections in their handshake's tail
	stopped  bool                       // stopLinks began: no dial starts
	dialWG   sync.WaitGroup
	acceptWG sync.WaitGroup
	linked   chan struct{} // a link was attached
	made     atomic.Int64  // links attached over the slot's life
}

// openFDs is the number of file descriptors the process has open, or -1.
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents) - 1 // the directory's own
}

// answered reports whether a failed dial met a peer that spoke: a TLS or
// hello failure, not a connection refused, reset or cut before a word (a
// dead process's port, or a port only its launcher still holds).
func answered(err error) bool {
	var ce *codes.Error
	if !errors.As(err, &ce) {
		return false
	}
	return !hungUp(err) && !errors.Is(err, syscall.ECONNREFUSED)
}

// hungUp reports whether err is the other end closing the connection.
func hungUp(err error) bool {
	for _, e := range []error{syscall.ECONNRESET, syscall.EPIPE, io.EOF, io.ErrUnexpectedEOF} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
