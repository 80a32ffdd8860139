package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"sperli/codes"
	"sperli/elastic"
	"sperli/record"
	"sperli/wire"
)

// In-place recovery (SPEC §10.2). A slot that learns of a loss abandons
// its generation's communicator (every waiter wakes with ErrRecovering's
// code), runs the agreement on the next layout with the other live slots
// (the engine is sperli/elastic, pure; this file carries its messages on
// the slots' connections in agree frames), and enters the next
// generation with a fresh communicator over the same connections. Run
// calls the program again with it.
//
// One goroutine per slot (loop) runs the engine: every loss and every
// agreement message is an event on its queue, so the engine needs no lock
// and a reader goroutine never waits for it.

// recovery is a slot's part of in-place recovery.
type recovery struct {
	l   *links
	job *Job

	mu     sync.Mutex
	events []recEvent  // losses, requests and agreement messages, in order; under mu
	queued map[int]int // agreement messages in events, by sender; under mu
	ahead  []recEvent  // agreement messages for the generation after the next, kept for it; loop only
	parked []parkedMsg // agreement messages naming a loss this slot has not seen yet; loop only
	kick   chan struct{}
	layout elastic.Layout     // the layout of the generation this slot is in; loop only
	failed map[int]string     // slots known lost and why
	eng    *elastic.Agreement // the agreement on layout.Gen+1, or nil; loop only
	prev   *elastic.Agreement // the agreement that made layout, answering late prepares; loop only
	// The purposes (agreeLayout, agreeRegroup) of eng and prev: a
	// recovery after a loss, or a shrink or grow; loop only.
	engPurpose, prevPurpose byte
	lossAt                  time.Time     // when the loss that began the agreement was seen
	fatal                   error         // set once when the job cannot go on
	muted                   bool          // the test failure schedule's mute-agree: send nothing; loop only
	changed                 chan struct{} // closed (and replaced) at every new generation or fatal; under mu
	// stall is what the last look at a stalled agreement saw (checkStall);
	// stallTimer says a look is due; loop only.
	stall      awaited
	stallTimer bool
	// held is a report to the coordinator this slot holds back for
	// reportWait (sendAs), or nil; loop only.
	held *heldReport
}

// awaited is a member an agreement waits on (elastic's Awaited), in the
// agreement on generation gen.
type awaited struct {
	gen, slot int
	what      string
}

type recEvent struct {
	lost    int // a lost slot, or -1
	why     string
	from    int
	payload []byte
	purpose byte   // of an agreement message
	note    bool   // the loss is only recorded (LossReturn)
	request []byte // shrink or grow asked for by this rank's program
	check   bool   // a claimed loss may be past its wait (checkClaims)
	stall   bool   // an agreement may wait on a silent member (checkStall)
	report  bool   // a held report may be due (sendHeld)
}

// note records the loss of slot in LossReturn mode: no agreement starts.
func (r *recovery) note(slot int, why string) { r.post(recEvent{lost: slot, why: why, note: true}) }

func newRecovery(l *links, j *Job) *recovery {
	r := &recovery{
		l: l, job: j,
		kick:    make(chan struct{}, 1),
		layout:  elastic.Initial(j.Size, j.Spares),
		failed:  make(map[int]string),
		queued:  make(map[int]int),
		changed: make(chan struct{}),
	}
	r.layout.Gen = int(j.Incarnation)
	return r
}

// lost queues the loss of slot (detector or broken connection).
func (r *recovery) lost(slot int, why string) { r.post(recEvent{lost: slot, why: why}) }

// maxQueued bounds the agreement messages of one sender waiting for the
// loop (and, apart, those kept for the generation after the next). An
// honest slot sends a few per round of an agreement, and the loop takes
// them as they come; a slot that has this many waiting floods, and is
// refused (H1627) rather than let its messages crowd out anyone's.
const maxQueued = 64

// message queues an agreement message from slot from (reader goroutine).
// The bytes are decoded by the loop, which refuses bad ones.
func (r *recovery) message(from int, payload []byte) error {
	r.mu.Lock()
	if r.queued[from] >= maxQueued {
		r.mu.Unlock()
		return slotViolation(from, "it sent more than %d agreement messages that wait to be read", maxQueued)
	}
	r.queued[from]++
	r.mu.Unlock()
	r.post(recEvent{lost: -1, from: from, purpose: payload[0], payload: append([]byte(nil), payload[1:]...)})
	return nil
}

// slotViolation is violation for a slot (the agreement is among slots,
// which are ranks only in generation 0).
func slotViolation(slot int, format string, args ...any) *codes.Error {
	return &codes.Error{Code: codes.ProtocolViolation, Rank: slot, Msg: fmt.Sprintf("protocol violation by slot %d: ", slot) + fmt.Sprintf(format, args...)}
}

