package workq

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sperli/wire"
)

// The lease machines (machine.go) step by step, as SPEC §19 and
// docs/workqueue.md describe them: no network, no goroutine.

// mtRec is a log record; a publication carries its result, an execution
// only its SHA-256.
func mtRec(kind byte, gen uint32, lease uint64, id, slot int, res string) record {
	r := record{Kind: kind, Fence: fence{Gen: gen, Lease: lease}, Item: id, Slot: slot, Sum: sha256.Sum256([]byte(res))}
	if kind == wire.WorkPublished {
		r.Result = []byte(res)
	}
	return r
}

func mtReq(from int) event { return request{from} }

func mtDone(from, slot int, gen uint32, lease uint64, id int, res string) event {
	return done{from: from, slot: slot, f: fence{Gen: gen, Lease: lease}, id: id, result: []byte(res)}
}

func mtGarbled(from int, why string) event { return garbled{from, why} }

func mtLease(to int, gen uint32, lease uint64, id int) action {
	return sendLease{to, fence{Gen: gen, Lease: lease}, id}
}

func mtEnd(to int) action { return sendEnd{to} }

func mtPub(gen uint32, lease uint64, id, slot int, res string) action {
	return logRecord{mtRec(wire.WorkPublished, gen, lease, id, slot, res)}
}

func mtExec(gen uint32, lease uint64, id, slot int, res string) action {
	return logRecord{mtRec(wire.WorkExecuted, gen, lease, id, slot, res)}
}

// mtActs is a compact form of actions, for messages.
func mtActs(acts []action) string {
	var s []string
	for _, a := range acts {
		switch a := a.(type) {
		case logRecord:
			s = append(s, "log "+mtRecString(a.rec))
		case write:
			s = append(s, "write "+mtRecString(a.rec))
		case sendLease:
			s = append(s, fmt.Sprintf("lease %d (%d, %d) item %d", a.to, a.f.Gen, a.f.Lease, a.id))
		case sendEnd:
			s = append(s, fmt.Sprintf("end %d", a.to))
		case refuse:
			s = append(s, fmt.Sprintf("refuse %d: %s", a.from, a.why))
		case ack:
			s = append(s, "ack")
		default:
			s = append(s, fmt.Sprintf("%#v", a))
		}
	}
	return "[" + strings.Join(s, "; ") + "]"
}

func mtRecString(r record) string {
	return fmt.Sprintf("%c (%d, %d) item %d slot %d sum %x result %q(nil %v)", r.Kind, r.Fence.Gen, r.Fence.Lease, r.Item, r.Slot, r.Sum[:4], r.Result, r.Result == nil)
}

// mtSame reports whether got is want (no action and no action are the
// same, nil or empty).
func mtSame(got, want []action) bool {
	return len(got) == 0 && len(want) == 0 || reflect.DeepEqual(got, want)
}

// mtCheckRefusal checks that got is one refusal of rank from whose why
// says says.
func mtCheckRefusal(t *testing.T, got []action, from int, says string) {
	t.Helper()
	if len(got) != 1 {
		t.Fatalf("got %s, want one refusal of rank %d saying %q", mtActs(got), from, says)
	}
	r, ok := got[0].(refuse)
	if !ok || r.from != from || !strings.Contains(r.why, says) {
		t.Fatalf("got %s, want a refusal of rank %d saying %q", mtActs(got), from, says)
	}
}

// mtMasterState is a copy of a master's state, to compare.
func mtMasterState(m *master) master {
	c := *m
	c.holds, c.asked, c.ended = maps.Clone(m.holds), maps.Clone(m.asked), maps.Clone(m.ended)
	c.pending, c.parked = slices.Clone(m.pending), slices.Clone(m.parked)
	return c
}

// mtStep is one event and what the master answers: want exactly, or
// (says set) a refusal of the event's rank whose why says says, which
// changes nothing. over is the machine's over() after it.
type mtStep struct {
	ev   event
	want []action
	says string
	over bool
}

type mtMasterCase struct {
	name                        string
	gen                         uint32
	items, group, groups, first int
	size                        int
	log                         []record // the master's log before it starts
	steps                       []mtStep
}

// mtGroup0 is the master of group 0 of 2 in generation 1 on ranks 0 to
// 3 of 6 items: its shard is items 0, 2 and 4.
func mtGroup0(name string, steps ...mtStep) mtMasterCase {
	return mtMasterCase{name: name, gen: 1, items: 6, group: 0, groups: 2, first: 0, size: 4, steps: steps}
}

// mtHeld is ranks 1 and 2 holding leases (1, 1) of item 0 and (1, 2) of
// item 2 (mtGroup0).
var mtHeld = []mtStep{
	{ev: mtReq(1), want: []action{mtLease(1, 1, 1, 0)}},
	{ev: mtReq(2), want: []action{mtLease(2, 1, 2, 2)}},
}

func mtThen(prefix []mtStep, steps ...mtStep) []mtStep {
	return append(slices.Clone(prefix), steps...)
}

