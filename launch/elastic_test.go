package launch

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"sperli/record"
)

// TestZombieSpareReport: a slot the job went on without (stopped past the
// silence limit, then continued) sees the links of the others end and
// reports the spare of its old generation lost — that spare now holds a
// rank, and the report must not make the launcher end it. A live slot's
// report of a spare's loss is taken, once.
func TestZombieSpareReport(t *testing.T) {
	var mu sync.Mutex
	var said []string
	g := &generations{say: func(f string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		said = append(said, fmt.Sprintf(f, a...))
	}}
	g.start("j", 0, 3, 2, make([]*rankProc, 5))
	report := func(slot int, r record.Gen) {
		r.Slot = slot
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		g.report(slot, b)
	}
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
	mu.Lock()
	defer mu.Unlock()
	n := 0
	for _, s := range said {
		if strings.Contains(s, "(a spare) lost") {
			n++
			if !strings.HasPrefix(s, "slot 4 ") {
				t.Errorf("said %q", s)
			}
		}
	}
	if n != 1 {
		t.Errorf("a spare's loss said %d times, want once: %q", n, said)
	}
}
