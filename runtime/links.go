package runtime

import (
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"net"
	goruntime "runtime"
	"sync"
	"sync/atomic"
	"time"

	"sperli/codes"
	"sperli/elastic"
	"sperli/job"
	"sperli/runtime/bufpool"
	"sperli/runtime/mesh"
	"sperli/wire"
)

// links is what a slot keeps for its whole life, across generations
// (SPEC §10): its connections to the other slots, its silence limit, the
// monitor, the control channel. A generation's communicator (core) is
// made over it and dropped whole when the job moves on to the next.
type links struct {
	self  int // this process's slot
	slots int // the job's ranks and spares
	// pmap holds the links by slot and in slot order, copied on write
	// under pmu (linkset.go): a link is made the first time it is needed.
	pmap atomic.Pointer[peerSet]
	linkState
	// hs makes the connections: the join's and, after it, every link
	// made on demand (join.go). ln is its listener, open for the slot's
	// life; life ends the accept loop and the dials (Close).
	hs      *joinState
	ln      net.Listener
	life    context.Context
	endLife context.CancelFunc
	joined  atomic.Bool // the join's links are up (Init returned)
	// own signs this slot's decisions in an agreement; the peers'
	// certificates' keys verify theirs (linkState.keys).
	own ed25519.PrivateKey

	// keep is what features over the core keep by name for the
	// process's life (Hook.Keep: a work queue's log, package workq).
	keep durable
	// lossWake is closed (and forgotten) at each loss this slot learns
	// of: a join waits on it (to heal around the lost slot), and a work
	// queue's master of a program that manages its losses. Under lossMu.
	lossMu   sync.Mutex
	lossWake chan struct{}
	// shared is what every connection reads from the slot: its number, the
	// clock, whether reads spin before they block (spin.go: a waiting
	// receiver then takes reading over), and the count of writer
	// goroutines writing large frames (reads do not spin meanwhile).
	shared mesh.Shared

	cur atomic.Pointer[Comm] // the job's communicator of the generation this slot is in

	// known is every slot this slot knows lost, in any mode: why, from
	// whom and when (news.go); under knownMu.
	knownMu sync.Mutex
	known   map[int]knownLoss
	// left: the slots that told this one the others had declared it lost
	// and closed their links (news.go, toldLeft), and when each link
	// ended (zero while open); under knownMu.
	left map[int]time.Time

	relayMu   sync.Mutex
	relaySeen map[[32]byte]struct{} // relayed frames taken (relay.go), to drop repeats
	relayed   atomic.Int64          // relay frames this slot sent or passed on
	relaySeq  atomic.Int64          // relay frames this slot sent (each one's Seq)

	silenceMS  atomic.Int64 // this slot's silence limit
	stalledMS  atomic.Int64 // how long this process last did not run (the detector's stall), 0 if never
	stalledAt  atomic.Int64 // when that stall was seen (the job's clock, unix nanoseconds)
	closingNow atomic.Bool  // Finish or Close under way: broken connections are expected
	// outcast: the others declared this slot lost and went on without it
	// (news.go, declaredLost). It ends and says nothing more: no news, no
	// abort; the links that close now are its end, not losses.
	outcast      atomic.Bool
	staleDropped atomic.Int64 // frames of an older generation (or another incarnation) dropped

	rec        *recovery   // agreements on layouts (recover.go)
	lossReturn atomic.Bool // SetOnLoss(LossReturn): losses are the program's (ulfm.go)

	stopMon chan struct{}
	stopRec chan struct{} // ends the recovery goroutine (Close)
	recDone chan struct{} // closed when the recovery goroutine has ended
	proc    proc          // what the process gives (proc.go)
	// now is the clock liveness is decided by (the job's, Job.Now): the
	// time a frame was last heard, the detector's steps, the age of a
	// claimed loss. Timers stay real; a test that moves the clock sees
	// the decision at the monitor's next step.
	now     func() time.Time
	monDone chan struct{}
	resched chan struct{} // wakes the monitor when a silence limit changed
	byes    chan struct{} // a bye came (a spare waits for the ranks' byes)
	closeMu sync.Once
}

// losses is closed at the next loss this slot learns of.
func (l *links) losses() <-chan struct{} {
	l.lossMu.Lock()
	defer l.lossMu.Unlock()
	if l.lossWake == nil {
		l.lossWake = make(chan struct{})
	}
	return l.lossWake
}

func (l *links) wakeLosses() {
	l.lossMu.Lock()
	if l.lossWake != nil {
		close(l.lossWake)
		l.lossWake = nil
	}
	l.lossMu.Unlock()
}