func mtMasterCases() []mtMasterCase {
	// The refusals' whys, as machine.go words them.
	noMaster := func(id int, gen uint32, lease uint64) string {
		return fmt.Sprintf("a done of item %d with fence (%d, %d), which no master gave it", id, gen, lease)
	}
	const waits = "a message while it waits for a reply"
	const afterEnd = "after the end"
	return []mtMasterCase{
		// What an honest group does.
		{name: "one group: leases in order, each done published and answered, the end to every rank",
			gen: 1, items: 3, group: 0, groups: 1, first: 0, size: 2, steps: []mtStep{
				{ev: mtReq(0), want: []action{mtLease(0, 1, 1, 0)}},
				{ev: mtReq(1), want: []action{mtLease(1, 1, 2, 1)}},
				{ev: mtDone(1, 5, 1, 2, 1, "b"), want: []action{mtPub(1, 2, 1, 5, "b"), mtLease(1, 1, 3, 2)}},
				// Nothing left to lease, one lease out: rank 0 is parked.
				{ev: mtDone(0, 4, 1, 1, 0, "a"), want: []action{mtPub(1, 1, 0, 4, "a")}},
				{ev: mtDone(1, 5, 1, 3, 2, "c"), want: []action{mtPub(1, 3, 2, 5, "c"), mtEnd(1), mtEnd(0)}, over: true},
			}},
		{name: "group 1 of 3 leases only its shard (items 1, 4, 7) to its ranks 3 and 4",
			gen: 0, items: 8, group: 1, groups: 3, first: 3, size: 2, steps: []mtStep{
				{ev: mtReq(4), want: []action{mtLease(4, 0, 1, 1)}},
				{ev: mtReq(3), want: []action{mtLease(3, 0, 2, 4)}},
				{ev: mtDone(4, 9, 0, 1, 1, "x"), want: []action{mtPub(0, 1, 1, 9, "x"), mtLease(4, 0, 3, 7)}},
				{ev: mtDone(3, 8, 0, 2, 4, "y"), want: []action{mtPub(0, 2, 4, 8, "y")}},
				{ev: mtDone(4, 9, 0, 3, 7, "z"), want: []action{mtPub(0, 3, 7, 9, "z"), mtEnd(4), mtEnd(3)}, over: true},
			}},
		{name: "an empty result is published as an empty result",
			gen: 0, items: 1, group: 0, groups: 1, first: 0, size: 1, steps: []mtStep{
				{ev: mtReq(0), want: []action{mtLease(0, 0, 1, 0)}},
				{ev: mtDone(0, 0, 0, 1, 0, ""), want: []action{logRecord{record{Kind: wire.WorkPublished, Fence: fence{Gen: 0, Lease: 1}, Sum: sha256.Sum256(nil), Result: []byte{}}}, mtEnd(0)}, over: true},
			}},
		{name: "numbering goes on after the log's fences of its generation; published items are not leased again",
			gen: 2, items: 6, group: 0, groups: 2, first: 0, size: 2,
			log: []record{
				mtRec(wire.WorkPublished, 2, 5, 2, 1, "b"),
				mtRec(wire.WorkExecuted, 2, 9, 0, 1, "a0"),
				mtRec(wire.WorkPublished, 1, 40, 4, 0, "c"),
				mtRec(wire.WorkExecuted, 3, 70, 0, 0, "a1"), // another generation's: not its numbers
			},
			steps: []mtStep{
				{ev: mtReq(1), want: []action{mtLease(1, 2, 10, 0)}},
				{ev: mtReq(0)}, // parked: items 2 and 4 are published
				{ev: mtDone(1, 1, 2, 10, 0, "a"), want: []action{mtPub(2, 10, 0, 1, "a"), mtEnd(1), mtEnd(0)}, over: true},
			}},
		{name: "a generation with no fence in the log numbers from 1",
			gen: 2, items: 4, group: 0, groups: 1, first: 0, size: 1,
			log: []record{mtRec(wire.WorkPublished, 1, 7, 0, 0, "a"), mtRec(wire.WorkExecuted, 1, 8, 2, 0, "c")},
			steps: []mtStep{
				{ev: mtReq(0), want: []action{mtLease(0, 2, 1, 1)}},
				{ev: mtDone(0, 0, 2, 1, 1, "b"), want: []action{mtPub(2, 1, 1, 0, "b"), mtLease(0, 2, 2, 2)}},
				{ev: mtDone(0, 0, 2, 2, 2, "c"), want: []action{mtPub(2, 2, 2, 0, "c"), mtLease(0, 2, 3, 3)}},
				{ev: mtDone(0, 0, 2, 3, 3, "d"), want: []action{mtPub(2, 3, 3, 0, "d"), mtEnd(0)}, over: true},
			}},
		{name: "a shard the log holds published ends at each rank's first request",
			gen: 1, items: 4, group: 1, groups: 2, first: 2, size: 2,
			log: []record{mtRec(wire.WorkPublished, 0, 1, 1, 2, "b"), mtRec(wire.WorkPublished, 0, 2, 3, 3, "d")},
			steps: []mtStep{
				{ev: mtReq(3), want: []action{mtEnd(3)}},
				{ev: mtReq(2), want: []action{mtEnd(2)}, over: true},
			}},
		{name: "an empty shard (more groups than items) ends at once",
			gen: 0, items: 1, group: 1, groups: 2, first: 1, size: 1, steps: []mtStep{
				{ev: mtReq(1), want: []action{mtEnd(1)}, over: true},
			}},
		{name: "stale dones (earlier generations) are counted, not published, and answered with a lease",
			gen: 3, items: 2, group: 0, groups: 1, first: 0, size: 2, steps: []mtStep{
				{ev: mtDone(1, 7, 2, 4, 1, "old"), want: []action{mtExec(2, 4, 1, 7, "old"), mtLease(1, 3, 1, 0)}},
				{ev: mtDone(0, 6, 1, 1, 1, "older"), want: []action{mtExec(1, 1, 1, 6, "older"), mtLease(0, 3, 2, 1)}},
				{ev: mtDone(1, 7, 3, 1, 0, "a"), want: []action{mtPub(3, 1, 0, 7, "a")}},
				{ev: mtDone(0, 6, 3, 2, 1, "b"), want: []action{mtPub(3, 2, 1, 6, "b"), mtEnd(0), mtEnd(1)}, over: true},
			}},
		{name: "a stale done of an item the log holds published is counted, and the item is not leased",
			gen: 2, items: 2, group: 0, groups: 1, first: 0, size: 1,
			log: []record{mtRec(wire.WorkPublished, 1, 1, 0, 0, "a")},
			steps: []mtStep{
				{ev: mtDone(0, 3, 1, 2, 0, "dup"), want: []action{mtExec(1, 2, 0, 3, "dup"), mtLease(0, 2, 1, 1)}},
				{ev: mtDone(0, 3, 2, 1, 1, "b"), want: []action{mtPub(2, 1, 1, 3, "b"), mtEnd(0)}, over: true},
			}},
		{name: "ranks that ask when nothing is left are parked, and all get the end when the shard is published",
			gen: 0, items: 1, group: 0, groups: 1, first: 0, size: 4, steps: []mtStep{
				{ev: mtReq(2), want: []action{mtLease(2, 0, 1, 0)}},
				{ev: mtReq(0)},
				{ev: mtReq(3)},
				{ev: mtReq(1)},
				{ev: mtDone(2, 2, 0, 1, 0, "r"), want: []action{mtPub(0, 1, 0, 2, "r"), mtEnd(2), mtEnd(0), mtEnd(3), mtEnd(1)}, over: true},
			}},
		{name: "over only once every rank was told the end",
			gen: 0, items: 1, group: 0, groups: 1, first: 0, size: 3, steps: []mtStep{
				{ev: mtReq(0), want: []action{mtLease(0, 0, 1, 0)}},
				{ev: mtDone(0, 0, 0, 1, 0, "r"), want: []action{mtPub(0, 1, 0, 0, "r"), mtEnd(0)}},
				{ev: mtReq(1), want: []action{mtEnd(1)}},
				{ev: mtReq(2), want: []action{mtEnd(2)}, over: true},
			}},

		// What no honest rank sends (H1627).
		{name: "a rank below the group", gen: 0, items: 6, group: 1, groups: 2, first: 3, size: 3, steps: []mtStep{
			{ev: mtReq(2), says: "a message to the master of group 1 (ranks 3 to 5)"},
		}},
		{name: "a rank above the group", gen: 0, items: 6, group: 1, groups: 2, first: 3, size: 3, steps: []mtStep{
			{ev: mtDone(6, 6, 0, 1, 1, "r"), says: "a message to the master of group 1 (ranks 3 to 5)"},
		}},
		{name: "a garbled message from outside the group is refused as outside", gen: 0, items: 6, group: 0, groups: 2, first: 0, size: 3, steps: []mtStep{
			{ev: mtGarbled(3, "bad bytes"), says: "a message to the master of group 0 (ranks 0 to 2)"},
		}},
		mtGroup0("a parked rank's request", mtThen(mtHeld,
			mtStep{ev: mtReq(0), want: []action{mtLease(0, 1, 3, 4)}},
			mtStep{ev: mtReq(3)},
			mtStep{ev: mtReq(3), says: waits})...),
		mtGroup0("a parked rank's done", mtThen(mtHeld,
			mtStep{ev: mtReq(0), want: []action{mtLease(0, 1, 3, 4)}},
			mtStep{ev: mtReq(3)},
			mtStep{ev: mtDone(3, 3, 0, 1, 0, "r"), says: waits})...),
		mtGroup0("a parked rank's garbled message", mtThen(mtHeld,
			mtStep{ev: mtReq(0), want: []action{mtLease(0, 1, 3, 4)}},
			mtStep{ev: mtReq(3)},
			mtStep{ev: mtGarbled(3, "a request of 0 bytes"), says: waits})...),
		{name: "a request after the end", gen: 0, items: 1, group: 0, groups: 1, first: 0, size: 2, steps: []mtStep{
			{ev: mtReq(0), want: []action{mtLease(0, 0, 1, 0)}},
			{ev: mtReq(1)},
			{ev: mtDone(0, 0, 0, 1, 0, "r"), want: []action{mtPub(0, 1, 0, 0, "r"), mtEnd(0), mtEnd(1)}, over: true},
			{ev: mtReq(1), says: afterEnd, over: true},
		}},
		{name: "its done again after the end", gen: 0, items: 1, group: 0, groups: 1, first: 0, size: 2, steps: []mtStep{
			{ev: mtReq(0), want: []action{mtLease(0, 0, 1, 0)}},
			{ev: mtDone(0, 0, 0, 1, 0, "r"), want: []action{mtPub(0, 1, 0, 0, "r"), mtEnd(0)}},
			{ev: mtDone(0, 0, 0, 1, 0, "r"), says: afterEnd},
		}},
		mtGroup0("a request while holding", mtThen(mtHeld,
			mtStep{ev: mtReq(1), says: "a request while it holds item 0"})...),
		mtGroup0("a done of a current fence it was not given", mtThen(mtHeld,
			mtStep{ev: mtDone(0, 0, 1, 1, 0, "r"), says: noMaster(0, 1, 1) + " (generation 1, 2 leases)"})...),
		mtGroup0("a done of another rank's lease", mtThen(mtHeld,
			mtStep{ev: mtDone(2, 2, 1, 1, 0, "r"), says: noMaster(0, 1, 1)})...),
		mtGroup0("a done of its lease, already done", mtThen(mtHeld,
			mtStep{ev: mtDone(1, 1, 1, 1, 0, "a"), want: []action{mtPub(1, 1, 0, 1, "a"), mtLease(1, 1, 3, 4)}},
			mtStep{ev: mtDone(1, 1, 1, 1, 0, "a"), says: noMaster(0, 1, 1) + " (generation 1, 3 leases)"})...),
		mtGroup0("a done of its lease's number with another item", mtThen(mtHeld,
			mtStep{ev: mtDone(1, 1, 1, 1, 2, "r"), says: noMaster(2, 1, 1)})...),
		mtGroup0("a done of its item with a lease number never given", mtThen(mtHeld,
			mtStep{ev: mtDone(1, 1, 1, 7, 0, "r"), says: noMaster(0, 1, 7)})...),
		mtGroup0("a done of lease number 0", mtThen(mtHeld,
			mtStep{ev: mtDone(0, 0, 1, 0, 0, "r"), says: noMaster(0, 1, 0)})...),
		mtGroup0("a done of a future generation by its holder", mtThen(mtHeld,
			mtStep{ev: mtDone(1, 1, 2, 1, 0, "r"), says: noMaster(0, 2, 1)})...),
		mtGroup0("a done of a future generation by a rank that holds nothing",
			mtStep{ev: mtDone(3, 3, 2, 1, 0, "r"), says: noMaster(0, 2, 1) + " (generation 1, 0 leases)"}),
		mtGroup0("a stale done while holding", mtThen(mtHeld,
			mtStep{ev: mtDone(1, 1, 0, 1, 0, "r"), says: noMaster(0, 0, 1)})...),
		mtGroup0("a stale done of an item past the items",
			mtStep{ev: mtDone(0, 0, 0, 1, 6, "r"), says: noMaster(6, 0, 1)}),
		mtGroup0("a stale done of a negative item",
			mtStep{ev: mtDone(0, 0, 0, 1, -2, "r"), says: noMaster(-2, 0, 1)}),
		mtGroup0("a stale done of an item of another shard",
			mtStep{ev: mtDone(0, 0, 0, 1, 3, "r"), says: noMaster(3, 0, 1)}),
		mtGroup0("a current done of an item of another shard", mtThen(mtHeld,
			mtStep{ev: mtDone(1, 1, 1, 1, 1, "r"), says: noMaster(1, 1, 1)})...),
		mtGroup0("a garbled message says wire's why", mtThen(mtHeld,
			mtStep{ev: mtGarbled(1, "a request of 3 bytes that is no request or done"), says: "a request of 3 bytes that is no request or done"})...),
		mtGroup0("a garbled message from a rank that holds nothing",
			mtStep{ev: mtGarbled(3, "a done of item 9 with fence (1, 1), which no master gave it (6 items)"), says: "a done of item 9"}),
	}
}

