package launch

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"sperli/record"
)

// generations follows the in-place recoveries of a job with spares (SPEC
// §10.2): every slot reports each generation it enters on its standard
// error (record.GenPrefix lines); once every live slot of a generation
// has, the launcher says it in one line and appends the layout to the
// --record file (§10.4).
type generations struct {
	say    func(format string, args ...any)
	record *os.File
	// onLoss is told of every slot lost, with the rank it served (-1 a
	// spare) and why (--max-losses, losses.go); called under mu.
	onLoss func(slot, rank int, why string)

	mu     sync.Mutex
	job    string
	spares int
	procs  []*rankProc
	gen    int   // the last generation said
	ranks  []int // its layout
	prev   string
	seen   map[int]map[int]bool // generation → slots that reported it
	first  map[int]time.Time    // generation → its first report
	// complete is when every live slot had reported a generation: its
	// "back in" ends there, also when its line is held (below) until a
	// lost slot's process ends — a stopped one never does.
	complete map[int]time.Time
	clock    func() time.Time   // time.Now; tests set their own
	lines    map[int]record.Gen // generation → its first report
	lostAt   map[int]time.Time  // slot → when its process was seen to end
	lostWhy  map[int]string
	gone     map[int]bool // slots lost and replaced in place
	// goneCh is signalled when gone grows (the wait loop ends replaced
	// slots' processes that are left: endReplaced).
	goneCh chan struct{}
	// returning: the program manages its losses (set_on_loss("return")):
	// a lost process does not end the job.
	returning bool
	// endedSeen holds the slots whose process the launcher has seen end
	// (procEnded); held is a generation every live slot reported whose
	// lost slots' ends are not all seen yet: it is said when they are, so
	// that a loss's cause is the launcher's sight of it in every run, or
	// after heldMax at the latest.
	endedSeen map[int]bool
	held      *record.Gen
	firstBad  time.Time // the first process of this incarnation that ended badly
	restarted time.Time // firstBad of the incarnation before, when this one is a restart
	started   map[int]bool
	// unwritten is the record line of the incarnation's first generation
	// while a remote slot's process id is not known (writeFirstLocked).
	unwritten *recordLine
}

// recordLine is one line of the generation record, its keys in the order
// of SPEC §10.4.
type recordLine struct {
	Job    string         `json:"job"`
	Gen    int            `json:"generation"`
	Size   int            `json:"size"`
	Ranks  []int          `json:"ranks"`
	Spares []int          `json:"spares"`
	Lost   []int          `json:"lost"`
	Hosts  map[string]any `json:"hosts"`
	Pids   map[string]any `json:"pids"`
	Cause  string         `json:"cause"`
	Prev   string         `json:"prev"`
}

// start takes the slots of a newly started incarnation and records its
// first generation.
func (g *generations) start(job string, inc uint32, n, spares int, procs []*rankProc) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.writeFirstLocked(true) // of the incarnation before, if it never was
	g.job, g.spares, g.procs, g.gen = job, spares, procs, int(inc)
	g.restarted, g.firstBad, g.started = g.firstBad, time.Time{}, map[int]bool{}
	if inc == 0 {
		g.restarted = time.Time{}
	}
	g.seen, g.first, g.lines = map[int]map[int]bool{}, map[int]time.Time{}, map[int]record.Gen{}
	g.complete = nil
	g.lostAt, g.lostWhy, g.gone = map[int]time.Time{}, map[int]string{}, map[int]bool{}
	g.endedSeen, g.held = map[int]bool{}, nil
	g.ranks = make([]int, n)
	for r := range g.ranks {
		g.ranks[r] = r
	}
	sp := make([]int, spares)
	for i := range sp {
		sp[i] = n + i
	}
	cause := ""
	if inc > 0 {
		cause = "restart"
	}
	g.unwritten = &recordLine{Gen: g.gen, Ranks: slices.Clone(g.ranks), Spares: sp, Cause: cause}
	g.writeFirstLocked(false)
}

// pidKnown is told that a remote slot's process id came (its agent's
// started frame): the first line may be written now.
func (g *generations) pidKnown() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.writeFirstLocked(false)
}

