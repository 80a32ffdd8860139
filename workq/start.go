package workq

import (
	"bytes"
	"context"
	"fmt"

	"sperli/codes"
	"sperli/wire"
)

// maxLog bounds a queue's log as it travels.
const maxLog = 1 << 32

// maxExtras bounds the bytes of executions one rank brings to a queue's
// start beyond the log (a gather's part).
const maxExtras = (wire.MaxPayload - 64) / wire.WorkRecordHead * wire.WorkRecordHead

// start is the queue's collective start: the items checked on every
// rank, the log on disk (rank 0's) shared, and every rank's log made the
// union of what the ranks hold (sync).
func (w *Queue) start(ctx context.Context) error {
	// Rank 0 reads the log a restarted job left; whether it could goes
	// with the items' SHA-256, so that every rank ends alike, whether it
	// writes the log (then the other masters send it their records), and
	// whether it found one.
	disk, diskBytes, diskErr := w.readDisk()
	mine := wire.AppendWorkStart(nil, wire.WorkStart{Sum: w.sum, Code: codes.Of(diskErr), Writes: w.diskOn(), Found: disk != nil})
	all, err := w.q.Allgather(ctx, mine)
	if err != nil {
		return err
	}
	for r := 0; r < w.q.Size(); r++ {
		if !bytes.Equal(all[wire.WorkStartSize*r:wire.WorkStartSize*r+32], w.sum[:]) {
			return &codes.Error{Code: codes.CollectiveMismatch, Op: "work_queue", Rank: r,
				Msg: fmt.Sprintf("work_queue %q: rank %d's items differ from rank %d's (their SHA-256)", w.name, r, w.c.Rank())}
		}
	}
	if diskErr != nil {
		return diskErr
	}
	s, err := wire.DecodeWorkStart(all[:wire.WorkStartSize])
	if err != nil {
		return w.liar(0, "%s", why(err))
	}
	if s.Code != 0 {
		return &codes.Error{Code: s.Code, Op: "work_queue", Rank: 0, Msg: fmt.Sprintf("work_queue %q: rank 0 could not take the queue's log under the checkpoint directory (its error says why)", w.name)}
	}
	w.diskAll = s.Writes && w.groups > 1
	var fromDisk []record
	if s.Found {
		got, err := w.bcastLen(ctx, 0, diskBytes)
		if err != nil {
			return err
		}
		if fromDisk, err = w.diskFrom(got); err != nil {
			return err
		}
	}
	return w.sync(ctx, w.base(disk, fromDisk))
}

// base is the log this process brings to the start: what it kept of the
// queue (nil, or of other items: none), the records of the log on disk
// known as the job key's word (fromDisk), and on rank 0 of a restarted
// job the log on disk itself (disk) with what this process knows beyond
// it.
func (w *Queue) base(disk *qlog, fromDisk []record) *qlog {
	w.mu.Lock()
	defer w.mu.Unlock()
	old := w.kept.log
	if old == nil || old.sum != w.sum {
		old = newLog(w.sum)
		old.since = w.c.Incarnation()
	}
	for _, r := range fromDisk {
		old.disk[keyOf(r)] = true
	}
	if disk != nil {
		for _, r := range old.pub {
			disk.add(r)
		}
		for _, r := range old.recs {
			disk.add(r)
		}
		disk.own, disk.since, disk.disk = old.own, old.since, old.disk
		old = disk
	}
	return old
}

// sync makes every rank's log the union of what the ranks hold. Every
// rank holds the whole log at the queue's start; in a generation a
// group's buddy logs a record before its master does, and the others log
// none, so with one master the longest published list holds every other.
// The rank with the longest sends its log to all. With several masters
// the other groups' records are beyond it: each rank that holds published
// records beyond it sends them to all in turn (what an earlier one sent
// is not sent again: a master's buddy sends nothing after its master).
// Then the executions the others know and nobody logged (a worker's done
// that its master did not log before it was lost) are gathered and sent
// to all.
func (w *Queue) sync(ctx context.Context, old *qlog) error {
	w.mu.Lock()
	mine := old.encode()
	pub := len(old.pub)
	w.mu.Unlock()
	l, err := w.longest(ctx, old, mine, pub)
	if err != nil {
		return err
	}
	w.mu.Lock()
	extra := old.extras(l, w.c.Slot(), maxExtras)
	more := len(old.beyond(l)) > 0
	w.mu.Unlock()
	lens, err := w.q.Allgather(ctx, wire.AppendWorkExtras(nil, len(extra), more))
	if err != nil {
		return err
	}
	ns, mores := make([]int, w.q.Size()), make([]bool, w.q.Size())
	longest := 0
	for r := range ns {
		if ns[r], mores[r], err = wire.DecodeWorkExtras(lens[wire.WorkExtrasSize*r:wire.WorkExtrasSize*(r+1)], maxExtras); err != nil {
			return w.liar(r, "%s", why(err))
		}
		longest = max(longest, ns[r])
	}
	if err := w.beyond(ctx, old, l, mores); err != nil {
		return err
	}
	if longest > 0 {
		if err := w.gatherExtras(ctx, l, extra, ns, longest); err != nil {
			return err
		}
	}
	w.mu.Lock()
	w.kept.log = l
	w.log = l
	w.mu.Unlock()
	return nil
}