// agreeKeys are the keys of an agreement about domain (elastic.Keys).
func (l *links) agreeKeys(domain ...byte) elastic.Keys {
	return elastic.Keys{Own: l.own, Domain: domain, Peer: func(s int) ed25519.PublicKey {
		if s < 0 || s >= l.slots {
			return nil
		}
		return l.keyOf(s)
	}}
}

func newLinks(j *Job) *links {
	l := &links{
		self:    j.Rank,
		slots:   j.Slots(),
		stopMon: make(chan struct{}),
		stopRec: make(chan struct{}),
		recDone: make(chan struct{}),
		monDone: make(chan struct{}),
		resched: make(chan struct{}, 1),
		byes:    make(chan struct{}, 1),
		now:     j.Clock,
	}
	l.shared.Self, l.shared.Now = j.Rank, j.Clock
	l.keys, l.dials, l.accepts, l.hurry = map[int]ed25519.PublicKey{}, map[int]context.CancelFunc{}, map[int]int{}, map[int]chan struct{}{}
	l.linked = make(chan struct{}, 1)
	l.life, l.endLife = context.WithCancel(context.Background())
	l.silenceMS.Store(int64(j.Silence() / time.Millisecond))
	return l
}

// Window is the credit of a connection (SPEC §6): the bytes of data,
// checkpoint and collective frames a peer may have buffered at this rank
// and not yet consumed (runtime/mesh enforces it).
const Window = mesh.Window

// peer is one connection of the mesh (runtime/mesh) with what this layer
// keeps of it: the slot it leads to, and the frames of a generation this
// slot has not entered yet (SPEC §10.1), kept in order until it does.
// fmu guards future and is held while a frame is dispatched, so that the
// switch of generations sees no frame half handled. A peer is its
// connection's Sink: it tells links.
type peer struct {
	*mesh.Peer
	rank     int // the peer's slot
	l        *links
	finished atomic.Bool // its program finished (a fin frame, or its bye): no more data comes
	toldLeft atomic.Bool // it told this slot the others declared it lost: its last frame (news.go)

	fmu    sync.Mutex
	future []heldFrame
}

// newPeer is the link to slot before its connection is made (linkset.go).
func newPeer(l *links, slot int) *peer {
	p := &peer{rank: slot, l: l}
	p.Peer = mesh.NewPending(&l.shared, p, slot)
	return p
}

func (p *peer) Arrive(h wire.Header, payload []byte) error { return p.l.arrive(p, h, payload) }
func (p *peer) Lost(why string) {
	if p.toldLeft.Load() {
		p.l.leftEnded(p.rank) // it closed the link after saying why: not a loss of it
		return
	}
	p.l.lost(p.rank, why)
}
func (p *peer) Refused(err error) {
	if c := p.l.cur.Load(); c.recovering.Load() {
		// Between generations the communicator has ended already: the
		// refusal ends the job (it would otherwise be lost, and the peer
		// only gone).
		p.l.rec.end(err)
		return
	}
	p.l.cur.Load().fail(err)
}

// Finished reports whether the peer's program finished.
func (p *peer) Finished() bool { return p.finished.Load() || p.Bye() }

// Closing reports whether Finish or Close is under way.
func (p *peer) Closing() bool { return p.l.closingNow.Load() }

// Expected reports whether broken connections are the job's end now: it is
// closing (Finish, Close) or over.
func (p *peer) Expected() bool { return p.l.closingNow.Load() || p.l.outcast.Load() || p.l.jobOver() }

// Gen is the generation this slot is in.
func (p *peer) Gen() uint32 { return p.l.cur.Load().inc }

// Dead is the current generation's end and its error.
func (p *peer) Dead() (<-chan struct{}, func() error) {
	c := p.l.cur.Load()
	return c.dead, c.deadErr
}

// heldFrame is a frame of a later generation, kept until this slot enters it.
type heldFrame struct {
	h       wire.Header
	payload []byte
}

// maxHeldControl bounds the uncounted frames (byes, aborts) of a later
// generation a peer may have kept here; counted ones are bounded by credit.
const maxHeldControl = 64

