package workq

import (
	"fmt"
	"slices"
	"sort"

	"sperli/wire"
)

// record is one record of a queue's log (wire.WorkRecord).
type record = wire.WorkRecord

// fence is a lease's: its generation and its number there.
type fence = wire.WorkFence

// key names an execution: its fence and item.
type key struct {
	f  fence
	id int
}

// recordKey is a record as the audit compares it.
type recordKey struct {
	k    key
	slot int
	sum  [32]byte
}

func keyOf(r record) recordKey { return recordKey{key{r.Fence, r.Item}, r.Slot, r.Sum} }

// qlog is this process's copy of a queue's log, kept by name across
// generations (Hook.Keep). It is pure: no I/O, no lock (its holder's
// lock guards it).
type qlog struct {
	sum  [32]byte       // of the name, options and items
	pub  map[int]record // published, by item
	exec map[key]bool   // every execution logged (published or not)
	recs []record       // the unpublished executions (X), in order
	// What this process computed itself since it first started the
	// queue (in generation since): every record that names its slot from
	// then on must be one of them (audit).
	own   map[key][32]byte
	since uint32
	// disk holds the records a start took from the log on disk, whose
	// chunks every rank verified with the job key: written by processes
	// before this one (a launcher that died, a job launched again with
	// its job directory), whose generations this process's may repeat,
	// so the audit does not ask this process's own of them.
	disk map[recordKey]bool
}

func newLog(sum [32]byte) *qlog {
	return &qlog{sum: sum, pub: map[int]record{}, exec: map[key]bool{}, own: map[key][32]byte{}, disk: map[recordKey]bool{}}
}

// successor is a log of the same queue that keeps l's memory of this
// process's own executions and of the disk's records, and no record.
func (l *qlog) successor() *qlog {
	n := newLog(l.sum)
	n.own, n.since, n.disk = l.own, l.since, l.disk
	return n
}

// add takes a record; an execution already logged is not counted again.
// A second result of a published item is an execution that was not
// published (content-addressed: the first is the item's).
func (l *qlog) add(r record) {
	k := key{r.Fence, r.Item}
	if _, done := l.pub[r.Item]; r.Kind == wire.WorkPublished && !done {
		// Published: an execution of it known before (its worker's
		// record) is now this one.
		if l.exec[k] {
			l.recs = slices.DeleteFunc(l.recs, func(x record) bool { return x.Fence == r.Fence && x.Item == r.Item })
		}
		l.exec[k] = true
		l.pub[r.Item] = r
		return
	}
	if l.exec[k] {
		return
	}
	l.exec[k] = true
	r.Kind, r.Result = wire.WorkExecuted, nil
	l.recs = append(l.recs, r)
}

// audit checks records that came from a peer (or through one) against
// this process's own executions: one that names slot self in a
// generation since this process started the queue must be an execution
// it made, with its result's SHA-256. A record that names an honest slot
// for what it never computed is a forgery (a slot's own lies about its
// own work cannot be told from a wrong result); the error says which. A
// record of the log on disk is the job key's word, not this process's.
func (l *qlog) audit(recs []record, self int) error {
	for _, r := range recs {
		if r.Slot != self || r.Fence.Gen < l.since || l.disk[keyOf(r)] {
			continue
		}
		if sum, ok := l.own[key{r.Fence, r.Item}]; !ok || sum != r.Sum {
			return fmt.Errorf("a log record of item %d with fence (%d, %d) computed by slot %d, this one, which never gave that result", r.Item, r.Fence.Gen, r.Fence.Lease, self)
		}
	}
	return nil
}

// encodeShard is the published records of shard g of groups (items whose
// id mod groups is g), by item, then every execution not published.
func (l *qlog) encodeShard(g, groups int) []byte {
	ids := make([]int, 0, len(l.pub)/groups+1)
	for id := range l.pub {
		if id%groups == g {
			ids = append(ids, id)
		}
	}
	sort.Ints(ids)
	var b []byte
	for _, id := range ids {
		b = wire.AppendWorkRecord(b, l.pub[id])
	}
	for _, r := range l.recs {
		b = wire.AppendWorkRecord(b, r)
	}
	return b
}

// encode is every record, the published by item, then the others.
func (l *qlog) encode() []byte { return l.encodeShard(0, 1) }

// beyond is the published records l holds that base lacks, by item.
func (l *qlog) beyond(base *qlog) []byte {
	var ids []int
	for id := range l.pub {
		if _, ok := base.pub[id]; !ok {
			ids = append(ids, id)
		}
	}
	sort.Ints(ids)
	var b []byte
	for _, id := range ids {
		b = wire.AppendWorkRecord(b, l.pub[id])
	}
	return b
}

// extras is this process's own executions (slot self) that base does not
// know, at most max bytes of them: another slot's execution it knows of
// came to it at an earlier start, with the log every rank got.
func (l *qlog) extras(base *qlog, self, max int) []byte {
	var b []byte
	for _, r := range l.recs {
		if r.Slot == self && !base.exec[key{r.Fence, r.Item}] && len(b) < max {
			b = wire.AppendWorkRecord(b, r)
		}
	}
	return b
}

// lastLease is the highest lease number of generation gen in the log: a
// master of gen numbers its leases after it, so that a fence is never
// given twice, also by a job launched again whose generations start from
// 0 again.
func (l *qlog) lastLease(gen uint32) uint64 {
	var next uint64
	for _, r := range l.pub {
		if r.Fence.Gen == gen {
			next = max(next, r.Fence.Lease)
		}
	}
	for _, r := range l.recs {
		if r.Fence.Gen == gen {
			next = max(next, r.Fence.Lease)
		}
	}
	return next
}

// Stats are a queue's statistics, from its log (SPEC §19).
type Stats struct {
	Items       int
	Published   int
	Executed    int
	Duplicates  int         // Executed − Published
	Generations int         // the generations results were logged in
	ByRank      map[int]int // executions by the slot that computed them
	Slots       int         // the job's slots: ByRank's keys are below it
}

func (l *qlog) stats(items int) Stats {
	st := Stats{Items: items, Published: len(l.pub), Executed: len(l.exec), ByRank: map[int]int{}}
	st.Duplicates = st.Executed - st.Published
	gens := map[uint32]bool{}
	count := func(r record) {
		gens[r.Fence.Gen] = true
		st.ByRank[r.Slot]++
	}
	for _, r := range l.pub {
		count(r)
	}
	for _, r := range l.recs {
		count(r)
	}
	st.Generations = len(gens)
	return st
}