func TestMasterStep(t *testing.T) {
	for _, tc := range mtMasterCases() {
		t.Run(tc.name, func(t *testing.T) {
			l := newLog([32]byte{})
			for _, r := range tc.log {
				l.add(r)
			}
			m := newMaster(tc.gen, tc.items, tc.group, tc.groups, tc.first, tc.size, l)
			if m.over() {
				t.Fatalf("over() before any step")
			}
			for i, st := range tc.steps {
				before := mtMasterState(m)
				got := m.Step(st.ev)
				if st.says != "" {
					mtCheckRefusal(t, got, st.ev.rank(), st.says)
					if after := mtMasterState(m); !reflect.DeepEqual(after, before) {
						t.Fatalf("step %d (%+v): a refusal changed the machine: %+v, was %+v", i, st.ev, after, before)
					}
				} else if !mtSame(got, st.want) {
					t.Fatalf("step %d (%+v):\n got %s\nwant %s", i, st.ev, mtActs(got), mtActs(st.want))
				}
				if m.over() != st.over {
					t.Fatalf("step %d (%+v): over() = %v, want %v", i, st.ev, m.over(), st.over)
				}
			}
		})
	}
}

// TestMasterPublishesACopy: the published record's result is the
// master's, not the done's bytes (which alias the frame the driver got).
func TestMasterPublishesACopy(t *testing.T) {
	m := newMaster(0, 1, 0, 1, 0, 1, newLog([32]byte{}))
	if got, want := m.Step(mtReq(0)), []action{mtLease(0, 0, 1, 0)}; !mtSame(got, want) {
		t.Fatalf("got %s, want %s", mtActs(got), mtActs(want))
	}
	res := []byte("result")
	got := m.Step(done{from: 0, slot: 0, f: fence{Gen: 0, Lease: 1}, id: 0, result: res})
	if len(got) != 2 {
		t.Fatalf("got %s, want a record and the end", mtActs(got))
	}
	rec := got[0].(logRecord).rec
	copy(res, "XXXXXX")
	if string(rec.Result) != "result" || rec.Sum != sha256.Sum256([]byte("result")) {
		t.Fatalf("the record's result is %q (sum %x) after the done's bytes changed, want %q", rec.Result, rec.Sum[:4], "result")
	}
}

