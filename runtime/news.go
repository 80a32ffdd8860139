package runtime

import (
	"time"

	"sperli/codes"
	"sperli/topo"
	"sperli/wire"
)

// News for all (SPEC §18). A loss is seen by the few slots that have a
// link to the lost one — its watchers on the ring at least — and every
// other slot learns it from them: the slot that declares a loss tells
// every link it has (a lost frame), and every slot that learns of a loss
// for the first time passes it on to every link of its own. The links of
// the tree and the ring join every live slot, so the news reaches each
// within a few hops, also when slots die while it spreads (the ring heals
// around them, and a link made later is told every loss known, tellKnown).
// In a job that ends at a loss the abort is that news (Comm.tell).

// knownLoss is what a slot knows of a loss: why, the slot whose news told
// it (-1: its own detector, the agreement or the program), and when.
type knownLoss struct {
	why  string
	from int
	at   time.Time
}

// learn records that slot is lost; it reports false when that was known.
func (l *links) learn(slot int, why string) bool { return l.learnFrom(slot, why, -1) }

// learnFrom is learn of news that came from slot from.
func (l *links) learnFrom(slot int, why string, from int) bool {
	l.knownMu.Lock()
	defer l.knownMu.Unlock()
	if _, ok := l.known[slot]; ok {
		return false
	}
	if l.known == nil {
		l.known = map[int]knownLoss{}
	}
	l.known[slot] = knownLoss{why: why, from: from, at: l.now()}
	return true
}

// knownLost reports whether slot is known lost to this slot.
func (l *links) knownLost(slot int) bool {
	l.knownMu.Lock()
	defer l.knownMu.Unlock()
	_, ok := l.known[slot]
	return ok
}

// takeCrashes takes the slots whose processes the launcher saw end by a
// signal (proc.crashed) as losses this slot saw itself — the launcher
// is their parent, or their host's ssh session: a crash it sees is
// certain — until the control channel or the slot's life ends. So a slot
// that died before any other had a link to it (early in the join) is
// known lost at once, not once the join window ends.
func (l *links) takeCrashes(crashed <-chan int) {
	for {
		select {
		case slot, ok := <-crashed:
			if !ok {
				return
			}
			if slot < 0 || slot >= l.slots || l.jobOver() {
				continue
			}
			if p := l.peer(slot); p != nil && p.Finished() {
				continue // it finished (or said bye) before it died: no loss
			}
			l.lost(slot, "its launcher saw its process end by a signal")
		case <-l.life.Done():
			return
		}
	}
}

// tellLost sends the news that slot is lost on every link but the lost
// one's and the one it came from (from, -1 for none).
func (l *links) tellLost(slot int, why string, from int) {
	if l.outcast.Load() {
		return
	}
	payload := lostNews(slot, why)
	for _, p := range l.peerList() {
		if p.rank != slot && p.rank != from && !p.Gone() {
			p.Control(wire.Lost, payload)
		}
	}
}

func lostNews(slot int, why string) []byte {
	return wire.AppendReason(nil, wire.Reason{Code: codes.PeerLost, Cause: codes.CauseLost, Rank: int32(slot), Msg: why})
}

// tellKnown tells a link just made every loss this slot knows of, so
// that news which spread while it was not there reaches it too.
func (l *links) tellKnown(p *peer) {
	if l.outcast.Load() {
		return
	}
	l.knownMu.Lock()
	var news [][]byte
	for s, k := range l.known {
		if s != p.rank {
			news = append(news, lostNews(s, k.why))
		}
	}
	l.knownMu.Unlock()
	for _, b := range news {
		p.Control(wire.Lost, b)
	}
}

// lostIn takes a lost frame from slot from (its reader goroutine). A
// claim about a slot this one still hears from is not believed: its own
// detector decides (a slot that lies cannot evict a live one from the
// view of those that watch it). A claim about this slot itself means the
// others have declared it lost and gone on without it: it ends.
func (l *links) lostIn(from int, payload []byte) error {
	r, err := wire.DecodeReason(payload)
	if err != nil {
		return err
	}
	slot := int(r.Rank)
	if slot < 0 || slot >= l.slots || r.Cause != codes.CauseLost {
		return slotViolation(from, "it sent the news of a loss of slot %d with cause %v (job of %d slots)", slot, r.Cause, l.slots)
	}
	if slot == l.self {
		if p := l.peer(from); p != nil {
			p.toldLeft.Store(true)
		}
		l.toldLeft(from, r.Msg)
		return nil
	}
	if l.knownLost(slot) || l.knownLost(from) {
		// Known, or from a slot this one knows lost: a slot the others
		// left (stopped past the limit, then continued) sees its links
		// close one by one, and is not believed if it calls them losses.
		return nil
	}
	if p := l.peer(slot); p != nil && p.Attached() && !p.Gone() && l.hears(p) {
		return nil
	}
	l.lostFrom(slot, r.Msg, from)
	return nil
}

// Told it was left. A slot the others declared lost — silent past their
// limit because it was stopped, starved or cut off — may run and read
// again; every slot with a link to it then closes that link with a lost
// frame naming it as the link's last frame (drop). One such frame is a
// claim, not proof: a slot that lies could send a live slot away with it.
// This slot believes it when it did not run for a while itself (its
// detector saw the stall), when two slots said so, or when every link it
// had has ended; until then it goes on. A slot that sends anything after
// that frame lies (arrive), and one whose link ended after it while no
// other slot confirmed it within twice the silence limit, while the
// others still talk to this slot, lied too (checkLeft): H1627 names it.

