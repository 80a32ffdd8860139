package launch

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"sperli/record"
)

// TestZombieSpareReport: a slot the job went on without (stopped past the
// silence limit, then continued) sees the links of the others end and
// reports the spare of its old generation lost — that spare now holds a
// rank, and the report must not make the launcher end it. A live slot's
// report of a spare's loss is taken, once.
func TestZombieSpareReport(t *testing.T) {
	g, said := newTestGenerations(3, 2)
	report := func(slot int, r record.Gen) { reportTo(t, g, slot, r) }
	// Generation 1: slot 0 lost, slot 3 takes rank 0. Slot 0's process
	// has not ended (it is stopped), so the launcher holds the line.
	for _, s := range []int{1, 2, 3, 4} {
		report(s, record.Gen{Kind: "generation", Gen: 1, Ranks: []int{3, 1, 2}, Spares: []int{4}, Lost: []int{0}})
	}
	report(0, record.Gen{Kind: "spare", Gen: 0, Lost: []int{3}, Msg: "slot 3 (a spare) lost: connection closed without bye"})
	if g.replaced(3) {
		t.Fatal("a zombie's report made slot 3, rank 0 of generation 1, a replaced slot")
	}
	report(1, record.Gen{Kind: "spare", Gen: 1, Lost: []int{4}, Msg: "slot 4 (a spare) lost: connection closed without bye"})
	report(2, record.Gen{Kind: "spare", Gen: 1, Lost: []int{4}, Msg: "slot 4 (a spare) lost: connection closed without bye"})
	if !g.replaced(4) {
		t.Fatal("a live slot's report of spare 4's loss was not taken")
	}
	n := 0
	for _, s := range said.lines() {
		if strings.Contains(s, "(a spare) lost") {
			n++
			if !strings.HasPrefix(s, "slot 4 ") {
				t.Errorf("said %q", s)
			}
		}
	}
	if n != 1 {
		t.Errorf("a spare's loss said %d times, want once: %q", n, said.lines())
	}
}

// TestGenerationRuns: slots report a generation's ranks as runs (O(changes)
// a report); the launcher makes the ranks of them once, says the
// generation when every live slot reported it, and drops reports whose
// runs do not hold the generation's ranks within the job's slots.
func TestGenerationRuns(t *testing.T) {
	g, said := newTestGenerations(4, 1)
	report := func(slot int, r record.Gen) int { return reportTo(t, g, slot, r) }
	// Slot 1 lost, the spare (slot 4) takes rank 1: runs {0,1} {4,1} {2,2}.
	runs := [][2]int{{0, 1}, {4, 1}, {2, 2}}
	for _, bad := range []struct {
		name string
		runs [][2]int
		size int
	}{
		{"a run past the slots", [][2]int{{0, 1}, {4, 2}, {2, 1}}, 4},
		{"runs holding fewer ranks than the size", [][2]int{{0, 1}, {4, 1}}, 4},
		{"a run of no slot", [][2]int{{0, 0}, {0, 1}, {4, 1}, {2, 2}}, 4},
		{"a huge count", [][2]int{{0, 1 << 62}}, 4},
		{"a negative slot", [][2]int{{-1, 1}}, 4},
		{"a size past the slots", [][2]int{{0, 5}}, 6},
	} {
		if gen := report(0, record.Gen{Kind: "generation", Gen: 1, Size: bad.size, Runs: bad.runs, Lost: []int{1}}); gen != -1 {
			t.Errorf("%s: report taken for generation %d", bad.name, gen)
		}
	}
	for _, s := range []int{0, 2, 3, 4} {
		if gen := report(s, record.Gen{Kind: "generation", Gen: 1, Size: 4, Runs: runs, Spares: []int{}, Lost: []int{1}}); gen != 1 {
			t.Fatalf("slot %d's report: generation %d, want 1", s, gen)
		}
	}
	g.mu.Lock()
	ranks, gen := g.ranks, g.gen
	g.mu.Unlock()
	if gen != 1 || fmt.Sprint(ranks) != "[0 4 2 3]" {
		t.Fatalf("generation %d with ranks %v, want 1 and [0 4 2 3]", gen, ranks)
	}
	if said := said.lines(); len(said) != 1 || !strings.Contains(said[0], "slot 4 on") || !strings.Contains(said[0], "takes rank 1") {
		t.Fatalf("said %q, want the generation with slot 4 taking rank 1", said)
	}
}

// saidLines collects what a generations says.
type saidLines struct {
	mu   sync.Mutex
	said []string
}

func (s *saidLines) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.said...)
}