// TestMasterNeverLeasesTwice: whatever order an honest group's ranks ask
// and finish in, every item of the shard the log lacks is leased once,
// with increasing lease numbers, published once, and every rank told the
// end once.
func TestMasterNeverLeasesTwice(t *testing.T) {
	const items, groups, size = 23, 3, 4
	for group := 0; group < groups; group++ {
		for order := 0; order < 8; order++ {
			l := newLog([32]byte{})
			l.add(mtRec(wire.WorkPublished, 5, 3, group, 0, "known")) // item group is published
			m := newMaster(5, items, group, groups, 10, size, l)
			leased := map[int]bool{}
			published := map[int]bool{}
			ended := map[int]bool{}
			held := map[int]sendLease{}
			last := uint64(3)
			var queue []int // ranks with nothing held and no request out
			for r := 10; r < 10+size; r++ {
				queue = append(queue, r)
			}
			take := func(acts []action) {
				for _, a := range acts {
					switch a := a.(type) {
					case sendLease:
						if leased[a.id] || a.id%groups != group || a.id == group || a.f.Gen != 5 || a.f.Lease != last+1 {
							t.Fatalf("group %d order %d: lease %+v (last lease %d, leased %v)", group, order, a, last, leased)
						}
						last = a.f.Lease
						leased[a.id] = true
						held[a.to] = a
					case sendEnd:
						if ended[a.to] {
							t.Fatalf("group %d order %d: rank %d told the end twice", group, order, a.to)
						}
						ended[a.to] = true
					case logRecord:
						if a.rec.Kind != wire.WorkPublished || published[a.rec.Item] {
							t.Fatalf("group %d order %d: record %s", group, order, mtRecString(a.rec))
						}
						published[a.rec.Item] = true
					case refuse:
						t.Fatalf("group %d order %d: refused an honest rank: %s", group, order, a.why)
					}
				}
			}
			for step := 0; !m.over(); step++ {
				if step > 1000 {
					t.Fatalf("group %d order %d: no end after %d steps", group, order, step)
				}
				// Requests first, then a done of a holder picked by order.
				if len(queue) > 0 {
					r := queue[0]
					queue = queue[1:]
					take(m.Step(mtReq(r)))
					continue
				}
				var holders []int
				for r := range held {
					holders = append(holders, r)
				}
				if len(holders) == 0 {
					t.Fatalf("group %d order %d: not over and nobody holds a lease", group, order)
				}
				slices.Sort(holders)
				r := holders[(step*order+order)%len(holders)]
				a := held[r]
				delete(held, r)
				take(m.Step(mtDone(r, r, a.f.Gen, a.f.Lease, a.id, fmt.Sprint(a.id))))
			}
			want := 0
			for id := group; id < items; id += groups {
				want++
			}
			if len(published) != want-1 || len(ended) != size || len(held) != 0 {
				t.Fatalf("group %d order %d: %d published of %d, %d ranks ended of %d, %d leases out", group, order, len(published), want-1, len(ended), size, len(held))
			}
		}
	}
}