// flushFirst writes the first line of the incarnation if it was not yet
// (a remote slot's pid never came): at its end.
func (g *generations) flushFirst() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.writeFirstLocked(true)
}

// writeFirstLocked writes the generation record's line of the
// incarnation's first generation once every slot's process id is known
// (a remote slot's comes with its agent's started frame) or the slot has
// ended, or at once with force (a later generation is written, or the
// incarnation ends).
func (g *generations) writeFirstLocked(force bool) {
	u := g.unwritten
	if u == nil {
		return
	}
	if g.record != nil && !force {
		for _, p := range g.procs {
			if p != nil && p.procID() == 0 && !isEnded(p) {
				return
			}
		}
	}
	g.unwritten = nil
	g.writeLocked(u.Gen, u.Ranks, u.Spares, nil, u.Cause)
}

// last is the newest generation said.
func (g *generations) last() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.gen
}

func (g *generations) writeLocked(gen int, ranks, spares, lost []int, cause string) {
	if g.record == nil {
		return
	}
	rec := recordLine{Job: g.job, Gen: gen, Size: len(ranks), Ranks: ranks, Spares: spares, Lost: lost,
		Hosts: map[string]any{}, Pids: map[string]any{}, Cause: cause, Prev: g.prev}
	if rec.Spares == nil {
		rec.Spares = []int{}
	}
	if rec.Lost == nil {
		rec.Lost = []int{}
	}
	for _, s := range append(slices.Clone(ranks), spares...) {
		if s < len(g.procs) && g.procs[s] != nil {
			k := strconv.Itoa(s)
			rec.Hosts[k] = g.procs[s].host
			if pid := g.procs[s].procID(); pid != 0 {
				rec.Pids[k] = pid
			}
		}
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return
	}
	sum := sha256.Sum256(b)
	g.prev = hex.EncodeToString(sum[:])
	g.record.Write(append(b, '\n'))
}

// lostProc notes the end of a slot's process (killed: a loss).
func (g *generations) lostProc(p *rankProc, why string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.lostAt[p.rank]; !ok {
		g.lostAt[p.rank], g.lostWhy[p.rank] = g.now(), why
		g.lostLocked(p.rank, why)
	}
}

// lostLocked tells onLoss of the loss of slot, with the rank it served.
func (g *generations) lostLocked(slot int, why string) {
	if g.onLoss != nil {
		g.onLoss(slot, g.rankOfLocked(slot), why)
	}
}

// rankOf is the rank slot served last, as far as the launcher knows; -1
// for a slot that served none.
func (g *generations) rankOf(slot int) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.rankOfLocked(slot)
}

// rankOfLocked is the rank slot serves in the newest generation a slot
// reported with it as a rank (-1: none). A generation is said only once
// every live slot reported it, and a spare that took a rank's place may
// be lost at its first call in it, before the others' reports came; a
// slot that served a rank never becomes a spare again.
func (g *generations) rankOfLocked(slot int) int {
	newest, rank := g.gen, slices.Index(g.ranks, slot)
	for gen, r := range g.lines {
		if i := slices.Index(r.Ranks, slot); i >= 0 && (gen > newest || rank < 0) {
			newest, rank = gen, i
		}
	}
	return rank
}

// unsaidLosses returns a line for every slot whose loss the launcher saw
// and no generation said: the losses a program managed itself
// (set_on_loss("return")) without shrinking or growing (SPEC §10.3: one
// line per loss).
func (g *generations) unsaidLosses() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.returning {
		return nil // a loss not recovered in place ends the job, said so
	}
	var slots []int
	for s := range g.lostAt {
		if !g.gone[s] {
			slots = append(slots, s)
		}
	}
	slices.Sort(slots)
	var out []string
	for _, s := range slots {
		who := fmt.Sprintf("slot %d (a spare, on %s)", s, g.host(s))
		if r := slices.Index(g.ranks, s); r >= 0 {
			who = fmt.Sprintf("rank %d", r)
			if g.spares > 0 {
				who = fmt.Sprintf("rank %d (slot %d on %s)", r, s, g.host(s))
			}
		}
		out = append(out, fmt.Sprintf("%s lost: %s; the program went on without it (set_on_loss(\"return\"))", who, g.lostWhy[s]))
	}
	return out
}