// post queues an event. None is dropped while the job goes on: the
// agreement messages are bounded per sender (message), and losses and
// requests by the slots.
func (r *recovery) post(e recEvent) {
	r.mu.Lock()
	if r.fatal == nil {
		r.events = append(r.events, e)
	}
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func (r *recovery) loop() {
	defer close(r.l.recDone)
	for {
		select {
		case <-r.kick:
		case <-r.l.stopRec:
			return
		}
		for {
			r.mu.Lock()
			if len(r.events) == 0 || r.fatal != nil {
				r.mu.Unlock()
				break
			}
			e := r.events[0]
			r.events = r.events[1:]
			if e.lost < 0 && e.request == nil && !e.check && !e.stall && !e.report {
				r.queued[e.from]--
			}
			r.mu.Unlock()
			r.handle(e)
		}
	}
}

func (r *recovery) handle(e recEvent) {
	if e.stall {
		r.stallTimer = false
		r.checkStall()
		return
	}
	if e.report {
		r.sendHeld()
		return
	}
	if e.check {
		r.checkClaims()
		r.unpark()
		return
	}
	if e.request != nil {
		r.onRequest(e.request)
	} else if e.lost >= 0 {
		r.onLost(e.lost, e.why, e.note)
	} else {
		var m elastic.Msg
		if err := m.UnmarshalBinary(e.payload, r.l.slots); err != nil {
			r.end(slotViolation(e.from, "%s", codes.Message(err)))
			return
		}
		switch {
		case m.Gen > r.layout.Gen+2:
			// A slot can be one generation ahead of this one and begin
			// the agreement on the next; two ahead needs this slot's own
			// promise, which it has not given.
			r.end(slotViolation(e.from, "an agreement message for generation %d, while this slot is in generation %d", m.Gen, r.layout.Gen))
			return
		case m.Gen == r.layout.Gen+2:
			if n := r.aheadFrom(e.from); n >= maxQueued {
				r.end(slotViolation(e.from, "more than %d agreement messages for generation %d, while this slot is in generation %d", maxQueued, m.Gen, r.layout.Gen))
				return
			}
			r.ahead = append(r.ahead, e) // taken once this slot is in the next generation
			return
		}
		if len(r.unconfirmed(m)) > 0 || r.parkedFrom(e.from) > 0 {
			// It names a slot lost that this slot still hears from: taken
			// once this slot's own detector agrees (checkClaims), in order
			// with what its sender sent after it.
			if r.parkedFrom(e.from) >= maxQueued {
				r.end(slotViolation(e.from, "more than %d agreement messages wait for this slot to see the losses they claim", maxQueued))
				return
			}
			if len(r.parked) == 0 {
				wait := r.claimWait()
				time.AfterFunc(wait+time.Millisecond, func() { r.post(recEvent{lost: -1, check: true}) })
			}
			r.parked = append(r.parked, parkedMsg{e: e, m: m, at: r.l.now()})
			return
		}
		r.onMessage(e.from, e.purpose, m)
	}
	r.progress()
	r.unpark()
}

// A slot believes a loss another claims (the failed slots of an
// agreement message) only once it sees it itself: a broken connection at
// once, a silence within its own silence limit. Honest slots see a crash
// within milliseconds of each other and a stopped process within a
// silence limit; a slot that claims the loss of one this slot still hears
// from, past claimWait, lies (or sees a network this slot does not: a
// partition, which the fault model leaves out), and is named (H1627).
type parkedMsg struct {
	e  recEvent
	m  elastic.Msg
	at time.Time
}

// claimWait is how long a claimed loss may wait for this slot's own sight
// of it: twice its silence limit and a second.
func (r *recovery) claimWait() time.Duration {
	return 2*time.Duration(r.l.silenceMS.Load())*time.Millisecond + time.Second
}

// unconfirmed is the slots m names lost that are live in this slot's
// layout and not lost to this slot itself. (This slot named lost is not
// among them: the others declared it lost, and it ends.)
func (r *recovery) unconfirmed(m elastic.Msg) []int {
	var out []int
	for _, s := range m.Failed {
		if _, known := r.failed[s]; known || s == r.l.self {
			continue
		}
		if _, isRank := r.layout.RankOf(s); isRank || r.layout.IsSpare(s) {
			out = append(out, s) // live here: not Live(), which sorts a copy per call
		}
	}
	return out
}

func (r *recovery) parkedFrom(from int) int {
	n := 0
	for _, p := range r.parked {
		if p.e.from == from {
			n++
		}
	}
	return n
}

// unpark takes the parked messages whose claimed losses this slot has
// seen now, each sender's in order.
func (r *recovery) unpark() {
	for again := true; again && r.fatalErr() == nil; {
		again = false
		blocked := map[int]bool{}
		for i, p := range r.parked {
			if blocked[p.e.from] {
				continue
			}
			if len(r.unconfirmed(p.m)) > 0 {
				blocked[p.e.from] = true
				continue
			}
			r.parked = slices.Delete(r.parked, i, i+1)
			r.onMessage(p.e.from, p.e.purpose, p.m)
			r.progress()
			again = true
			break
		}
	}
}

// watchStall makes sure a look at the agreement is due (checkStall).
func (r *recovery) watchStall() {
	if r.stallTimer || r.muted {
		return
	}
	r.stallTimer = true
	time.AfterFunc(r.claimWait(), func() { r.post(recEvent{lost: -1, stall: true}) })
}

// checkStall names a member that holds the agreement on the layout up: one
// it waited on at the last look and still waits on (elastic's Awaited),
// which therefore said nothing to it for claimWait while it lives — it
// heartbeats, or it would be lost. An honest member answers at once; the
// launcher's deadline stays for what no slot can name. (A shrink or grow
// is not watched: a member's answer waits for its program to ask.)
func (r *recovery) checkStall() {
	if r.eng == nil || r.engPurpose != agreeLayout || r.fatalErr() != nil {
		r.stall = awaited{}
		return
	}
	s, what := r.eng.Awaited()
	now := awaited{r.layout.Gen + 1, s, what}
	if s >= 0 && now == r.stall {
		r.end(slotViolation(s, "it sent no %s in the agreement on generation %d for %v while it lives (it heartbeats): it holds the agreement up", what, now.gen, r.claimWait()))
		return
	}
	r.stall = now
	r.watchStall()
}

// checkClaims names the sender of the oldest claim past claimWait.
func (r *recovery) checkClaims() {
	wait := r.claimWait()
	for _, p := range r.parked {
		if c := r.unconfirmed(p.m); len(c) > 0 && r.l.now().Sub(p.at) >= wait {
			r.end(slotViolation(p.e.from, "it named slot %d lost, and %v later this slot still hears from that slot (its silence limit is %d ms)", c[0], wait, r.l.silenceMS.Load()))
			return
		}
	}
	if len(r.parked) > 0 {
		time.AfterFunc(time.Until(r.parked[0].at.Add(wait))+time.Millisecond, func() { r.post(recEvent{lost: -1, check: true}) })
	}
}

func (r *recovery) fatalErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fatal
}