// longest is the log of the rank that holds the most published items
// (rank 0 on a tie), sent to all, audited against old's memory.
func (w *Queue) longest(ctx context.Context, old *qlog, mine []byte, pub int) (*qlog, error) {
	heads, err := w.q.Allgather(ctx, wire.AppendWorkHead(nil, uint64(pub), uint64(len(mine))))
	if err != nil {
		return nil, err
	}
	src, best, size := 0, uint64(0), uint64(0)
	for r := 0; r < w.q.Size(); r++ {
		n, length, err := wire.DecodeWorkHead(heads[wire.WorkHeadSize*r:wire.WorkHeadSize*(r+1)], len(w.items), maxLog)
		if err != nil {
			return nil, w.liar(r, "%s", why(err))
		}
		if n > best || r == 0 {
			src, best, size = r, n, length
		}
	}
	all, err := w.bcastBytes(ctx, src, mine, size)
	if err != nil {
		return nil, err
	}
	recs, err := wire.DecodeWorkRecords(all, len(w.items), w.hook.Slots())
	if err != nil {
		return nil, w.liar(src, "%s", why(err))
	}
	w.mu.Lock()
	err = old.audit(recs, w.c.Slot())
	w.mu.Unlock()
	if err != nil {
		return nil, w.liar(src, "%v", err)
	}
	l := old.successor()
	for _, rec := range recs {
		l.add(rec)
	}
	return l, nil
}

// beyond: each rank that holds published records beyond l (more) sends
// them to all in turn; anything but publications of items l lacks is a
// lie.
func (w *Queue) beyond(ctx context.Context, old, l *qlog, more []bool) error {
	for r, m := range more {
		if !m {
			continue
		}
		var b []byte
		if r == w.q.Rank() {
			w.mu.Lock()
			b = old.beyond(l)
			w.mu.Unlock()
		}
		got, err := w.bcastLen(ctx, r, b)
		if err != nil {
			return err
		}
		recs, err := wire.DecodeWorkRecords(got, len(w.items), w.hook.Slots())
		if err != nil {
			return w.liar(r, "%s", why(err))
		}
		if err := l.audit(recs, w.c.Slot()); err != nil {
			return w.liar(r, "%v", err)
		}
		for _, rec := range recs {
			if _, dup := l.pub[rec.Item]; rec.Kind != wire.WorkPublished || dup {
				return w.liar(r, "a record of item %d beyond the log that is no publication of an item it lacks", rec.Item)
			}
			l.add(rec)
		}
	}
	return nil
}

// gatherExtras gathers at rank 0 the executions each rank knows beyond l
// (ns[r] bytes of rank r's part of longest), each rank's own only, and
// sends them to all.
func (w *Queue) gatherExtras(ctx context.Context, l *qlog, extra []byte, ns []int, longest int) error {
	got, err := w.q.Gather(ctx, 0, append(extra, make([]byte, longest-len(extra))...))
	if err != nil {
		return err
	}
	var merged []byte
	if w.q.Rank() == 0 {
		for r := 0; r < w.q.Size(); r++ {
			recs, err := wire.DecodeWorkRecords(got[longest*r:longest*r+ns[r]], len(w.items), w.hook.Slots())
			if err != nil {
				return w.liar(r, "%s", why(err))
			}
			for _, rec := range recs {
				if rec.Kind != wire.WorkExecuted || rec.Slot != w.q.Hook().SlotOf(r) {
					return w.liar(r, "a record beyond the log that is no execution of its own (kind %c, slot %d)", rec.Kind, rec.Slot)
				}
				merged = wire.AppendWorkRecord(merged, rec)
			}
		}
	}
	if merged, err = w.bcastLen(ctx, 0, merged); err != nil {
		return err
	}
	return w.take(merged, 0, l, true)
}

// bcastLen broadcasts b from rank root of the queue, its length first.
func (w *Queue) bcastLen(ctx context.Context, root int, b []byte) ([]byte, error) {
	n, err := w.q.Bcast(ctx, root, wire.AppendWorkLength(nil, len(b)))
	if err != nil {
		return nil, err
	}
	size, err := wire.DecodeWorkLength(n, maxLog)
	if err != nil {
		return nil, w.liar(root, "%s", why(err))
	}
	return w.bcastBytes(ctx, root, b, size)
}

// bcastBytes broadcasts b, of size bytes, from rank root of the queue, in
// parts of at most half a frame.
func (w *Queue) bcastBytes(ctx context.Context, root int, b []byte, size uint64) ([]byte, error) {
	const part = wire.MaxPayload / 2
	var out []byte
	for off := uint64(0); off < size; off += part {
		end := min(size, off+part)
		var chunk []byte
		if w.q.Rank() == root {
			chunk = b[off:end]
		}
		got, err := w.q.Bcast(ctx, root, chunk)
		if err != nil {
			return nil, err
		}
		if uint64(len(got)) != end-off {
			return nil, w.liar(root, "a part of its log of %d bytes, want %d", len(got), end-off)
		}
		out = append(out, got...)
	}
	return out, nil
}