// ktStep is one message to a keeper and its answer: want exactly, or
// (says set) a refusal of from whose why says says, which changes
// neither the keeper nor its log.
type ktStep struct {
	from int
	msg  []byte
	want []action
	says string
	over bool
}

type ktCase struct {
	name  string
	k     func() *keeper
	steps []ktStep
	// check, when set, checks the log after the steps.
	check func(t *testing.T, l *qlog)
}

func ktRecMsg(r record) []byte { return wire.AppendWorkRecord(nil, r) }

var ktEnd = []byte{wire.WorkEnd}

// ktLogState is a copy of a log's state, to compare.
func ktLogState(l *qlog) qlog {
	c := *l
	c.pub, c.exec, c.own, c.disk = maps.Clone(l.pub), maps.Clone(l.exec), maps.Clone(l.own), maps.Clone(l.disk)
	c.recs = slices.Clone(l.recs)
	return c
}

// ktOwn is the buddy's own execution: slot 3 computed item 4 with the
// fence (1, 4), result "mine".
var ktOwn = mtRec(wire.WorkPublished, 1, 4, 4, 3, "mine")

// ktDisk is a record of the log on disk that names slot 3 in generation
// 2, which this process did not compute (an earlier process did).
var ktDisk = mtRec(wire.WorkPublished, 2, 9, 2, 3, "disk")

// ktBuddy is the buddy (rank 1, slot 3) of group 0 of 2 (master rank 0)
// on 4 ranks of a job of 4 slots, with 6 items, which started the queue
// in generation 1.
func ktBuddy() *keeper {
	l := newLog([32]byte{})
	l.since = 1
	l.own[key{ktOwn.Fence, ktOwn.Item}] = ktOwn.Sum
	l.disk[keyOf(ktDisk)] = true
	return &keeper{items: 6, slots: 4, groups: 2, size: 4, self: 3, group: 0, master: 0, log: l, ended: map[int]bool{}}
}

// ktCollector is rank 0's collector (slot 0) of 3 groups on 9 ranks
// (masters 0, 3 and 6), 9 items, 9 slots.
func ktCollector() *keeper {
	return &keeper{items: 9, slots: 9, groups: 3, size: 9, self: 0, group: -1, master: 0, log: newLog([32]byte{}), ended: map[int]bool{}}
}

// ktCollector5 is rank 0's collector of 2 groups on 5 ranks (masters 0
// and 3: groups of 3 and 2).
func ktCollector5() *keeper {
	return &keeper{items: 4, slots: 5, groups: 2, size: 5, self: 0, group: -1, master: 0, log: newLog([32]byte{}), ended: map[int]bool{}}
}