// aheadFrom counts the messages of slot from kept for a later generation.
func (r *recovery) aheadFrom(from int) int {
	n := 0
	for _, e := range r.ahead {
		if e.from == from {
			n++
		}
	}
	return n
}

func (r *recovery) failedList() []int {
	out := make([]int, 0, len(r.failed))
	for s := range r.failed {
		out = append(out, s)
	}
	sort.Ints(out)
	return out
}

func (r *recovery) onLost(slot int, why string, note bool) {
	if _, seen := r.failed[slot]; seen || slot == r.l.self {
		return
	}
	r.failed[slot] = why
	r.l.learn(slot, why)
	traceInstant(fmt.Sprintf("slot %d lost", slot), record.TraceRecovery, tstr("why", why))
	if r.l.peer(slot) != nil {
		r.l.drop(slot, why)
		r.l.byeSeen() // a spare that waits for the ranks' ends looks again
	}
	if !note && r.eng == nil && r.layout.IsSpare(r.l.self) && r.everyRankLost() {
		if r.aloneLeft() {
			// Every other slot's connection ended: this spare was declared
			// lost (stopped past the silence limit, then continued) and
			// the job went on without it, or ended.
			r.l.outcast.Store(true)
			r.end(r.zombie())
			return
		}
		// No rank is left to begin (a spare waits for a rank to, SPEC
		// §10.2): with every program gone, the spares take the ranks'
		// places in place, or the job ends when too few are left.
		r.begin(slot, why)
		return
	}
	if note || r.l.lossReturn.Load() || r.layout.IsSpare(r.l.self) {
		// The program manages its losses (SPEC §10.3), or this slot is a
		// spare, which runs no program and so does not know how its job
		// takes losses: a rank begins, by its mode, and the spare follows.
		if r.eng != nil {
			r.send(r.eng.Suspect(slot))
		}
		if !note && r.l.lossReturn.Load() {
			// Seen before the program said set_on_loss("return"), taken
			// after: its calls must learn it as that mode says.
			r.l.cur.Load().lostReturn(slot, why)
		}
		return
	}
	if r.prev != nil {
		r.sendAs(r.prevPurpose, r.prev.Suspect(slot)) // a slot still deciding the last switch may need this one
	}
	if r.eng != nil {
		r.send(r.eng.Suspect(slot))
		return
	}
	if _, isRank := r.layout.RankOf(slot); !isRank {
		if r.layout.IsSpare(slot) && r.l.stalledMS.Load() == 0 {
			// (A slot that did not run for a while may be the one the
			// others left: what it sees end says nothing of the spare.
			// Every live slot reports a spare's loss.)
			r.report("spare", fmt.Sprintf("slot %d (a spare) lost: %s", slot, why), slot)
		}
		return // a lost spare is recorded and nothing else happens
	}
	if who := r.finishing(); who != "" {
		// Every rank runs the program again in the next generation; one
		// that said bye reads no more and is read no more. The job ends
		// as without spares (the launcher may restart it).
		rank, _ := r.layout.RankOf(slot)
		r.end(codes.Lost("", rank, "rank %d (slot %d) lost: %s, after %s finished: a generation whose ranks have begun to finish is not recovered in place", rank, slot, why, who))
		return
	}
	r.begin(slot, why)
}

