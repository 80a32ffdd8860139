package workq

import (
	"crypto/sha256"
	"fmt"

	"sperli/wire"
)

// The pure lease machines: no I/O, no goroutine, no clock. The driver
// (serve.go) feeds a machine what came from the communicator (events) and
// performs what it returns (actions), in order, outside every lock but
// the log's; a refusal ends the job with H1627 naming the rank.

// event is what a master's machine takes: a request or a done of a rank
// of its group.
type event interface{ rank() int }

// request is a rank's request for a task.
type request struct{ from int }

// done is a rank's result of the lease f of item id, which is also a
// request for the next task; slot is the slot that serves the rank.
type done struct {
	from, slot int
	f          fence
	id         int
	result     []byte
}

// garbled is a message of a rank that is no request or done (why says
// what is wrong with it: package wire's refusal).
type garbled struct {
	from int
	why  string
}

func (e request) rank() int { return e.from }
func (e garbled) rank() int { return e.from }
func (e done) rank() int    { return e.from }

// action is what a machine asks its driver to do.
type action interface{ isAction() }

// logRecord: have the buddy hold rec (its acknowledgement), then add it
// to the log, then hand it to the log on disk.
type logRecord struct{ rec record }

// sendLease: send rank to the lease f of item id.
type sendLease struct {
	to int
	f  fence
	id int
}

// sendEnd: tell rank to the end.
type sendEnd struct{ to int }

// refuse: rank from sent what no honest rank sends (H1627); why says
// what. It is the only action of its step.
type refuse struct {
	from int
	why  string
}

// ack: acknowledge the master's record (the buddy holds it).
type ack struct{}

// write: give rec to the log on disk (rank 0's collector).
type write struct{ rec record }

func (logRecord) isAction() {}
func (sendLease) isAction() {}
func (sendEnd) isAction()   {}
func (refuse) isAction()    {}
func (ack) isAction()       {}
func (write) isAction()     {}

// lease is what a rank holds: its item and lease number.
type lease struct {
	id int
	n  uint64
}

// master is the lease machine of the master of group group of groups, of
// the group's size ranks from first, in generation gen: it leases the
// items of its shard (id mod groups = group) that its log lacks, fences
// each by (gen, lease number), takes each rank's done of the one lease it
// holds, and tells each rank the end once the shard is published.
type master struct {
	gen                  uint32
	next                 uint64 // the last lease number given
	items, group, groups int
	first, size          int
	// What an honest rank may send: a done of the one lease it holds,
	// else a request; nothing while it waits for a reply (asked) or
	// after it was told the end.
	holds        map[int]lease
	asked, ended map[int]bool
	pending      []int // the items of the shard to lease, in order
	parked       []int // ranks that asked while none was left to lease
	published    int   // of the shard
	shard, told  int
}

// newMaster is the machine of a master of generation gen whose log is l
// (read: numbered after l's fences of gen, it leases what l lacks).
func newMaster(gen uint32, items, group, groups, first, size int, l *qlog) *master {
	m := &master{gen: gen, next: l.lastLease(gen), items: items, group: group, groups: groups, first: first, size: size,
		holds: map[int]lease{}, asked: map[int]bool{}, ended: map[int]bool{}}
	for id := group; id < items; id += groups {
		m.shard++
		if _, ok := l.pub[id]; ok {
			m.published++
		} else {
			m.pending = append(m.pending, id)
		}
	}
	return m
}

// over reports whether every rank of the group was told the end.
func (m *master) over() bool { return m.told >= m.size }