// lostSight returns the launcher's sight of the end of every slot it saw
// lost, by slot.
func (g *generations) lostSight() map[int]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[int]string, len(g.lostWhy))
	for s, why := range g.lostWhy {
		out[s] = why
	}
	return out
}

// slotOf returns the slot of rank in the generation said last.
func (g *generations) slotOf(rank int) (int, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if rank < 0 || rank >= len(g.ranks) {
		return 0, false
	}
	slot := g.ranks[rank]
	return slot, slot >= 0 && slot < len(g.procs) && g.procs[slot] != nil
}

// sightOf returns the launcher's own sight of the end of rank's slot
// (lostProc), when it saw one.
func (g *generations) sightOf(rank int) (string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if rank < 0 || rank >= len(g.ranks) {
		return "", false
	}
	why, ok := g.lostWhy[g.ranks[rank]]
	return why, ok
}

// recovers reports whether the end of p may be recovered in place, so the
// others are not to be ended for it.
func (g *generations) recovers(p *rankProc) bool {
	ws, _ := p.state.Sys().(syscall.WaitStatus)
	g.mu.Lock()
	defer g.mu.Unlock()
	// Killed, or a remote rank whose host's session ended before its end
	// and status record were heard: a loss, which the job may survive.
	died := ws.Signaled() || (p.status == nil && p.gone != "")
	return (g.spares > 0 || g.returning) && died && !p.killed
}

// inPlace reports whether a loss is recovered in place (spares, and the
// program does not manage its losses itself).
func (g *generations) inPlace() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.spares > 0 && !g.returning
}

// replaced reports whether slot was lost and replaced in place, as said.
func (g *generations) replaced(slot int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.returning {
		_, lost := g.lostAt[slot]
		return lost || g.gone[slot]
	}
	return g.gone[slot]
}