// finishing names a rank of this generation that has said bye (this one,
// or the lowest whose bye came), or is "".
func (r *recovery) finishing() string {
	if _, isRank := r.layout.RankOf(r.l.self); isRank && (r.l.closingNow.Load() || r.l.cur.Load().finishing()) {
		return "this rank"
	}
	// Only a slot with a link can have said bye to this one: the links,
	// not every rank (a loop over the ranks on every loss was n² job-wide,
	// hours at 100,000 simulated slots).
	first := -1
	if ps := r.l.pmap.Load(); ps != nil {
		for s, p := range ps.bySlot {
			if rank, isRank := r.layout.RankOf(s); isRank && p.Finished() && (first < 0 || rank < first) {
				first = rank
			}
		}
	}
	if first < 0 {
		return ""
	}
	return fmt.Sprintf("rank %d", first)
}

// aloneLeft reports whether every other slot is known lost to this one.
func (r *recovery) aloneLeft() bool {
	for s := 0; s < r.l.slots; s++ {
		if _, lost := r.failed[s]; !lost && s != r.l.self {
			return false
		}
	}
	return r.l.slots > 1
}

// zombie is the error of a slot every other slot has left.
func (r *recovery) zombie() error {
	return codes.New(codes.PeerLost, "slot %d: every other slot's connection to it ended: it was declared lost (silent past the silence limit, or cut off) and the job went on without it, or the job ended", r.l.self)
}

// everyRankLost reports whether every rank of the current layout is known
// lost.
func (r *recovery) everyRankLost() bool {
	for _, s := range r.layout.All() {
		if _, lost := r.failed[s]; !lost {
			return false
		}
	}
	return true
}

// noSpare says why a loss cannot be recovered in place: "no spare left to
// take its place", or the layout's own error.
func noSpare(err error) string {
	if errors.Is(err, elastic.ErrNoSpare) {
		return "no spare left to take its place"
	}
	return fmt.Sprintf("it cannot be recovered in place (%v)", err)
}

// begin abandons this generation and starts the agreement on the next.
func (r *recovery) begin(slot int, why string) {
	if _, err := r.layout.Next(r.failedList()); err != nil {
		// No spare left (SPEC §10.2 step 5): the job ends as without
		// recovery, and the launcher may restart it.
		rank, _ := r.layout.RankOf(slot)
		r.end(codes.Lost("", rank, "rank %d (slot %d) lost: %s; %s", rank, slot, why, noSpare(err)))
		return
	}
	r.lossAt = time.Now()
	r.abandon(slot, why)
	r.eng, r.engPurpose = elastic.NewAgreement(r.l.self, r.layout, r.l.agreeKeys(agreeLayout)), agreeLayout
	c := r.l.cur.Load()
	c.failurePoint("agree", 1)
	c.failurePoint("mute-agree", 1)
	r.send(r.eng.Start(r.failedList()))
	r.watchStall()
}

// abandon ends the current generation's communicator: not the job.
func (r *recovery) abandon(slot int, why string) {
	c := r.l.cur.Load()
	if c.recovering.Load() {
		return
	}
	rank, _ := r.layout.RankOf(slot)
	c.recovering.Store(true)
	c.end(codes.Lost("", rank, "rank %d lost (slot %d: %s): the job recovers in generation %d", rank, slot, why, r.layout.Gen+1), nil)
}