// arrive takes one frame read from p: the connection's own frames at once,
// the others by their generation — dropped when older than this slot's,
// kept when newer, dispatched to the generation's communicator when equal.
func (l *links) arrive(p *peer, h wire.Header, payload []byte) error {
	if p.toldLeft.Load() {
		return slotViolation(p.rank, "it told slot %d that the others had declared it lost, then sent a %s frame: that news is the last frame of an honest link", l.self, h.Type)
	}
	switch h.Type {
	case wire.Heartbeat:
		return nil
	case wire.Credit:
		return p.AddCredit(binary.BigEndian.Uint64(payload))
	case wire.Silence:
		ms := binary.BigEndian.Uint32(payload)
		if ms < job.MinSilenceMS || ms > job.MaxSilenceMS {
			return codes.New(codes.FrameMalformed, "rank %d announced a silence limit of %d ms, want %d to %d", p.rank, ms, job.MinSilenceMS, job.MaxSilenceMS)
		}
		p.SetSilenceMS(ms)
		p.Control(wire.Heartbeat, nil)
		l.reschedule()
		return nil
	case wire.Lost:
		return l.lostIn(p.rank, payload)
	case wire.Relay:
		return l.relayIn(p.rank, payload)
	case wire.Abort:
		if c := l.cur.Load(); l.rec != nil && c.recovering.Load() {
			r, err := wire.DecodeReason(payload)
			if err != nil {
				return err
			}
			l.rec.abortIn(p.rank, r)
			return nil
		}
	case wire.Agree:
		if payload[0] == agreeLayout || payload[0] == agreeRegroup {
			if l.rec == nil {
				return violation(p.rank, "it sent an agreement frame before the join ended")
			}
			return l.rec.message(p.rank, payload)
		}
		// A comm.agree belongs to its generation: below.
	}
	p.fmu.Lock()
	defer p.fmu.Unlock()
	c := l.cur.Load()
	switch {
	case h.Incarnation < c.inc || (h.Incarnation > c.inc && !l.elastic()):
		// Older: dropped whole (SPEC §5, §10.1), its credit given back.
		l.staleDropped.Add(1)
		if mesh.Counted(h.Type) {
			p.Consumed(mesh.FrameCost(len(payload)))
		}
		bufpool.Put(payload)
		return nil
	case h.Incarnation > c.inc:
		if !mesh.Counted(h.Type) {
			n := 0
			for _, f := range p.future {
				if !mesh.Counted(f.h.Type) {
					n++
				}
			}
			if n >= maxHeldControl {
				return violation(p.rank, "it sent more than %d %s frames of generation %d, which this slot has not entered (it is in %d)", maxHeldControl, h.Type, h.Incarnation, c.inc)
			}
		}
		p.future = append(p.future, heldFrame{h, payload})
		return nil
	}
	return c.dispatch(p, h, payload)
}

// enter makes c, a communicator of a later generation, the one this slot
// is in. The old generation's frames are dropped and their credit given
// back; the frames of c's generation that came early are dispatched to it
// in order, before any later frame of their connection.
func (l *links) enter(c *Comm) {
	old := l.cur.Load()
	old.mu.Lock()
	old.abandoned = true
	old.mu.Unlock()
	peers := l.peerList()
	for _, p := range peers {
		p.fmu.Lock()
	}
	l.cur.Store(c)
	var refused []struct {
		p   *peer
		err error
	}
	for _, p := range peers {
		var keep int64
		now, later := p.future[:0:0], p.future[:0:0]
		for _, f := range p.future {
			switch {
			case f.h.Incarnation == c.inc:
				now = append(now, f)
			case f.h.Incarnation > c.inc:
				later = append(later, f)
			}
			if f.h.Incarnation >= c.inc && mesh.Counted(f.h.Type) {
				keep += mesh.FrameCost(len(f.payload))
			}
		}
		p.future = later
		if give := p.Outstanding() - keep; give > 0 {
			p.Consumed(give)
		}
		for _, f := range now {
			if err := c.dispatch(p, f.h, f.payload); err != nil {
				refused = append(refused, struct {
					p   *peer
					err error
				}{p, err})
				break
			}
		}
	}
	for _, p := range peers {
		p.fmu.Unlock()
	}
	for _, r := range refused {
		r.p.Refuse(r.err)
	}
}

// jobOver reports whether the job has ended (not only a generation).
func (l *links) jobOver() bool {
	c := l.cur.Load()
	select {
	case <-c.dead:
		return !c.recovering.Load()
	default:
		return false
	}
}

// lost declares slot lost (SPEC §7): with recovery, the agreement on the
// next generation begins (recover.go); without, the job ends.
func (l *links) lost(slot int, why string) { l.lostFrom(slot, why, -1) }

// lostFrom is lost for news of the loss that came from slot from (-1:
// this slot saw it).
func (l *links) lostFrom(slot int, why string, from int) {
	if slot == l.self || l.outcast.Load() || !l.learnFrom(slot, why, from) {
		return
	}
	defer l.wakeLosses() // a join that waits for the slot heals around it
	if l.elastic() {
		l.tellLost(slot, why, -1)
		l.heal()
	}
	c := l.cur.Load()
	defer c.finStep() // the healed tree may have a new parent or children
	switch {
	case l.lossReturn.Load():
		c.lostReturn(slot, why)
	case l.rec != nil && l.rec.job.Spares > 0:
		l.rec.lost(slot, why)
	default:
		c.lost(c.rankOf(slot), why)
	}
}