func ktCases() []ktCase {
	good := mtRec(wire.WorkPublished, 1, 1, 0, 2, "a")
	goodMsg := ktRecMsg(good)
	edit := func(b []byte, f func(b []byte)) []byte { c := bytes.Clone(b); f(c); return c }
	const notMaster = "which is not the master of group 0, or after its end"
	const parse = "a log record that does not parse or is not of its shard ("
	const disk = "a record for the log on disk that does not parse or is not of its shard ("
	const onlyMaster = "a record for the log on disk, which only a master sends, before its end"
	const forged = "which never gave that result"
	xWithResult := ktRecMsg(record{Kind: wire.WorkExecuted, Fence: fence{Gen: 1, Lease: 1}, Item: 0, Slot: 2, Sum: sha256.Sum256([]byte("r")), Result: []byte("r")})
	return []ktCase{
		{name: "the buddy acks and logs its master's records, and is over at its end", k: ktBuddy, steps: []ktStep{
			{from: 0, msg: goodMsg, want: []action{ack{}}},
			{from: 0, msg: ktRecMsg(mtRec(wire.WorkExecuted, 1, 2, 2, 0, "x")), want: []action{ack{}}},
			{from: 0, msg: ktRecMsg(ktOwn), want: []action{ack{}}},                                       // its own execution
			{from: 0, msg: ktRecMsg(mtRec(wire.WorkExecuted, 0, 3, 2, 3, "y")), want: []action{ack{}}},   // its slot before it started the queue
			{from: 0, msg: ktRecMsg(ktDisk), want: []action{ack{}}},                                      // the log on disk's
			{from: 0, msg: ktRecMsg(mtRec(wire.WorkPublished, 1, 7, 0, 1, "a2")), want: []action{ack{}}}, // item 0 again: an execution
			{from: 0, msg: ktRecMsg(mtRec(wire.WorkPublished, 1, 1, 0, 2, "a")), want: []action{ack{}}},  // the same record again
			{from: 0, msg: ktEnd, over: true},
		}, check: func(t *testing.T, l *qlog) {
			if len(l.pub) != 3 || string(l.pub[0].Result) != "a" || string(l.pub[4].Result) != "mine" || string(l.pub[2].Result) != "disk" {
				t.Fatalf("published %v, want items 0, 2 and 4 with their first results", l.pub)
			}
			if st := l.stats(6); st.Executed != 6 || st.Duplicates != 3 {
				t.Fatalf("stats %+v, want 6 executions, 3 of them duplicates", st)
			}
		}},
		{name: "the buddy is not over before its master's end", k: ktBuddy, steps: []ktStep{
			{from: 0, msg: goodMsg, want: []action{ack{}}},
		}},
		{name: "the buddy refuses a record from a rank not its master", k: ktBuddy, steps: []ktStep{
			{from: 2, msg: goodMsg, says: "a log record from rank 2, " + notMaster},
		}},
		{name: "the buddy refuses a record from itself", k: ktBuddy, steps: []ktStep{
			{from: 1, msg: goodMsg, says: "a log record from rank 1, " + notMaster},
		}},
		{name: "the buddy refuses an end from a rank not its master", k: ktBuddy, steps: []ktStep{
			{from: 3, msg: ktEnd, says: "a log record from rank 3, " + notMaster},
		}},
		{name: "the buddy refuses a record after its master's end", k: ktBuddy, steps: []ktStep{
			{from: 0, msg: ktEnd, over: true},
			{from: 0, msg: goodMsg, says: "a log record from rank 0, " + notMaster, over: true},
		}},
		{name: "the buddy refuses a second end", k: ktBuddy, steps: []ktStep{
			{from: 0, msg: ktEnd, over: true},
			{from: 0, msg: ktEnd, says: notMaster, over: true},
		}},
		{name: "the buddy refuses a record of another shard", k: ktBuddy, steps: []ktStep{
			{from: 0, msg: ktRecMsg(mtRec(wire.WorkPublished, 1, 1, 1, 2, "b")), says: parse + "item 1 is of shard 1, not 0)"},
		}},
		{name: "the buddy refuses an empty message", k: ktBuddy, steps: []ktStep{
			{from: 0, msg: nil, says: parse + "a log record cut short (0 bytes))"},
		}},
		{name: "the buddy refuses an end with a byte after it", k: ktBuddy, steps: []ktStep{
			{from: 0, msg: []byte{wire.WorkEnd, 0}, says: parse + "a log record cut short (2 bytes))"},
		}},
		{name: "the buddy refuses a record cut in its head", k: ktBuddy, steps: []ktStep{
			{from: 0, msg: goodMsg[:wire.WorkRecordHead-1], says: parse + fmt.Sprintf("a log record cut short (%d bytes))", wire.WorkRecordHead-1)},
		}},
		{name: "the buddy refuses a record cut in its result", k: ktBuddy, steps: []ktStep{
			{from: 0, msg: goodMsg[:len(goodMsg)-1], says: parse + "a P log record with a result of 1 bytes (0 left))"},
		}},
		{name: "the buddy refuses a record with bytes after it", k: ktBuddy, steps: []ktStep{
			{from: 0, msg: append(bytes.Clone(goodMsg), 0), says: parse + fmt.Sprintf("a log message of %d bytes after its record of %d)", len(goodMsg)+1, len(goodMsg))},
		}},
		{name: "the buddy refuses two records in one message", k: ktBuddy, steps: []ktStep{
			{from: 0, msg: append(bytes.Clone(goodMsg), goodMsg...), says: parse + fmt.Sprintf("a log message of %d bytes after its record of %d)", 2*len(goodMsg), len(goodMsg))},
		}},
		{name: "the buddy refuses a record of an unknown kind", k: ktBuddy, steps: []ktStep{
			{from: 0, msg: edit(goodMsg, func(b []byte) { b[0] = 'Q' }), says: parse + "a log record of kind 0x51)"},
		}},
		{name: "the buddy refuses a record of an item past the items", k: ktBuddy, steps: []ktStep{
			{from: 0, msg: edit(goodMsg, func(b []byte) { b[16] = 6 }), says: parse + "a log record of item 6 by slot 2 (6 items, 4 slots))"},
		}},
		{name: "the buddy refuses a record of a slot past the job's", k: ktBuddy, steps: []ktStep{
			{from: 0, msg: edit(goodMsg, func(b []byte) { b[20] = 4 }), says: parse + "a log record of item 0 by slot 4 (6 items, 4 slots))"},
		}},
		{name: "the buddy refuses a record whose result is not its SHA-256", k: ktBuddy, steps: []ktStep{
			{from: 0, msg: edit(goodMsg, func(b []byte) { b[wire.WorkRecordHead] ^= 1 }), says: parse + "a log record of item 0 whose result does not match its SHA-256)"},
		}},
		{name: "the buddy refuses an execution with a result", k: ktBuddy, steps: []ktStep{
			{from: 0, msg: xWithResult, says: parse + "a X log record with a result of 1 bytes (1 left))"},
		}},
		{name: "the buddy refuses a publication naming its slot that it never computed", k: ktBuddy, steps: []ktStep{
			{from: 0, msg: ktRecMsg(mtRec(wire.WorkPublished, 1, 5, 0, 3, "forged")), says: "a log record of item 0 with fence (1, 5) computed by slot 3, this one, " + forged},
		}},
		{name: "the buddy refuses its own execution with another result", k: ktBuddy, steps: []ktStep{
			{from: 0, msg: ktRecMsg(mtRec(wire.WorkPublished, 1, 4, 4, 3, "other")), says: "item 4 with fence (1, 4) computed by slot 3, this one, " + forged},
		}},
		{name: "the buddy refuses an execution naming its slot that it never computed", k: ktBuddy, steps: []ktStep{
			{from: 0, msg: ktRecMsg(mtRec(wire.WorkExecuted, 3, 1, 2, 3, "x")), says: "item 2 with fence (3, 1) computed by slot 3, this one, " + forged},
		}},
		{name: "the buddy refuses a record of the log on disk's key with another result", k: ktBuddy, steps: []ktStep{
			{from: 0, msg: ktRecMsg(mtRec(wire.WorkPublished, 2, 9, 2, 3, "not the disk's")), says: "item 2 with fence (2, 9) computed by slot 3, this one, " + forged},
		}},
		{name: "a refusal leaves the buddy's log as it was", k: ktBuddy, steps: []ktStep{
			{from: 0, msg: goodMsg, want: []action{ack{}}},
			{from: 0, msg: ktRecMsg(mtRec(wire.WorkPublished, 1, 5, 2, 3, "forged")), says: forged},
		}, check: func(t *testing.T, l *qlog) {
			if _, ok := l.pub[2]; ok || len(l.pub) != 1 || len(l.exec) != 1 {
				t.Fatalf("log %v, want item 0 only", l.pub)
			}
		}},

		{name: "the collector writes the other masters' records, logs none, and is over at their ends", k: ktCollector, steps: []ktStep{
			{from: 3, msg: ktRecMsg(mtRec(wire.WorkPublished, 0, 1, 1, 4, "a")), want: []action{write{mtRec(wire.WorkPublished, 0, 1, 1, 4, "a")}}},
			{from: 6, msg: ktRecMsg(mtRec(wire.WorkExecuted, 0, 2, 5, 7, "b")), want: []action{write{mtRec(wire.WorkExecuted, 0, 2, 5, 7, "b")}}},
			{from: 3, msg: ktRecMsg(mtRec(wire.WorkPublished, 0, 3, 7, 0, "c")), says: forged}, // names slot 0, the collector's
			{from: 3, msg: ktEnd},
			{from: 6, msg: ktRecMsg(mtRec(wire.WorkPublished, 0, 4, 8, 8, "d")), want: []action{write{mtRec(wire.WorkPublished, 0, 4, 8, 8, "d")}}},
			{from: 6, msg: ktEnd, over: true},
		}, check: func(t *testing.T, l *qlog) {
			if len(l.pub) != 0 || len(l.exec) != 0 {
				t.Fatalf("the collector logged %v, want nothing (it writes)", l.pub)
			}
		}},
		{name: "the collector of unequal groups: rank 3 is the other master", k: ktCollector5, steps: []ktStep{
			{from: 2, msg: ktRecMsg(mtRec(wire.WorkPublished, 0, 1, 1, 2, "a")), says: onlyMaster},
			{from: 4, msg: ktRecMsg(mtRec(wire.WorkPublished, 0, 1, 1, 2, "a")), says: onlyMaster},
			{from: 3, msg: ktRecMsg(mtRec(wire.WorkPublished, 0, 1, 1, 2, "a")), want: []action{write{mtRec(wire.WorkPublished, 0, 1, 1, 2, "a")}}},
			{from: 3, msg: ktEnd, over: true},
		}},
		{name: "the collector refuses rank 0", k: ktCollector, steps: []ktStep{
			{from: 0, msg: ktRecMsg(mtRec(wire.WorkPublished, 0, 1, 0, 4, "a")), says: onlyMaster},
		}},
		{name: "the collector refuses rank 0's end", k: ktCollector, steps: []ktStep{
			{from: 0, msg: ktEnd, says: onlyMaster},
		}},
		{name: "the collector refuses a rank that is no master", k: ktCollector, steps: []ktStep{
			{from: 4, msg: ktRecMsg(mtRec(wire.WorkPublished, 0, 1, 1, 4, "a")), says: onlyMaster},
		}},
		{name: "the collector refuses an end from a rank that is no master", k: ktCollector, steps: []ktStep{
			{from: 8, msg: ktEnd, says: onlyMaster},
		}},
		{name: "the collector refuses a master's record after its end", k: ktCollector, steps: []ktStep{
			{from: 3, msg: ktEnd},
			{from: 3, msg: ktRecMsg(mtRec(wire.WorkPublished, 0, 1, 1, 4, "a")), says: onlyMaster},
		}},
		{name: "the collector refuses a master's second end", k: ktCollector, steps: []ktStep{
			{from: 6, msg: ktEnd},
			{from: 6, msg: ktEnd, says: onlyMaster},
		}},
		{name: "the collector refuses a record of another shard", k: ktCollector, steps: []ktStep{
			{from: 3, msg: ktRecMsg(mtRec(wire.WorkPublished, 0, 1, 2, 4, "a")), says: disk + "item 2 is of shard 2, not 1)"},
		}},
		{name: "the collector refuses a record whose result is not its SHA-256", k: ktCollector, steps: []ktStep{
			{from: 6, msg: edit(ktRecMsg(mtRec(wire.WorkPublished, 0, 1, 2, 4, "a")), func(b []byte) { b[wire.WorkRecordHead] ^= 0x20 }), says: disk + "a log record of item 2 whose result does not match its SHA-256)"},
		}},
		{name: "the collector refuses a record cut short", k: ktCollector, steps: []ktStep{
			{from: 6, msg: ktRecMsg(mtRec(wire.WorkPublished, 0, 1, 2, 4, "a"))[:10], says: disk + "a log record cut short (10 bytes))"},
		}},
		{name: "the collector refuses a record of a slot past the job's", k: ktCollector, steps: []ktStep{
			{from: 6, msg: ktRecMsg(mtRec(wire.WorkExecuted, 0, 1, 2, 9, "a")), says: disk + "a log record of item 2 by slot 9 (9 items, 9 slots))"},
		}},
	}
}