// onMessage takes an agreement message. A recovery (a rank that takes
// losses in place saw one) wins over a shrink or grow of the same
// generation: a regroup engine is dropped for it, which is safe because a
// regroup decides nothing without the promise of every live slot, and a
// slot that recovers never promises to one. So a job whose ranks were
// not all set alike when a loss came recovers in place, all of it.
func (r *recovery) onMessage(from int, purpose byte, m elastic.Msg) {
	switch {
	case m.Gen == r.layout.Gen+1 && purpose == agreeLayout:
		if r.eng == nil || r.engPurpose == agreeRegroup {
			// Another slot saw a loss first. It tells of it by a prepare
			// or a report naming a lost rank (it began because it lost
			// one); anything else is a lie, refused before this
			// generation is abandoned for it.
			if err := r.firstOfRecovery(from, m); err != nil {
				r.end(err)
				return
			}
			r.lossAt = time.Now()
			lost := -1 // the rank the message names lost (firstOfRecovery: there is one)
			for _, s := range m.Failed {
				if _, isRank := r.layout.RankOf(s); isRank && lost < 0 {
					lost = s
				}
			}
			r.abandon(lost, "told by slot "+fmt.Sprint(from))
			r.eng, r.engPurpose = elastic.NewAgreement(r.l.self, r.layout, r.l.agreeKeys(agreeLayout)), agreeLayout
			r.l.cur.Load().failurePoint("agree", 1)
			r.l.cur.Load().failurePoint("mute-agree", 1)
			// With the slots the message names lost: a prepare that named
			// none would be refused as a lie (it begins nothing).
			r.send(r.eng.Start(append(r.failedList(), m.Failed...)))
			r.watchStall()
		}
		r.send(r.eng.Receive(from, m))
	case m.Gen == r.layout.Gen+1 && purpose == agreeRegroup:
		switch {
		case r.eng != nil && r.engPurpose == agreeLayout:
			// This slot recovers: its own messages bring the others.
		case r.eng == nil && !r.l.lossReturn.Load() && !r.layout.IsSpare(r.l.self):
			// A rank that takes losses in place: it recovers when it sees
			// the loss, and that wins.
		default:
			if r.eng == nil {
				// Another rank asked to shrink or grow: this one promises
				// once its program asks too; a spare at once.
				r.newRegroup()
			}
			r.send(r.eng.Receive(from, m))
		}
	case m.Gen == r.layout.Gen && r.prev != nil:
		r.sendAs(r.prevPurpose, r.prev.Receive(from, m))
	}
}

// firstOfRecovery checks the message that would begin the recovery here:
// nil, or the H1627 naming its sender.
func (r *recovery) firstOfRecovery(from int, m elastic.Msg) error {
	namesRank := false
	for _, s := range m.Failed {
		if _, isRank := r.layout.RankOf(s); isRank {
			namesRank = true
		}
	}
	if (m.Kind != elastic.Prepare && m.Kind != elastic.Report) || !namesRank {
		return slotViolation(from, "an agreement %v on generation %d that names no lost rank (failed %v), while no recovery runs here", m.Kind, m.Gen, m.Failed)
	}
	return elastic.NewAgreement(r.l.self, r.layout, r.l.agreeKeys(agreeLayout)).Plausible(from, m)
}

// newRegroup starts the agreement a shrink or grow asks for.
func (r *recovery) newRegroup() {
	r.eng, r.engPurpose = elastic.NewRegroup(r.l.self, r.layout, r.l.agreeKeys(agreeRegroup)), agreeRegroup
	if r.layout.IsSpare(r.l.self) {
		r.send(r.eng.SetInput([]byte{}))
	}
	r.send(r.eng.Start(r.failedList()))
}

// onRequest takes this rank's shrink or grow.
func (r *recovery) onRequest(input []byte) {
	if r.eng == nil {
		r.newRegroup()
	}
	if r.engPurpose == agreeRegroup {
		r.send(r.eng.SetInput(input))
	} // else the job recovers in place: regroup sees the generation abandoned
}

func (r *recovery) send(outs []elastic.Out) { r.sendAs(r.engPurpose, outs) }

func (r *recovery) sendAs(purpose byte, outs []elastic.Out) {
	if r.muted {
		return
	}
	for _, o := range outs {
		if o.To < 0 || o.To >= r.l.slots || o.To == r.l.self {
			continue
		}
		if o.Msg.Kind == elastic.Report && purpose == agreeLayout && r.l.slots > relayAbove {
			r.holdReport(purpose, o)
			continue
		}
		if !r.sendOut(purpose, o) {
			return
		}
	}
}