// toldLeft takes slot from's word that the others declared this slot lost.
func (l *links) toldLeft(from int, why string) {
	l.knownMu.Lock()
	if l.left == nil {
		l.left = map[int]time.Time{}
	}
	if _, ok := l.left[from]; !ok {
		l.left[from] = time.Time{}
	}
	l.knownMu.Unlock()
	l.judgeLeft(from, why)
}

// leftEnded records that the link of a slot that told this one it was
// left has ended.
func (l *links) leftEnded(from int) {
	l.knownMu.Lock()
	if at, ok := l.left[from]; ok && at.IsZero() {
		l.left[from] = l.now()
	}
	l.knownMu.Unlock()
	l.judgeLeft(from, "")
}

// judgeLeft ends this slot if the word that it was left is believed.
func (l *links) judgeLeft(from int, why string) {
	l.knownMu.Lock()
	tellers := len(l.left)
	l.knownMu.Unlock()
	if tellers == 0 || l.outcast.Load() {
		return
	}
	alone := true
	for _, p := range l.peerList() {
		if !p.toldLeft.Load() && p.Attached() && !p.Gone() {
			alone = false
			break
		}
	}
	if l.stalledRecently() || tellers >= 2 || alone {
		if why == "" {
			why = "it closed its link"
		}
		l.declaredLost(from, why)
	}
}

// stalledRecently reports whether this process did not run for a while
// (the detector's stall) recently enough that the others may have left it
// for it: within three silence limits and a second of the stall's end.
// A stall long ago is no reason to believe a single slot that says so
// (one joined slot that lies could otherwise send away any slot that ever
// stalled).
func (l *links) stalledRecently() bool {
	if l.stalledMS.Load() == 0 {
		return false
	}
	window := 3*l.silence() + time.Second
	return l.now().Sub(time.Unix(0, l.stalledAt.Load())) <= window
}

// judgeAllLeft judges again every word that this slot was left.
func (l *links) judgeAllLeft() {
	l.knownMu.Lock()
	var from []int
	for s := range l.left {
		from = append(from, s)
	}
	l.knownMu.Unlock()
	for _, s := range from {
		l.judgeLeft(s, "")
	}
}

// checkLeft names a slot that said this one was left, closed its link,
// and was not confirmed within twice the silence limit (monitor).
func (l *links) checkLeft(silence time.Duration) {
	if l.outcast.Load() {
		return
	}
	l.knownMu.Lock()
	liar := -1
	if len(l.left) == 1 {
		for s, at := range l.left {
			if !at.IsZero() && l.now().Sub(at) > 2*silence {
				liar = s
			}
		}
	}
	l.knownMu.Unlock()
	if liar < 0 {
		return
	}
	l.judgeLeft(liar, "")
	if l.outcast.Load() {
		return
	}
	if p := l.peer(liar); p != nil {
		p.Refuse(slotViolation(liar, "it told slot %d that the others had declared it lost and closed its link, and in %v no other slot did so while they went on talking to it", l.self, 2*silence))
	}
}

// hears reports whether p was heard from within half this slot's silence
// limit.
func (l *links) hears(p *peer) bool {
	return l.now().Sub(time.Unix(0, p.LastHeard())) < l.silence()/2
}

// declaredLost ends this slot: slot from says the others declared it lost
// (it was silent past their limit — stopped, frozen, cut off — and the
// job went on without it, or ended).
func (l *links) declaredLost(from int, why string) {
	err := codes.LostNoCause("", -1, "slot %d was declared lost by the others (slot %d told it: %s): the job went on without it, or ended", l.self, from, why)
	// From now on it tells nothing (no news of the links that close on
	// it, no abort), so that no slot takes its word for a loss.
	l.outcast.Store(true)
	if l.rec != nil && l.rec.job.Spares > 0 && !l.lossReturn.Load() {
		l.rec.end(err)
		return
	}
	l.cur.Load().end(err, nil)
}

// drop closes the link to slot, which this slot knows lost, after telling
// it so (a lost frame naming it): a slot declared lost because it was
// silent — stopped, starved — may run again and read, and it must learn
// that it was left, not take each link that closes on it for a loss of
// the slot at the other end (declaredLost). The frame and the close go
// out on the link's own goroutine, waiting at most a second for a peer
// that does not read.
func (l *links) drop(slot int, why string) {
	p := l.peer(slot)
	if p == nil {
		return
	}
	switch {
	case !p.Attached():
		p.Close()
		return
	case p.Gone():
		// Its end is under way — a CloseTelling of this slot's (a drop
		// before this one) whose last frame its writer has yet to send,
		// a bye, a break: closing it now could cut that frame off, and
		// the peer would take the cut for a loss of this slot.
		go p.CloseGracefully(time.Second)
		return
	}
	p.CloseTelling(wire.Lost, lostNews(slot, why), time.Second)
}

// heal makes the links of the tree and the ring healed around every slot
// known lost (package topo): each live slot stays watched by Watchers
// live successors, and the news keeps a path to every live slot.
func (l *links) heal() {
	if !l.joined.Load() {
		return
	}
	for _, s := range topo.Neighbours(l.slots, l.self, l.knownLost) {
		l.link(s)
	}
}