// newTestGenerations is the generations of a job of n ranks and spares
// spares, no process started, and what it says.
func newTestGenerations(n, spares int) (*generations, *saidLines) {
	said := &saidLines{}
	g := &generations{say: func(f string, a ...any) {
		said.mu.Lock()
		defer said.mu.Unlock()
		said.said = append(said.said, fmt.Sprintf(f, a...))
	}}
	g.start("j", 0, n, spares, make([]*rankProc, n+spares))
	return g, said
}

// reportTo hands g slot's report r, as its stream would: the generation
// it marks, or -1.
func reportTo(t *testing.T, g *generations, slot int, r record.Gen) int {
	t.Helper()
	r.Slot = slot
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	gen, _ := g.report(slot, b)
	return gen
}

// TestLossNamesTheNewestRole: a spare that takes a rank's place and is
// killed at its first call in the new generation, before every live slot
// reported that generation (so before the launcher says it), is named by
// the rank it serves in it, not as the spare it was.
func TestLossNamesTheNewestRole(t *testing.T) {
	g, _ := newTestGenerations(2, 3)
	type loss struct{ slot, rank int }
	var got []loss
	g.onLoss = func(slot, rank int, why string) { got = append(got, loss{slot, rank}) }
	g.lostProc(&rankProc{rank: 1}, "killed by signal 9 (SIGKILL)")
	reportTo(t, g, 2, record.Gen{Kind: "generation", Gen: 1, Size: 2, Runs: [][2]int{{0, 1}, {2, 1}}, Spares: []int{3, 4}, Lost: []int{1}})
	g.lostProc(&rankProc{rank: 2}, "killed by signal 9 (SIGKILL)")
	g.lostProc(&rankProc{rank: 4}, "killed by signal 9 (SIGKILL)")
	want := []loss{{1, 1}, {2, 1}, {4, -1}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("losses named (slot, rank) %v, want %v", got, want)
	}
}

// TestZombieOfAHeldGeneration: a live slot the others declared lost (a
// false loss: it was starved past the silence limit) ends by itself with
// H1611 once it learns it was left. When it ends before the launcher said
// the generation that left it — the line is held until the lost slot's
// process has ended, to say its own cause — its end is still that of a
// replaced slot, not a failure that ends the job.
func TestZombieOfAHeldGeneration(t *testing.T) {
	g, said := newTestGenerations(3, 1)
	g.procs[1] = &rankProc{rank: 1} // running: the line is held until it ends
	for _, s := range []int{0, 2, 3} {
		reportTo(t, g, s, record.Gen{Kind: "generation", Gen: 1, Size: 3, Runs: [][2]int{{0, 1}, {3, 1}, {2, 1}}, Spares: []int{}, Lost: []int{1}})
	}
	if !g.leftBehind(1) {
		t.Fatal("slot 1, named lost by every live slot's report of generation 1, is not taken as left behind")
	}
	if g.leftBehind(0) || g.leftBehind(3) {
		t.Fatal("a slot of generation 1 is taken as left behind")
	}
	if g.replaced(1) {
		t.Fatal("slot 1 is taken as replaced (to be ended) before its generation is said")
	}
	if n := len(said.lines()); n != 0 {
		t.Fatalf("the generation was said before the lost slot ended: %q", said.lines())
	}
}

// TestBackInOfAHeldGeneration: a generation whose lost slot's process has
// not ended (stopped: it never ends by itself) is said later, with the
// launcher's own sight of the loss; its "back in" is still the time from
// its first report to the last live slot's, not to when the line is said.
func TestBackInOfAHeldGeneration(t *testing.T) {
	g, said := newTestGenerations(2, 1)
	at := time.Unix(1000, 0)
	g.clock = func() time.Time { return at }
	g.procs[1] = &rankProc{rank: 1} // stopped: the line is held
	gen1 := record.Gen{Kind: "generation", Gen: 1, Size: 2, Runs: [][2]int{{0, 1}, {2, 1}}, Spares: []int{}, Lost: []int{1}}
	reportTo(t, g, 0, gen1)
	at = at.Add(7 * time.Millisecond)
	reportTo(t, g, 2, gen1)
	if n := len(said.lines()); n != 0 {
		t.Fatalf("said before the lost slot's process ended: %q", said.lines())
	}
	at = at.Add(9 * time.Second)
	g.lostProc(&rankProc{rank: 1}, "killed by signal 9 (SIGKILL)")
	g.procEnded(&rankProc{rank: 1})
	lines := said.lines()
	if want := "generation 1: rank 1 (slot 1 on ) lost: killed by signal 9 (SIGKILL); slot 2 on ? takes rank 1; back in 7 ms"; len(lines) != 1 || lines[0] != want {
		t.Fatalf("said %q, want generation 1 with the launcher's cause and back in 7 ms", lines)
	}
}