// Reports held back. Every slot that begins the agreement on a layout
// tells the coordinator so (a report), in case the coordinator did not
// see the loss; but the news of a loss reaches every slot, the coordinator
// too, within a few hops (news.go), and in a large job the n reports,
// relayed over the tree and each verified there, were a third of all the
// coordinator read. Above relayAbove slots a report waits reportWait and
// goes only if the coordinator's prepare has not come by then.
type heldReport struct {
	purpose byte
	gen     int
	out     elastic.Out
}

// reportWait is how long a report is held: many times the hops of the
// news, and a small part of the wait for a silent member (claimWait).
func (r *recovery) reportWait() time.Duration {
	return min(r.claimWait()/8, 250*time.Millisecond)
}

func (r *recovery) holdReport(purpose byte, o elastic.Out) {
	first := r.held == nil
	r.held = &heldReport{purpose: purpose, gen: r.layout.Gen + 1, out: o}
	if first {
		time.AfterFunc(r.reportWait(), func() { r.post(recEvent{lost: -1, report: true}) })
	}
}

// sendHeld sends the held report unless the agreement it is of is over or
// its coordinator was heard from.
func (r *recovery) sendHeld() {
	h := r.held
	r.held = nil
	if h == nil || r.muted || r.eng == nil || r.engPurpose != h.purpose || h.gen != r.layout.Gen+1 || r.eng.Heard(h.out.To) {
		return
	}
	r.sendOut(h.purpose, h.out)
}

// sendOut sends one message of the agreement; false when it does not
// encode, which ends the job.
func (r *recovery) sendOut(purpose byte, o elastic.Out) bool {
	b, err := o.Msg.MarshalBinary()
	if err != nil || len(b) >= wire.MaxAgree {
		r.end(codes.New(codes.JobEnded, "agreement: a message does not encode: %v", err))
		return false
	}
	r.l.sendAgree(o.To, append([]byte{purpose}, b...))
	return true
}

// progress acts on the engine's outcome: a decided layout is entered; an
// engine that cannot finish ends the job.
func (r *recovery) progress() {
	for r.eng != nil {
		if err := r.eng.Err(); err != nil {
			if r.aloneLeft() {
				// Not a minority that lost the others: the others left it.
				err = r.zombie()
			} else if e := codes.As(err); e != nil && e.Code == codes.PeerLost && r.l.stalledMS.Load() > 0 {
				// This process did not run for a while: it, not the
				// others, is the one that was silent.
				err = codes.New(codes.PeerLost, "slot %d did not run for %d ms (stopped, frozen or starved), then %s: the others most likely declared it lost and went on without it", r.l.self, r.l.stalledMS.Load(), e.Msg)
			}
			r.end(err)
			return
		}
		l, ok, err := r.eng.DecidedLayout()
		if err != nil {
			r.end(err)
			return
		}
		if !ok {
			return
		}
		r.prev, r.eng, r.prevPurpose = r.eng, nil, r.engPurpose
		r.switchTo(l)
		// A loss during the agreement is handled in the next generation
		// (a program that manages its losses is told, and asks again).
		for _, s := range r.failedList() {
			if r.l.lossReturn.Load() {
				if _, isRank := r.layout.RankOf(s); isRank {
					r.l.cur.Load().lostReturn(s, r.failed[s])
				}
				continue
			}
			if _, isRank := r.layout.RankOf(s); isRank && r.eng == nil {
				r.begin(s, r.failed[s])
			}
		}
	}
}

func (r *recovery) switchTo(l elastic.Layout) {
	for _, s := range l.Lost {
		if s == r.l.self {
			r.l.outcast.Store(true) // it tells the others nothing more (declaredLost)
			r.end(codes.Lost("", -1, "slot %d was declared lost by the others in generation %d", s, l.Gen))
			return
		}
	}
	for _, s := range l.Lost {
		if _, ok := r.failed[s]; !ok {
			r.failed[s] = "declared lost by the agreement"
			r.l.learn(s, r.failed[s])
			traceInstant(fmt.Sprintf("slot %d lost", s), record.TraceRecovery, tstr("why", r.failed[s]))
			r.l.drop(s, r.failed[s])
		}
	}
	old := r.l.cur.Load()
	r.layout = l
	c := r.l.genComm(r.job, uint32(l.Gen), l)
	c.jobPub, c.jobPriv, c.spin, c.failures = old.jobPub, old.jobPriv, old.spin, old.failures
	// The report goes before the program can see the generation: a slot
	// that dies at its first call in it (or is killed then) has said, on
	// its standard error, which rank it serves (the launcher's loss lines
	// and --max-losses name it so).
	r.report("generation", "")
	r.l.enter(c)
	r.mu.Lock()
	close(r.changed)
	r.changed = make(chan struct{})
	// What came for this generation's successor, before this slot was
	// in it, is taken now, first.
	for _, e := range r.ahead {
		r.queued[e.from]++
	}
	r.events = append(r.ahead, r.events...)
	r.ahead = nil
	r.mu.Unlock()
}