// byeSeen wakes a spare that waits for the ranks' byes.
func (l *links) byeSeen() {
	select {
	case l.byes <- struct{}{}:
	default:
	}
}

// origin is the rank an abort names as its origin: this rank, or the slot
// of a spare.
func (c *Comm) origin() int {
	if c.rank >= 0 {
		return c.rank
	}
	return c.links.self
}

func (l *links) heartbeatAll() {
	for _, p := range l.peerList() {
		// A peer that said bye still watches this slot: it waits in its
		// Finish for this slot's bye, its detector running, and reads
		// until then (its reader here ended at its bye; the writer goes
		// on). Once this slot said bye itself it sends nothing more: the
		// peers stop reading it there. Heartbeats go only on links that
		// exist (SPEC §18).
		if p.Attached() && (!p.Gone() || p.Bye()) && !l.closingNow.Load() {
			p.Control(wire.Heartbeat, nil)
		}
	}
}

func (l *links) reschedule() {
	select {
	case l.resched <- struct{}{}:
	default:
	}
}

// heartbeatEvery is a fifth of the smallest silence limit in the job.
func (l *links) heartbeatEvery() time.Duration {
	least := l.silenceMS.Load()
	for _, p := range l.peerList() {
		if s := p.SilenceMS(); s > 0 && s < least {
			least = s
		}
	}
	return time.Duration(least) * time.Millisecond / 5
}

// monitor is the slot's clock: it heartbeats every peer and declares lost
// a peer silent past this slot's silence limit. What to do is the
// detector's decision (detector.go); the monitor only brings it the time.
func (l *links) monitor() {
	defer close(l.monDone)
	d := newDetector(l.now(), time.Now())
	var seen []peerSeen
	// One timer for the slot's life: a step allocates nothing.
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		every := l.heartbeatEvery()
		silence := time.Duration(l.silenceMS.Load()) * time.Millisecond
		timer.Reset(d.until(time.Now(), every, silence))
		select {
		case <-l.stopMon:
			return
		case <-l.resched:
			// A limit changed: wait again with it, counted from the last
			// look, not from now (links made one after another must not
			// put the next look off for ever).
			continue
		case <-timer.C:
		}
		seen = seen[:0]
		for _, p := range l.peerList() {
			if p.Attached() {
				// A link whose connection is being made is watched by its
				// dialer (linkset.go), not by its silence.
				seen = append(seen, peerSeen{rank: p.rank, lastHeard: time.Unix(0, p.LastHeard()), quiet: p.Bye() || p.Gone()})
			}
		}
		// Nothing more to detect once the job is over; keep heartbeating
		// until closed.
		beat, lost := d.step(l.now(), time.Now(), every, silence, seen, !l.jobOver() && l.joined.Load())
		if d.stalled > 0 {
			l.stalledMS.Store(max(1, d.stalled.Milliseconds()))
			if at := d.resumed.UnixNano(); at != l.stalledAt.Swap(at) {
				// Word that this slot was left, read before the stall was
				// seen, is judged again with it (news.go).
				l.judgeAllLeft()
			}
		}
		if beat {
			l.heartbeatAll()
		}
		for _, x := range l.stillSilent(lost, silence) {
			l.lost(x.rank, x.why)
		}
		l.checkLeft(silence)
	}
}

// stillSilent is the peers of lost that are silent at a second look. A
// process on a machine with far more ranks than processors gets a
// sliver of one, and its goroutines run in turn: a reader whose peer's
// frames have come may wait behind a hundred others (handshakes of a
// pairwise alltoall, its own program) while the monitor's turn comes.
// That silence is this process's lag, not the peer's: before a peer is
// declared lost, the monitor lets every goroutine runnable now run
// first (Gosched puts it behind them), and a peer heard from since, or
// whose bytes wait unread in the socket, is not lost. (A process that did
// not run at all is the detector's stall.)
func (l *links) stillSilent(lost []lostPeer, silence time.Duration) []lostPeer {
	if len(lost) == 0 {
		return nil
	}
	goruntime.Gosched()
	now := l.now()
	out := lost[:0]
	for _, x := range lost {
		p := l.peer(x.rank)
		if p != nil && (now.Sub(time.Unix(0, p.LastHeard())) <= silence || p.Unread()) {
			continue
		}
		out = append(out, x)
	}
	return out
}

// elastic reports whether this job may move to a later generation without
// new connections (spares, or a program that manages its losses): then a
// frame of a later generation is kept, not dropped.
func (l *links) elastic() bool {
	return l.lossReturn.Load() || (l.rec != nil && l.rec.job.Spares > 0)
}