func TestKeeperStep(t *testing.T) {
	for _, tc := range ktCases() {
		t.Run(tc.name, func(t *testing.T) {
			k := tc.k()
			if k.over() {
				t.Fatalf("over() before any message")
			}
			for i, st := range tc.steps {
				log, ended := ktLogState(k.log), maps.Clone(k.ended)
				got := k.Step(st.from, st.msg)
				if st.says != "" {
					mtCheckRefusal(t, got, st.from, st.says)
					if !reflect.DeepEqual(ktLogState(k.log), log) || !reflect.DeepEqual(k.ended, ended) {
						t.Fatalf("step %d (from %d): a refusal changed the keeper (ended %v, was %v) or its log", i, st.from, k.ended, ended)
					}
				} else if !mtSame(got, st.want) {
					t.Fatalf("step %d (from %d, %x):\n got %s\nwant %s", i, st.from, st.msg, mtActs(got), mtActs(st.want))
				}
				if k.over() != st.over {
					t.Fatalf("step %d (from %d): over() = %v, want %v", i, st.from, k.over(), st.over)
				}
			}
			if tc.check != nil {
				tc.check(t, k.log)
			}
		})
	}
}

// TestKeeperRecordIsACopy: the record the buddy logs and the collector
// writes does not alias the message (a frame the driver reuses).
func TestKeeperRecordIsACopy(t *testing.T) {
	r := mtRec(wire.WorkPublished, 0, 1, 1, 4, "abc")
	msg := ktRecMsg(r)
	c := ktCollector()
	got := c.Step(3, msg)
	if len(got) != 1 {
		t.Fatalf("got %s, want a write", mtActs(got))
	}
	b := ktBuddy()
	r0 := mtRec(wire.WorkPublished, 1, 1, 0, 2, "abc")
	msg0 := ktRecMsg(r0)
	if got := b.Step(0, msg0); !mtSame(got, []action{ack{}}) {
		t.Fatalf("got %s, want an ack", mtActs(got))
	}
	for i := range msg {
		msg[i] = 0
	}
	for i := range msg0 {
		msg0[i] = 0
	}
	if w := got[0].(write).rec; !reflect.DeepEqual(w, r) {
		t.Fatalf("written %s after the message changed, want %s", mtRecString(w), mtRecString(r))
	}
	if p := b.log.pub[0]; !reflect.DeepEqual(p, r0) {
		t.Fatalf("logged %s after the message changed, want %s", mtRecString(p), mtRecString(r0))
	}
}