// Step takes one event and returns what to do, in order.
func (m *master) Step(ev event) []action {
	from := ev.rank()
	if from < m.first || from >= m.first+m.size {
		return m.refuse(from, "a message to the master of group %d (ranks %d to %d)", m.group, m.first, m.first+m.size-1)
	}
	if m.asked[from] || m.ended[from] {
		return m.refuse(from, "a message while it waits for a reply or after the end")
	}
	held, holding := m.holds[from]
	var out []action
	switch e := ev.(type) {
	case garbled:
		return m.refuse(from, "%s", e.why)
	case request:
		if holding {
			return m.refuse(from, "a request while it holds item %d", held.id)
		}
	case done:
		f, id := e.f, e.id
		if f.Gen > m.gen || (f.Gen == m.gen && (!holding || held != lease{id, f.Lease})) || (f.Gen < m.gen && holding) ||
			id < 0 || id >= m.items || id%m.groups != m.group {
			// A fence no master made, another rank's lease, one it gave
			// already, or an item not of this shard.
			return m.refuse(from, "a done of item %d with fence (%d, %d), which no master gave it (generation %d, %d leases)", id, f.Gen, f.Lease, m.gen, m.next)
		}
		// A fence of an earlier generation is stale: its execution is
		// counted, never published.
		rec := record{Kind: wire.WorkExecuted, Fence: f, Item: id, Slot: e.slot, Sum: sha256.Sum256(e.result)}
		if f.Gen == m.gen {
			rec.Kind, rec.Result = wire.WorkPublished, append([]byte{}, e.result...)
			delete(m.holds, from)
			m.published++
		}
		out = append(out, logRecord{rec})
	}
	m.asked[from] = true
	out = m.reply(from, out)
	if m.published == m.shard {
		for _, p := range m.parked {
			out = m.reply(p, out)
		}
		m.parked = nil
	}
	return out
}

// reply answers rank to's request: the next lease, the end once the shard
// is published, or nothing yet (parked) while leases are out.
func (m *master) reply(to int, out []action) []action {
	switch {
	case len(m.pending) > 0:
		id := m.pending[0]
		m.pending = m.pending[1:]
		m.next++
		m.holds[to], m.asked[to] = lease{id, m.next}, false
		return append(out, sendLease{to, fence{Gen: m.gen, Lease: m.next}, id})
	case m.published == m.shard:
		m.told++
		m.ended[to], m.asked[to] = true, false
		return append(out, sendEnd{to})
	}
	m.parked = append(m.parked, to)
	return out
}

func (m *master) refuse(from int, format string, args ...any) []action {
	return []action{refuse{from, fmt.Sprintf(format, args...)}}
}

// keeper is the machine of a rank that holds records a master sends: the
// buddy of group group (its master's records, acknowledged), or rank 0's
// collector of the other masters' records for the log on disk (group
// -1). It checks each record as any log record is checked (wire), that it
// is of the sender's shard, and audits it against this process's own
// executions; the buddy adds it to the log.
type keeper struct {
	items, slots, groups, size, self int
	group                            int // the buddy's group; -1 for the collector
	master                           int // the buddy's master
	log                              *qlog
	ended                            map[int]bool // the masters that said their end
}

// over reports whether the senders said their end: the buddy's master,
// or every master but rank 0.
func (k *keeper) over() bool {
	if k.group >= 0 {
		return len(k.ended) == 1
	}
	return len(k.ended) >= k.groups-1
}

// Step takes message msg from rank from.
func (k *keeper) Step(from int, msg []byte) []action {
	g := k.group
	if g < 0 {
		g = from * k.groups / k.size
		if from == 0 || from != first(g, k.size, k.groups) || k.ended[from] {
			return []action{refuse{from, "a record for the log on disk, which only a master sends, before its end"}}
		}
	} else if from != k.master || k.ended[from] {
		return []action{refuse{from, fmt.Sprintf("a log record from rank %d, which is not the master of group %d, or after its end", from, g)}}
	}
	rec, end, err := wire.DecodeWorkLogMsg(msg, k.items, k.slots)
	if end {
		k.ended[from] = true
		return nil
	}
	if err == nil && rec.Item%k.groups != g {
		err = fmt.Errorf("item %d is of shard %d, not %d", rec.Item, rec.Item%k.groups, g)
	}
	if err != nil {
		what := "a log record that does not parse or is not of its shard (%v)"
		if k.group < 0 {
			what = "a record for the log on disk that does not parse or is not of its shard (%v)"
		}
		return []action{refuse{from, fmt.Sprintf(what, why(err))}}
	}
	if err := k.log.audit([]record{rec}, k.self); err != nil {
		return []action{refuse{from, err.Error()}}
	}
	if k.group < 0 {
		return []action{write{rec}}
	}
	k.log.add(rec)
	return []action{ack{}}
}

// groupsOf is the number of groups (masters) of a queue on size ranks.
func groupsOf(size, perMaster int) int {
	return max(1, min((size+perMaster-1)/perMaster, size/2))
}

// first is the first rank of group g: the groups are contiguous, and
// their sizes differ by one at most (rank r is in group r·groups/size).
func first(g, size, groups int) int { return (g*size + groups - 1) / groups }