// leftBehind reports whether slot was replaced, or is named lost by a
// generation a slot reported that is not said yet — a generation is held
// until the lost slot's process has ended (its own cause is said with
// it), and a slot the others declared lost while it lived (starved past
// the silence limit) ends by itself, with H1611, before that: its end is
// that of a replaced slot, not a failure. (endReplaced asks replaced: a
// zombie is ended only once its generation is said.)
func (g *generations) leftBehind(slot int) bool {
	if g.replaced(slot) {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for gen, r := range g.lines {
		if gen > g.gen && slices.Contains(r.Lost, slot) {
			return true
		}
	}
	return false
}

// report takes one report line of slot. For a generation the slot
// entered it returns the generation, for the stream to mark the slot's
// standard error there, and the rank the slot serves in it (-1 a spare);
// else -1 and -1.
func (g *generations) report(slot int, line []byte) (gen, rank int) {
	var r record.Gen
	if json.Unmarshal(line, &r) != nil || r.Slot != slot {
		return -1, -1
	}
	switch r.Kind {
	case "spare":
		g.mu.Lock()
		if g.zombieLocked(slot, r.Gen) {
			// A slot the job went on without (stopped past the silence
			// limit, then continued) sees the others' links to it end:
			// what it says of them is no loss.
			g.mu.Unlock()
			return -1, -1
		}
		fresh := false
		for _, s := range r.Lost {
			if !g.gone[s] {
				why := g.lostWhy[s]
				if why == "" {
					why = "declared lost by the job"
				}
				g.lostLocked(s, why)
			}
			fresh = fresh || !g.gone[s]
			g.gone[s] = true // its end is no loss of the job
		}
		g.goneGrewLocked()
		g.mu.Unlock()
		if fresh {
			g.say("%s", r.Msg) // once: every live slot reports it
		}
		return -1, -1
	case "start":
		// A slot of a restarted incarnation is back in its program.
		g.mu.Lock()
		defer g.mu.Unlock()
		g.started[slot] = true
		if len(g.started) == len(g.procs) && !g.restarted.IsZero() {
			g.say("incarnation %d: every rank back in its program %d ms after the loss", r.Gen, time.Since(g.restarted).Milliseconds())
		}
		return -1, -1
	case "mode":
		g.mu.Lock()
		g.returning = r.Msg == "return"
		g.mu.Unlock()
		return -1, -1
	case "generation":
	default:
		return -1, -1
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if r.Runs != nil {
		if first, ok := g.lines[r.Gen]; ok && slices.Equal(first.Runs, r.Runs) {
			r.Ranks = first.Ranks // one expansion a generation, not one a slot
		} else if r.Ranks = ranksOfRuns(r.Runs, r.Size, len(g.procs)); r.Ranks == nil {
			return -1, -1
		}
	}
	g.seenLocked(slot, r)
	rank = r.Rank
	if rank < -1 || rank >= 0 && (rank >= len(r.Ranks) || r.Ranks[rank] != slot) {
		rank = slices.Index(r.Ranks, slot) // the layout says it
	}
	return r.Gen, rank
}

// ranksOfRuns is the slot of each rank of a report's runs, or nil when
// they are not size ranks within the job's slots (a report is sealed by a
// slot of the job, but what it says is checked before it is used).
func ranksOfRuns(runs [][2]int, size, slots int) []int {
	total := 0
	for _, x := range runs {
		if x[0] < 0 || x[0] >= slots || x[1] < 1 || x[1] > slots-x[0] {
			return nil
		}
		total += x[1]
	}
	if total != size || size > slots {
		return nil
	}
	out := make([]int, 0, size)
	for _, x := range runs {
		for i := range x[1] {
			out = append(out, x[0]+i)
		}
	}
	return out
}

// zombieLocked reports whether slot, reporting of generation gen, was
// already left behind: lost and replaced, or named lost by a later
// generation that a slot reported (said or not yet).
func (g *generations) zombieLocked(slot, gen int) bool {
	if g.gone[slot] || gen < g.gen {
		return true
	}
	for later, r := range g.lines {
		if later > gen && slices.Contains(r.Lost, slot) {
			return true
		}
	}
	return false
}

func (g *generations) seenLocked(slot int, r record.Gen) {
	if r.Gen <= g.gen {
		return
	}
	if g.seen[r.Gen] == nil {
		g.seen[r.Gen], g.first[r.Gen], g.lines[r.Gen] = map[int]bool{}, g.now(), r
	}
	g.seen[r.Gen][slot] = true
	g.trySayLocked(r)
}

func (g *generations) goneGrewLocked() {
	if g.goneCh == nil {
		g.goneCh = make(chan struct{}, 1)
	}
	select {
	case g.goneCh <- struct{}{}:
	default:
	}
}

// goneGrew is signalled when a slot was replaced in place.
func (g *generations) goneGrew() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.goneCh == nil {
		g.goneCh = make(chan struct{}, 1)
	}
	return g.goneCh
}

// heldMax bounds how long a generation waits for the launcher to see its
// lost slots' processes end (a remote one's ssh may hang).
const heldMax = 10 * time.Second

// procEnded notes that the launcher has seen p's process end, and says a
// generation that waited for it.
func (g *generations) procEnded(p *rankProc) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.endedSeen == nil {
		return // no incarnation started
	}
	g.endedSeen[p.rank] = true
	g.writeFirstLocked(false)
	if g.held != nil {
		g.trySayLocked(*g.held)
	}
}