// TestGroupsAndFirsts: the layout the keepers and masters assume (rank
// r in group r·groups/size, first(g) its first rank, sizes differing by
// one at most, every master with a buddy).
func TestGroupsAndFirsts(t *testing.T) {
	for _, tc := range []struct{ size, per, want int }{
		{2, 64, 1}, {64, 64, 1}, {65, 64, 2}, {3, 2, 1}, {4, 2, 2}, {5, 2, 2}, {9, 3, 3}, {1000, 64, 16}, {1, 64, 1},
	} {
		if got := groupsOf(tc.size, tc.per); got != tc.want {
			t.Errorf("groupsOf(%d, %d) = %d, want %d", tc.size, tc.per, got, tc.want)
		}
	}
	for size := 2; size <= 40; size++ {
		for groups := 1; groups <= size/2; groups++ {
			minSize, maxSize := size, 0
			for g := 0; g < groups; g++ {
				lo, hi := first(g, size, groups), first(g+1, size, groups)
				for r := lo; r < hi; r++ {
					if r*groups/size != g {
						t.Fatalf("size %d groups %d: rank %d is in group %d, first(%d) = %d, first(%d) = %d", size, groups, r, r*groups/size, g, lo, g+1, hi)
					}
				}
				minSize, maxSize = min(minSize, hi-lo), max(maxSize, hi-lo)
			}
			if first(0, size, groups) != 0 || first(groups, size, groups) != size || maxSize-minSize > 1 || minSize < 2 {
				t.Fatalf("size %d groups %d: groups of %d to %d ranks", size, groups, minSize, maxSize)
			}
		}
	}
}