// end ends the job: no generation follows. The others are told.
func (r *recovery) end(err error) {
	if err == nil {
		return
	}
	r.mu.Lock()
	if r.fatal != nil {
		r.mu.Unlock()
		return
	}
	r.fatal = err
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	c := r.l.cur.Load()
	e := codes.As(err)
	reason := wire.Reason{Code: codes.JobEnded, Cause: codes.CauseFailed, Rank: int32(c.origin()), Msg: codes.OneLine(err.Error())}
	switch {
	case e != nil && e.Cause != nil:
		reason.Code, reason.Cause = e.Cause.Code, e.Cause.Kind
		if e.Cause.Rank >= 0 {
			reason.Rank = int32(e.Cause.Rank)
		}
	case e != nil && e.Code.Valid():
		reason.Code = e.Code // a violation: the others learn its code
	}
	if c.recovering.Load() {
		c.tell(reason)
		return
	}
	c.end(err, &reason)
}

// abortIn takes an abort frame while this slot is between generations:
// the job ends.
func (r *recovery) abortIn(from int, reason wire.Reason) {
	msg := fmt.Sprintf("job ended by rank %d: %s", reason.Rank, reason.Msg)
	r.mu.Lock()
	first := r.fatal == nil
	if first {
		r.fatal = &codes.Error{Code: codes.JobEnded, Rank: from, Msg: msg, Cause: &codes.Cause{Kind: reason.Cause, Rank: int(reason.Rank), Code: reason.Code}}
		close(r.changed)
		r.changed = make(chan struct{})
	}
	r.mu.Unlock()
	if first {
		// Passed on, as an abort outside a recovery is (Comm.ended): the
		// slots with no link to its sender learn it from this one.
		r.l.cur.Load().tell(reason)
	}
}

// state returns the fatal error, if any, and the channel closed at the
// next change.
func (r *recovery) state() (error, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fatal, r.changed
}

func (r *recovery) report(kind, msg string, lost ...int) {
	out := r.l.proc.records
	if out == nil {
		return
	}
	l := r.layout
	rank, ok := l.RankOf(r.l.self)
	if !ok {
		rank = -1
	}
	var causes []string
	for _, s := range l.Lost {
		causes = append(causes, fmt.Sprintf("slot %d: %s", s, r.failed[s]))
	}
	rep := record.Gen{Kind: kind, Gen: l.Gen, Slot: r.l.self, Rank: rank, Size: l.Size(), Runs: l.RunList(), Spares: l.Spares, Lost: l.Lost,
		Cause: strings.Join(causes, "; "), Pid: r.l.proc.pid, Msg: msg, MS: time.Since(r.lossAt).Milliseconds()}
	if lost != nil {
		rep.Lost = lost
	}
	if kind == "generation" && !r.lossAt.IsZero() {
		traceSpanSince(fmt.Sprintf("recovery to generation %d", l.Gen), record.TraceRecovery, r.lossAt, tstr("lost", fmt.Sprint(rep.Lost)), tstr("cause", rep.Cause))
	} else {
		traceInstant(fmt.Sprintf("%s %d", kind, l.Gen), record.TraceRecovery, tstr("msg", msg))
	}
	b, _ := json.Marshal(rep)
	fmt.Fprintln(out, record.Seal(record.Key(r.job.Key), record.GenPrefix, string(b)))
}

// reportOwn writes a report of the program's goroutine (SetOnLoss's
// "mode", Started's "start"): it reads nothing the recovery loop owns (the
// layout, the failed set, the time of the loss), only this slot and what
// the caller gives.
func (r *recovery) reportOwn(kind string, gen int, msg string) {
	out := r.l.proc.records
	if out == nil {
		return
	}
	if kind == "start" {
		traceInstant(fmt.Sprintf("generation %d begins", gen), record.TraceCalls)
	}
	b, _ := json.Marshal(record.Gen{Kind: kind, Gen: gen, Slot: r.l.self, Rank: -1, Pid: r.l.proc.pid, Msg: msg})
	fmt.Fprintln(out, record.Seal(record.Key(r.job.Key), record.GenPrefix, string(b)))
}

// ErrSpareDone is returned by await to a spare whose job finished without
// needing it.
var errSpareDone = fmt.Errorf("the job finished without needing this spare")