// trySayLocked says generation r once every live slot reported it and the
// end of every lost slot's process was seen (or heldMax passed).
func (g *generations) trySayLocked(r record.Gen) {
	if r.Gen <= g.gen {
		return
	}
	// Fewer reports than live slots: not yet (without walking the
	// layout, which made every report O(ranks) and a generation of a
	// large job O(ranks²) here).
	if len(g.seen[r.Gen]) < len(r.Ranks)+len(r.Spares) {
		return
	}
	live := append(slices.Clone(r.Ranks), r.Spares...)
	for _, s := range live {
		if !g.seen[r.Gen][s] {
			return
		}
	}
	if _, ok := g.complete[r.Gen]; !ok {
		if g.complete == nil {
			g.complete = map[int]time.Time{}
		}
		g.complete[r.Gen] = g.now()
	}
	for _, s := range r.Lost {
		if s >= 0 && s < len(g.procs) && g.procs[s] != nil && !g.endedSeen[s] {
			if g.held == nil || g.held.Gen != r.Gen {
				held := r
				g.held = &held
				time.AfterFunc(heldMax, func() {
					g.mu.Lock()
					defer g.mu.Unlock()
					if g.held == &held {
						g.held = nil
						g.sayGenLocked(held)
					}
				})
			}
			return
		}
	}
	if g.held != nil && g.held.Gen <= r.Gen {
		g.held = nil
	}
	g.sayGenLocked(r)
}

// sayGenLocked says r, and first every generation before it that not
// every slot reported.
func (g *generations) sayGenLocked(r record.Gen) {
	if r.Gen <= g.gen {
		return
	}
	// Every live slot is back in its program. A generation before it that
	// not every slot reported (a slot was lost as it entered) is said
	// first, so that the record has every generation.
	for gen := g.gen + 1; gen < r.Gen; gen++ {
		if early, ok := g.lines[gen]; ok {
			g.sayLocked(early)
		}
	}
	g.sayLocked(r)
}

func (g *generations) sayLocked(r record.Gen) {
	since := g.first[r.Gen]
	for _, s := range r.Lost {
		if t, ok := g.lostAt[s]; ok && t.Before(since) {
			since = t
		}
	}
	var parts []string
	defer g.goneGrewLocked()
	for _, s := range r.Lost {
		g.gone[s] = true
		why := g.lostWhy[s]
		if why == "" {
			why = strings.TrimPrefix(causeOf(r.Cause, s), fmt.Sprintf("slot %d: ", s))
		}
		g.lostLocked(s, why)
		if old := slices.Index(g.ranks, s); old >= 0 && len(r.Ranks) < len(g.ranks) {
			parts = append(parts, fmt.Sprintf("rank %d (slot %d on %s) lost: %s", old, s, g.host(s), why))
		} else if old >= 0 {
			parts = append(parts, fmt.Sprintf("rank %d (slot %d on %s) lost: %s; slot %d on %s takes rank %d", old, s, g.host(s), why, r.Ranks[old], g.host(r.Ranks[old]), old))
		} else {
			parts = append(parts, fmt.Sprintf("slot %d (a spare, on %s) lost: %s", s, g.host(s), why))
		}
	}
	shrunk := len(r.Ranks) < len(g.ranks)
	end, ok := g.complete[r.Gen]
	if !ok {
		end = g.now()
	}
	back := end.Sub(since).Milliseconds()
	g.gen, g.ranks = r.Gen, r.Ranks
	g.writeFirstLocked(true)
	g.writeLocked(r.Gen, r.Ranks, r.Spares, r.Lost, r.Cause)
	if shrunk {
		g.say("generation %d: %s; shrunk to %d ranks; back in %d ms", r.Gen, strings.Join(parts, "; "), len(r.Ranks), back)
	} else {
		g.say("generation %d: %s; back in %d ms", r.Gen, strings.Join(parts, "; "), back)
	}
}

// now is the launcher's clock for the generations' times.
func (g *generations) now() time.Time {
	if g.clock != nil {
		return g.clock()
	}
	return time.Now()
}

func causeOf(causes string, slot int) string {
	for _, c := range strings.Split(causes, "; ") {
		if strings.HasPrefix(c, fmt.Sprintf("slot %d: ", slot)) {
			return c
		}
	}
	return "lost"
}

func (g *generations) host(slot int) string {
	if slot >= 0 && slot < len(g.procs) && g.procs[slot] != nil {
		return g.procs[slot].host
	}
	return "?"
}

// badEnd notes that a process of this incarnation ended badly.
func (g *generations) badEnd() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.firstBad.IsZero() {
		g.firstBad = time.Now()
	}
}