// await waits until this slot is a rank of a generation after c's (it
// returns that communicator), or the job ends (the error), or — for a
// spare — every rank has finished (errSpareDone).
func (r *recovery) await(ctx context.Context, c *Comm) (*Comm, error) {
	for {
		fatal, changed := r.state()
		if fatal != nil {
			return c, fatal
		}
		if nc := r.l.cur.Load(); nc.inc > c.inc {
			if nc.rank >= 0 {
				return nc, nil
			}
			c = nc // still a spare, in a later generation
		}
		if c.rank < 0 {
			c.finStep() // a spare's own part is done from the start
			select {
			case <-c.fin.done:
				return c, errSpareDone
			default:
			}
		}
		select {
		case <-c.fin.done:
		case <-changed:
		case <-c.dead:
			if !c.recovering.Load() {
				return c, c.deadErr()
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return c, ctx.Err()
			}
		case <-r.l.byes:
		case <-ctx.Done():
			return c, ctx.Err()
		}
	}
}

// Run joins the job of j (Init) and runs fn as this rank's program. In a
// job with spares (SPEC §10.2) a loss does not end it: the live slots
// agree on the next generation, fn's calls return, and Run calls fn again
// with the new generation's communicator (the program rolls back to its
// newest checkpoint with Resume); a spare slot waits in Run until it takes
// a lost rank's place, or until the job has finished without it. Run
// returns the communicator the program ended in and its error: the caller
// ends the process with Exit(c, err), as after Init.
func Run(ctx context.Context, j *Job, fn func(context.Context, *Comm) error) (*Comm, error) {
	c, err := Init(ctx, j)
	if err != nil {
		return nil, err
	}
	rec := c.links.rec
	c.Started()
	if c.rank < 0 {
		c, err = rec.await(ctx, c)
		if err == errSpareDone {
			return c, c.Finish()
		}
		if err != nil {
			return c, err
		}
	}
	for {
		err = fn(ctx, c)
		if !c.recovering.Load() {
			// The program may have moved on to a later generation
			// (shrink, grow): the job ends there.
			if cur := c.links.cur.Load(); cur.inc > c.inc && !cur.recovering.Load() && cur.rank >= 0 {
				c = cur
			}
			return c, err
		}
		if c, err = c.Next(ctx); err != nil {
			return c, err
		}
	}
}

// Recovering reports whether c's generation was abandoned for the next
// (in-place recovery): its calls return H1611, and Next gives the next
// generation's communicator.
func (c *Comm) Recovering() bool { return c.recovering.Load() }

// Spare reports whether this slot is a spare in c's generation (Rank is
// then -1).
func (c *Comm) Spare() bool { return c.rank < 0 }

// ErrSpareDone is Next's error for a spare whose job finished without
// needing it: the caller finishes c and ends with 0.
var ErrSpareDone = errSpareDone

// Next waits until this slot is a rank of a generation after c's and
// returns its communicator — what Run does between calls of its function,
// for a program that joined with Init (the C library). For a spare whose
// job finished without it, it returns ErrSpareDone; when the job ended,
// its error.
func (c *Comm) Next(ctx context.Context) (*Comm, error) {
	ran := c.rank >= 0
	nc, err := c.links.rec.await(ctx, c)
	if out := c.links.proc.marks; err == nil && ran && out != nil {
		// The program's output of c's generation is abandoned: the line
		// that says so goes on its standard output, in order with it
		// (the launcher could place it only by the report on standard
		// error, which races the other pipe).
		fmt.Fprintln(out, record.Seal(record.Key(c.job.Key), record.MarkPrefix, fmt.Sprint(nc.inc)))
	}
	return nc, err
}

// Generation is the generation of the job this communicator belongs to
// (SPEC §10.1): 0 at launch, one more at each recovery or restart.
func (c *Comm) Generation() int { return int(c.inc) }

// Slot is this process's slot, fixed for its life.
func (c *Comm) Slot() int { return c.links.self }

// Layout returns this generation's layout: the slot of each rank, the
// live spares, the slots lost since the generation before (SPEC §10.4).
func (c *Comm) Layout() elastic.Layout {
	l := c.layout
	l.Spares, l.Lost = slices.Clone(l.Spares), slices.Clone(l.Lost) // its runs are never changed
	return l
}

// Started tells the launcher that this rank is back in its program after a
// launcher restart (the time of a restart it says; nothing in incarnation
// 0 or without a launcher). Run calls it; a program that joins with Init
// calls it once joined.
func (c *Comm) Started() {
	if c.job.Incarnation > 0 {
		c.links.rec.reportOwn("start", int(c.job.Incarnation), "")
	}
}
