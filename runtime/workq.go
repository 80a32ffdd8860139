package runtime

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"sync"

	"sperli/codes"
	"sperli/wire"
)

// The work queue of SPEC §19 (docs/workqueue.md): the queue's
// communicator is cut into groups of at most PerMaster ranks (one group up
// to that size); the first rank of a group is its master and hands out the
// leases of its shard of the items (item id's shard is id mod groups) to
// its group, fenced by (generation, lease number); a result counts once
// the master and its buddy (the group's second rank) hold its log record;
// every rank holds the whole log after the queue's start and its end, so
// it survives the loss of any one rank (the process keeps it across
// generations, by the queue's name). The groups are made again at every
// start, from the ranks of the communicator it starts on.

// Tags of a queue's messages on its private communicator.
const (
	wqTagReq = 1 // worker → master: a request, or a done that is one
	wqTagRep = 2 // master → worker: a lease, or the end
	wqTagLog = 3 // master → buddy: a log record, or the end
	wqTagAck = 4 // buddy → master: the record is held
	wqTagDsk = 5 // master → rank 0: a record for the log on disk, or the master's end
)

// DefaultPerMaster is the ranks a work queue's master serves at most by
// default (SPEC §19): a queue on more ranks has several masters.
const DefaultPerMaster = 64

// maxPerMaster bounds WorkOptions.PerMaster.
const maxPerMaster = 1 << 20

// WorkOptions are a work queue's options, the same on every rank.
type WorkOptions struct {
	// PerMaster is the ranks a master serves at most (2 to 1,048,576;
	// 0: DefaultPerMaster). A queue on n ranks has ceil(n / PerMaster)
	// masters, at most n / 2: every master has a buddy.
	PerMaster int
}

// wqGroups is the number of groups (masters) of a queue on size ranks.
func wqGroups(size, perMaster int) int {
	return max(1, min((size+perMaster-1)/perMaster, size/2))
}

// wqFirst is the first rank of group g: the groups are contiguous, and
// their sizes differ by one at most (rank r is in group r·groups/size).
func wqFirst(g, size, groups int) int { return (g*size + groups - 1) / groups }

// MaxWorkResult bounds a result (a frame's payload, less the done's head).
const MaxWorkResult = wire.MaxPayload - 64

// maxWorkItems bounds a queue's items (their ids are u32 on the wire).
const maxWorkItems = 1 << 24

// Task is an item leased to this rank: its id (its index in the items)
// and data, and the lease's fence.
type Task struct {
	ID   int
	Data []byte
	f    fence
}

// fence is a lease's: the generation it was made in and its number there.
type fence struct {
	gen   uint32
	lease uint64
}

// wqRecord is one record of a queue's log: a result published (P) or an
// execution that was not (X: a duplicate or a stale fence), with the
// fence it came with, the slot that computed it and the SHA-256 of the
// result (its bytes kept for a published one).
type wqRecord struct {
	kind   byte // 'P' or 'X'
	f      fence
	id     int
	slot   int
	sum    [32]byte
	result []byte
}

const wqRecordHead = 1 + 4 + 8 + 4 + 4 + 32 + 4

func (r wqRecord) append(b []byte) []byte {
	b = append(b, r.kind)
	b = binary.BigEndian.AppendUint32(b, r.f.gen)
	b = binary.BigEndian.AppendUint64(b, r.f.lease)
	b = binary.BigEndian.AppendUint32(b, uint32(r.id))
	b = binary.BigEndian.AppendUint32(b, uint32(r.slot))
	b = append(b, r.sum[:]...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.result)))
	return append(b, r.result...)
}

// parseRecords decodes the records of a log of a queue of n items in a
// job of slots slots; what no honest rank sends is an error.
func parseRecords(b []byte, n, slots int) ([]wqRecord, error) {
	var out []wqRecord
	for len(b) > 0 {
		if len(b) < wqRecordHead {
			return nil, fmt.Errorf("a log record cut short (%d bytes)", len(b))
		}
		r := wqRecord{kind: b[0], f: fence{binary.BigEndian.Uint32(b[1:]), binary.BigEndian.Uint64(b[5:])},
			id: int(binary.BigEndian.Uint32(b[13:])), slot: int(binary.BigEndian.Uint32(b[17:]))}
		copy(r.sum[:], b[21:53])
		size := int(binary.BigEndian.Uint32(b[53:]))
		b = b[wqRecordHead:]
		switch {
		case r.kind != 'P' && r.kind != 'X':
			return nil, fmt.Errorf("a log record of kind %#x", r.kind)
		case r.id >= n || r.slot >= slots:
			return nil, fmt.Errorf("a log record of item %d by slot %d (%d items, %d slots)", r.id, r.slot, n, slots)
		case size > len(b) || (r.kind == 'X' && size != 0):
			return nil, fmt.Errorf("a %c log record with a result of %d bytes (%d left)", r.kind, size, len(b))
		}
		if r.kind == 'P' {
			r.result = append([]byte{}, b[:size]...)
			if sha256.Sum256(r.result) != r.sum {
				return nil, fmt.Errorf("a log record of item %d whose result does not match its SHA-256", r.id)
			}
		}
		b = b[size:]
		out = append(out, r)
	}
	return out, nil
}

// wqLog is this process's copy of a queue's log, kept by name across
// generations (links.queues).
type wqLog struct {
	sum  [32]byte         // of the items
	pub  map[int]wqRecord // published, by item
	exec map[wqKey]bool   // every execution logged (published or not)
	recs []wqRecord       // the unpublished executions (X), in order
	// What this process computed itself since it first started the
	// queue (in generation since): every record that names its slot from
	// then on must be one of them (audit).
	own   map[wqKey][32]byte
	since uint32
	// disk holds the records a start took from the log on disk, whose
	// chunks every rank verified with the job key: written by processes
	// before this one (a launcher that died, a job launched again with
	// its job directory), whose generations this process's may repeat,
	// so the audit does not ask this process's own of them.
	disk map[wqRecordKey]bool
}

// wqRecordKey is a record as the audit compares it.
type wqRecordKey struct {
	k    wqKey
	slot int
	sum  [32]byte
}

func (r wqRecord) key() wqRecordKey { return wqRecordKey{wqKey{r.f, r.id}, r.slot, r.sum} }

// wqKey names an execution: its fence and item.
type wqKey struct {
	f  fence
	id int
}

func newWQLog(sum [32]byte) *wqLog {
	return &wqLog{sum: sum, pub: map[int]wqRecord{}, exec: map[wqKey]bool{}, own: map[wqKey][32]byte{}, disk: map[wqRecordKey]bool{}}
}

// audit checks the records rank from of the queue sent (or relayed):
// one that names this rank's slot in a generation since this process
// started the queue must be an execution it made, with its result's
// SHA-256. A record that names an honest slot for what it never
// computed is a forgery, and from sent it: H1627 naming it. (A slot's
// own lies about its own work cannot be told from a wrong result.) A
// record of the log on disk is the job key's word, not this process's.
func (w *WorkQueue) audit(recs []wqRecord, from int, l *wqLog) error {
	self := w.c.links.self
	for _, r := range recs {
		if r.slot != self || r.f.gen < l.since || l.disk[r.key()] {
			continue
		}
		if sum, ok := l.own[wqKey{r.f, r.id}]; !ok || sum != r.sum {
			return w.liar(from, "a log record of item %d with fence (%d, %d) computed by slot %d, this one, which never gave that result", r.id, r.f.gen, r.f.lease, self)
		}
	}
	return nil
}

// add takes a record; an execution already logged is not counted again.
// A second result of a published item is an execution that was not
// published (content-addressed: the first is the item's).
func (l *wqLog) add(r wqRecord) {
	k := wqKey{r.f, r.id}
	if _, done := l.pub[r.id]; r.kind == 'P' && !done {
		// Published: an execution of it known before (its worker's
		// record) is now this one.
		if l.exec[k] {
			l.recs = slices.DeleteFunc(l.recs, func(x wqRecord) bool { return x.f == r.f && x.id == r.id })
		}
		l.exec[k] = true
		l.pub[r.id] = r
		return
	}
	if l.exec[k] {
		return
	}
	l.exec[k] = true
	r.kind, r.result = 'X', nil
	l.recs = append(l.recs, r)
}

// encodeShard is the published records of shard g of groups (items whose
// id mod groups is g), by item, then every execution not published.
func (l *wqLog) encodeShard(g, groups int) []byte {
	ids := make([]int, 0, len(l.pub)/groups+1)
	for id := range l.pub {
		if id%groups == g {
			ids = append(ids, id)
		}
	}
	sort.Ints(ids)
	var b []byte
	for _, id := range ids {
		b = l.pub[id].append(b)
	}
	for _, r := range l.recs {
		b = r.append(b)
	}
	return b
}

// encode is every record, the published by item, then the others.
func (l *wqLog) encode() []byte { return l.encodeShard(0, 1) }

// WorkStats are a queue's statistics, from its log (SPEC §19).
type WorkStats struct {
	Items       int
	Published   int
	Executed    int
	Duplicates  int         // Executed − Published
	Generations int         // the generations results were logged in
	ByRank      map[int]int // executions by the slot that computed them
	Slots       int         // the job's slots: ByRank's keys are below it
}

func (l *wqLog) stats(items int) WorkStats {
	st := WorkStats{Items: items, Published: len(l.pub), Executed: len(l.exec), ByRank: map[int]int{}}
	st.Duplicates = st.Executed - st.Published
	gens := map[uint32]bool{}
	count := func(r wqRecord) {
		gens[r.f.gen] = true
		st.ByRank[r.slot]++
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

// WorkQueue is a work queue on a communicator (SPEC §19): Next leases a
// task, Done gives its result, and once every item is published Next
// returns false on every rank and Results is the same on every rank.
// One goroutine uses it.
type WorkQueue struct {
	c, q  *Comm
	name  string
	items [][]byte
	sum   [32]byte // of the name, the options and the items
	log   *wqLog   // this process's, shared with the master and buddy goroutines while they run
	// The groups: their number, this rank's, its master's and buddy's
	// ranks (-1: none) and the size of its group.
	groups, group, masterRank, buddyRank, groupSize int
	// diskAll: rank 0 writes the log to disk, and the other masters
	// send it their records (wqTagDsk).
	diskAll bool
	mu      *sync.Mutex
	held    *Task
	asked   bool // a request (or a done) is out: the next reply is this rank's
	dones   int  // the results this rank gave
	endSeen bool // the master's end came: Next goes on with finish
	ended   bool
	// This rank's master or buddy goroutine: closed at its end, with
	// srvErr set; nil on the other ranks.
	srvDone chan struct{}
	srvErr  error
	// Rank 0 talks to its own master in the process: its requests join
	// the others' (reqs), and its replies come on local.
	reqs  chan wqReq
	local chan []byte
}

// wqReq is a request or done that came to the master.
type wqReq struct {
	from int
	b    []byte
}

// WorkQueue starts the queue name of items on c: a collective call,
// with the same name and items on every rank (else H1613 on every rank).
// A queue of that name this process ran before, in an earlier generation
// or on a communicator the job shrank from, goes on from its log: the
// published results stay, and only the rest is leased.
func (c *Comm) WorkQueue(ctx context.Context, name string, items [][]byte) (*WorkQueue, error) {
	return c.WorkQueueWith(ctx, name, items, WorkOptions{})
}

// WorkQueueWith is WorkQueue with options, the same on every rank (they
// are checked with the items).
func (c *Comm) WorkQueueWith(ctx context.Context, name string, items [][]byte, opt WorkOptions) (*WorkQueue, error) {
	if len(items) == 0 || len(items) > maxWorkItems || len(name) > 255 {
		return nil, &codes.Error{Code: codes.OutOfRange, Op: "work_queue", Rank: -1,
			Msg: fmt.Sprintf("work_queue: %d items and a name of %d bytes; want 1 to %d items and a name of at most 255", len(items), len(name), maxWorkItems)}
	}
	if opt.PerMaster == 0 {
		opt.PerMaster = DefaultPerMaster
	}
	if opt.PerMaster < 2 || opt.PerMaster > maxPerMaster {
		return nil, &codes.Error{Code: codes.OutOfRange, Op: "work_queue", Rank: -1,
			Msg: fmt.Sprintf("work_queue: %d ranks a master; want 2 to %d", opt.PerMaster, maxPerMaster)}
	}
	h := sha256.New()
	fmt.Fprintf(h, "%d:%s", len(name), name)
	if opt.PerMaster != DefaultPerMaster {
		// (A queue of the default keeps the SHA-256 it had before there
		// were options: its log on disk goes on.)
		fmt.Fprintf(h, "/%d", opt.PerMaster)
	}
	for _, it := range items {
		binary.Write(h, binary.BigEndian, uint64(len(it)))
		h.Write(it)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	q, err := c.Split(ctx, 0, c.Rank())
	if err != nil {
		return nil, err
	}
	w := &WorkQueue{c: c, q: q, name: name, items: items, sum: sum, mu: &c.links.wqMu}
	size := q.Size()
	w.groups = wqGroups(size, opt.PerMaster)
	w.group = q.Rank() * w.groups / size
	w.masterRank = wqFirst(w.group, size, w.groups)
	w.groupSize = wqFirst(w.group+1, size, w.groups) - w.masterRank
	w.buddyRank = -1
	if w.groupSize > 1 {
		w.buddyRank = w.masterRank + 1
	}
	// Rank 0 reads the log a restarted job left; whether it could goes
	// with the items' SHA-256, so that every rank ends alike, whether it
	// writes the log (then the other masters send it their records), and
	// whether it found one.
	disk, diskBytes, diskErr := w.readDisk(sum)
	mine := binary.BigEndian.AppendUint16(sum[:], uint16(codes.Of(diskErr)))
	mine = append(mine, 0, 0)
	if w.diskOn() {
		mine[34] = 1
	}
	if disk != nil {
		mine[35] = 1
	}
	all, err := q.Allgather(ctx, mine)
	if err != nil {
		return nil, err
	}
	const part = 36
	for r := 0; r < q.Size(); r++ {
		if !bytes.Equal(all[part*r:part*r+32], sum[:]) {
			return nil, &codes.Error{Code: codes.CollectiveMismatch, Op: "work_queue", Rank: r,
				Msg: fmt.Sprintf("work_queue %q: rank %d's items differ from rank %d's (their SHA-256)", name, r, c.Rank())}
		}
	}
	if diskErr != nil {
		return nil, diskErr
	}
	if code := codes.Code(binary.BigEndian.Uint16(all[32:])); code != 0 {
		if !code.Valid() {
			return nil, w.liar(0, "a start with code %d", code)
		}
		return nil, &codes.Error{Code: code, Op: "work_queue", Rank: 0, Msg: fmt.Sprintf("work_queue %q: rank 0 could not take the queue's log under the checkpoint directory (its error says why)", name)}
	}
	if all[34] > 1 || all[35] > 1 {
		return nil, w.liar(0, "a start with disk flags of %d and %d", all[34], all[35])
	}
	w.diskAll = all[34] == 1 && w.groups > 1
	var fromDisk []wqRecord
	if all[35] == 1 {
		if fromDisk, err = w.shareDisk(ctx, sum, disk, diskBytes); err != nil {
			return nil, err
		}
	}
	if err := w.sync(ctx, sum, disk, fromDisk); err != nil {
		return nil, err
	}
	serve := func(fn func(context.Context) error) {
		w.srvDone = make(chan struct{})
		go func() {
			w.srvErr = w.serverEnd(fn(ctx))
			close(w.srvDone)
		}()
	}
	switch q.Rank() {
	case w.masterRank:
		w.reqs, w.local = make(chan wqReq), make(chan []byte, 1)
		serve(w.master)
	case w.buddyRank:
		serve(w.buddy)
	}
	return w, nil
}

// shareDisk sends the log file rank 0 found (its bytes that verified) to
// every rank, which checks its signatures with the job key itself, and
// returns its records: the audit takes them as the job key's word,
// whatever slot they name (wqLog.disk). On rank 0 they are its own
// reading's.
func (w *WorkQueue) shareDisk(ctx context.Context, sum [32]byte, disk *wqLog, b []byte) ([]wqRecord, error) {
	got, err := w.bcastLen(ctx, 0, b)
	if err != nil {
		return nil, err
	}
	return w.diskFrom(got, sum)
}

// diskFrom is the records of the log on disk whose bytes b rank 0 sent.
func (w *WorkQueue) diskFrom(b []byte, sum [32]byte) ([]wqRecord, error) {
	recs, n, err := w.parseDisk(b, sum)
	if err == nil && n != len(b) {
		err = fmt.Errorf("%d bytes after its last whole chunk", len(b)-n)
	}
	if err != nil {
		// Rank 0 verified these bytes before it sent them.
		return nil, w.liar(0, "a log on disk whose chunks do not verify: %v", err)
	}
	return recs, nil
}

// maxWorkLog bounds a queue's log as it travels.
const maxWorkLog = 1 << 32

// maxWorkExtras bounds the executions one rank brings to a queue's start
// beyond the log (a gather's part).
const maxWorkExtras = (wire.MaxPayload - 64) / (wqRecordHead)

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
func (w *WorkQueue) sync(ctx context.Context, sum [32]byte, disk *wqLog, fromDisk []wqRecord) error {
	w.mu.Lock()
	old := w.c.links.queues[w.name]
	if old == nil || old.sum != sum {
		old = newWQLog(sum)
		old.since = w.c.inc
	}
	for _, r := range fromDisk {
		old.disk[r.key()] = true
	}
	if disk != nil {
		// A restarted job: its log is the one on disk (and what this
		// process knows beyond it).
		for _, r := range old.pub {
			disk.add(r)
		}
		for _, r := range old.recs {
			disk.add(r)
		}
		disk.own, disk.since, disk.disk = old.own, old.since, old.disk
		old = disk
	}
	mine := old.encode()
	pub := len(old.pub)
	w.mu.Unlock()
	head := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, uint64(pub)), uint64(len(mine)))
	heads, err := w.q.Allgather(ctx, head)
	if err != nil {
		return err
	}
	src, best, size := 0, uint64(0), uint64(0)
	for r := 0; r < w.q.Size(); r++ {
		n, length := binary.BigEndian.Uint64(heads[16*r:]), binary.BigEndian.Uint64(heads[16*r+8:])
		if length > maxWorkLog || n > uint64(len(w.items)) {
			return w.liar(r, "a log of %d published items in %d bytes (%d items, at most %d bytes)", n, length, len(w.items), uint64(maxWorkLog))
		}
		if n > best || r == 0 {
			src, best, size = r, n, length
		}
	}
	all, err := w.bcastBytes(ctx, src, mine, size)
	if err != nil {
		return err
	}
	l, err := w.logOf(all, sum, src, old)
	if err != nil {
		return err
	}
	// The executions this rank knows beyond it, and whether it holds
	// published records beyond it.
	var extra []byte
	more := byte(0)
	for _, r := range old.recs {
		// Only its own: another slot's execution it knows of came to it
		// at an earlier start, with the log every rank got.
		if r.slot == w.c.links.self && !l.exec[wqKey{r.f, r.id}] && len(extra) < maxWorkExtras*wqRecordHead {
			extra = r.append(extra)
		}
	}
	for id := range old.pub {
		if _, ok := l.pub[id]; !ok {
			more = 1
		}
	}
	lens, err := w.q.Allgather(ctx, append(binary.BigEndian.AppendUint32(nil, uint32(len(extra))), more))
	if err != nil {
		return err
	}
	longest := 0
	for r := 0; r < w.q.Size(); r++ {
		n := int(binary.BigEndian.Uint32(lens[5*r:]))
		if n > maxWorkExtras*wqRecordHead || lens[5*r+4] > 1 {
			return w.liar(r, "%d bytes of executions beyond the log, and a flag of %d", n, lens[5*r+4])
		}
		longest = max(longest, n)
	}
	for r := 0; r < w.q.Size(); r++ {
		if lens[5*r+4] == 0 {
			continue
		}
		var beyond []byte
		if r == w.q.Rank() {
			ids := make([]int, 0)
			for id := range old.pub {
				if _, ok := l.pub[id]; !ok {
					ids = append(ids, id)
				}
			}
			sort.Ints(ids)
			for _, id := range ids {
				beyond = old.pub[id].append(beyond)
			}
		}
		got, err := w.bcastLen(ctx, r, beyond)
		if err != nil {
			return err
		}
		recs, err := parseRecords(got, len(w.items), w.c.links.slots)
		if err != nil {
			return w.liar(r, "%v", err)
		}
		if err := w.audit(recs, r, l); err != nil {
			return err
		}
		for _, rec := range recs {
			if _, dup := l.pub[rec.id]; rec.kind != 'P' || dup {
				return w.liar(r, "a record of item %d beyond the log that is no publication of an item it lacks", rec.id)
			}
			l.add(rec)
		}
	}
	if longest > 0 {
		got, err := w.q.Gather(ctx, 0, append(extra, make([]byte, longest-len(extra))...))
		if err != nil {
			return err
		}
		var merged []byte
		if w.q.Rank() == 0 {
			for r := 0; r < w.q.Size(); r++ {
				n := int(binary.BigEndian.Uint32(lens[5*r:]))
				recs, err := parseRecords(got[longest*r:longest*r+n], len(w.items), w.c.links.slots)
				if err != nil {
					return w.liar(r, "%v", err)
				}
				for _, rec := range recs {
					if rec.kind != 'X' || rec.slot != w.q.worldSlot(r) {
						return w.liar(r, "a record beyond the log that is no execution of its own (kind %c, slot %d)", rec.kind, rec.slot)
					}
					merged = rec.append(merged)
				}
			}
		}
		if merged, err = w.bcastLen(ctx, 0, merged); err != nil {
			return err
		}
		recs, err := parseRecords(merged, len(w.items), w.c.links.slots)
		if err != nil {
			return w.liar(0, "%v", err)
		}
		if err := w.audit(recs, 0, l); err != nil {
			return err
		}
		for _, rec := range recs {
			l.add(rec)
		}
	}
	w.mu.Lock()
	w.c.links.queues[w.name] = l
	w.log = l
	w.mu.Unlock()
	return nil
}

// logOf is the log of the records b, which rank src sent, audited
// against what this process computed (old's).
func (w *WorkQueue) logOf(b []byte, sum [32]byte, src int, old *wqLog) (*wqLog, error) {
	recs, err := parseRecords(b, len(w.items), w.c.links.slots)
	if err != nil {
		return nil, w.liar(src, "%v", err)
	}
	if err := w.audit(recs, src, old); err != nil {
		return nil, err
	}
	l := newWQLog(sum)
	l.own, l.since, l.disk = old.own, old.since, old.disk
	for _, rec := range recs {
		l.add(rec)
	}
	return l, nil
}

// bcastLen broadcasts b from rank root of the queue, its length first.
func (w *WorkQueue) bcastLen(ctx context.Context, root int, b []byte) ([]byte, error) {
	n, err := w.q.Bcast(ctx, root, binary.BigEndian.AppendUint64(nil, uint64(len(b))))
	if err != nil {
		return nil, err
	}
	if len(n) != 8 {
		return nil, w.liar(root, "a log's length in %d bytes", len(n))
	}
	if size := binary.BigEndian.Uint64(n); size > maxWorkLog {
		return nil, w.liar(root, "a log of %d bytes, at most %d", size, uint64(maxWorkLog))
	}
	return w.bcastBytes(ctx, root, b, binary.BigEndian.Uint64(n))
}

// bcastBytes broadcasts b, of size bytes, from rank root of the queue, in
// parts of at most half a frame.
func (w *WorkQueue) bcastBytes(ctx context.Context, root int, b []byte, size uint64) ([]byte, error) {
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

// Next leases the next task to this rank: ok is false once every item is
// published (the queue has ended on every rank; Results holds them all).
// After a loss it raises H1611 or H1626 on every live rank (a program that
// manages its losses shrinks, and starts the queue again on the new
// communicator: its log goes on).
func (w *WorkQueue) Next(ctx context.Context) (t *Task, ok bool, err error) {
	t, ok, err = w.next(ctx)
	return t, ok, w.lost(err)
}

// serverEnd is the end of the master's or buddy's goroutine: a loss, a
// revoke or the job's end is passed on (lost); any other error ends the
// job, so that no rank waits for a server that has gone.
func (w *WorkQueue) serverEnd(err error) error {
	switch codes.Of(err) {
	case 0:
		if err != nil {
			w.c.fail(err)
		}
		return err
	case codes.PeerLost, codes.Revoked, codes.JobEnded, codes.Finished, codes.ProtocolViolation:
		return w.lost(err)
	}
	w.c.fail(err)
	return err
}

// lost passes err on. In a program that manages its losses, one of a
// loss or a revoke first revokes the queue's communicator, so that no
// rank waits on a live one that will never answer (the master, the
// buddy, a worker waiting for a lease). (When the job recovers in place,
// the generation's end reaches every rank, as H1611.)
func (w *WorkQueue) lost(err error) error {
	if c := codes.Of(err); (c == codes.PeerLost || c == codes.Revoked) && w.c.links.lossReturn.Load() {
		w.q.Revoke()
	}
	return err
}

func (w *WorkQueue) next(ctx context.Context) (t *Task, ok bool, err error) {
	if w.ended {
		return nil, false, nil
	}
	if w.endSeen { // the end came, and finish did not finish (a context's end)
		return nil, false, w.finish(ctx)
	}
	if w.held != nil {
		return nil, false, &codes.Error{Code: codes.OutOfRange, Op: "work_queue", Rank: -1,
			Msg: fmt.Sprintf("work_queue %q: task %d is not done: give its result (done) before the next task", w.name, w.held.ID)}
	}
	if !w.asked {
		if err := w.request(ctx, []byte{'R'}); err != nil {
			return nil, false, err
		}
		w.asked = true
	}
	b, err := w.reply(ctx)
	if err != nil {
		return nil, false, err
	}
	w.asked = false
	switch {
	case len(b) == 1+4+8+4 && b[0] == 'L':
		f := fence{binary.BigEndian.Uint32(b[1:]), binary.BigEndian.Uint64(b[5:])}
		id := int(binary.BigEndian.Uint32(b[13:]))
		if id >= len(w.items) {
			return nil, false, w.liar(w.masterRank, "a lease of item %d (%d items)", id, len(w.items))
		}
		w.held = &Task{ID: id, Data: w.items[id], f: f}
		return w.held, true, nil
	case len(b) == 1 && b[0] == 'E':
		w.endSeen = true
		return nil, false, w.finish(ctx)
	}
	return nil, false, w.liar(w.masterRank, "a reply of %d bytes that is no lease or end", len(b))
}

// Done gives the result of t, a task this rank holds. A result over
// MaxWorkResult or a task not held is H1616, and the queue goes on.
func (w *WorkQueue) Done(ctx context.Context, t *Task, result []byte) error {
	if t == nil || t != w.held {
		id := -1
		if t != nil {
			id = t.ID
		}
		return &codes.Error{Code: codes.OutOfRange, Op: "work_queue", Rank: -1,
			Msg: fmt.Sprintf("work_queue %q: done for task %d, which this rank does not hold", w.name, id)}
	}
	if len(result) > MaxWorkResult {
		return &codes.Error{Code: codes.OutOfRange, Op: "work_queue", Rank: -1,
			Msg: fmt.Sprintf("work_queue %q: a result of %d bytes for task %d, at most %d", w.name, len(result), t.ID, MaxWorkResult)}
	}
	w.dones++
	w.c.failurePoint("work-done", w.dones)
	b := []byte{'D'}
	b = binary.BigEndian.AppendUint32(b, t.f.gen)
	b = binary.BigEndian.AppendUint64(b, t.f.lease)
	b = binary.BigEndian.AppendUint32(b, uint32(t.ID))
	sum := sha256.Sum256(result)
	w.mu.Lock()
	w.log.own[wqKey{t.f, t.ID}] = sum // before it goes: the log may name it as soon as it does
	w.mu.Unlock()
	if err := w.request(ctx, append(b, result...)); err != nil {
		return w.lost(err)
	}
	// This rank's own record of the execution: if the master is lost
	// before it logs the done, the next start counts it (sync).
	w.mu.Lock()
	w.log.add(wqRecord{kind: 'X', f: t.f, id: t.ID, slot: w.c.links.self, sum: sum})
	w.mu.Unlock()
	w.held, w.asked = nil, true
	return nil
}

// request sends a request or done to this rank's master: in the process
// on a master.
func (w *WorkQueue) request(ctx context.Context, b []byte) error {
	if w.reqs == nil {
		return w.q.Send(ctx, w.masterRank, wqTagReq, b)
	}
	select {
	case w.reqs <- wqReq{w.masterRank, b}:
		return nil
	case <-w.srvDone:
		return w.served()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// reply is the master's answer to this rank's request.
func (w *WorkQueue) reply(ctx context.Context) ([]byte, error) {
	if w.reqs == nil {
		return w.q.Recv(ctx, w.masterRank, wqTagRep)
	}
	select {
	case b := <-w.local:
		return b, nil
	case <-w.srvDone:
		select {
		case b := <-w.local: // its last reply, the end
			return b, nil
		default:
		}
		return nil, w.served()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// served is the end of this rank's master or buddy: its error, or one
// that says it ended before this rank's request.
func (w *WorkQueue) served() error {
	if w.srvErr != nil {
		return w.srvErr
	}
	return &codes.Error{Code: codes.Finished, Op: "work_queue", Rank: -1, Msg: fmt.Sprintf("work_queue %q: the queue has ended", w.name)}
}

// finish ends the queue on this rank: the master's and buddy's
// goroutines have ended, and each master sends every rank its shard's
// log (the published records of its shard, and the executions it knows).
func (w *WorkQueue) finish(ctx context.Context) error {
	if w.srvDone != nil {
		select {
		case <-w.srvDone:
			if w.srvErr != nil {
				return w.srvErr
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for g := range w.groups {
		root := wqFirst(g, w.q.Size(), w.groups)
		var shard []byte
		if w.q.Rank() == root {
			w.mu.Lock()
			shard = w.log.encodeShard(g, w.groups)
			w.mu.Unlock()
		}
		all, err := w.bcastLen(ctx, root, shard)
		if err != nil {
			return err
		}
		recs, err := parseRecords(all, len(w.items), w.c.links.slots)
		if err != nil {
			return w.liar(root, "%v", err)
		}
		w.mu.Lock()
		err = w.audit(recs, root, w.log)
		if err == nil {
			for _, r := range recs {
				w.log.add(r)
			}
		}
		w.mu.Unlock()
		if err != nil {
			return err
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for id := range w.items {
		if _, ok := w.log.pub[id]; !ok {
			g := id % w.groups
			return w.liar(wqFirst(g, w.q.Size(), w.groups), "ended without item %d published (%d of %d items are)", id, len(w.log.pub), len(w.items))
		}
	}
	w.ended = true
	return nil
}

// Results is every item's result by id, once Next returned false.
func (w *WorkQueue) Results() (map[int][]byte, error) {
	if !w.ended {
		return nil, &codes.Error{Code: codes.OutOfRange, Op: "work_queue", Rank: -1,
			Msg: fmt.Sprintf("work_queue %q: results before the queue ended (iterate it to the end first)", w.name)}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[int][]byte, len(w.log.pub))
	for id, r := range w.log.pub {
		out[id] = r.result
	}
	return out, nil
}

// Result is item id's result, once Next returned false.
func (w *WorkQueue) Result(id int) ([]byte, error) {
	if !w.ended {
		return nil, &codes.Error{Code: codes.OutOfRange, Op: "work_queue", Rank: -1,
			Msg: fmt.Sprintf("work_queue %q: a result before the queue ended (iterate it to the end first)", w.name)}
	}
	if id < 0 || id >= len(w.items) {
		return nil, &codes.Error{Code: codes.OutOfRange, Op: "work_queue", Rank: -1,
			Msg: fmt.Sprintf("work_queue %q: item %d, the queue has %d", w.name, id, len(w.items))}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.log.pub[id].result, nil
}

// Masters is the number of the queue's masters (groups) in this start:
// one a WorkOptions.PerMaster ranks, at most half the ranks.
func (w *WorkQueue) Masters() int { return w.groups }

// Stats are the queue's statistics from its log as this rank holds it
// (after the end, the whole log: the same on every rank).
func (w *WorkQueue) Stats() WorkStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.log.stats(len(w.items))
	st.Slots = w.c.links.slots
	return st
}

// master serves its shard of the queue to its group until every rank of
// the group was told its end.
func (w *WorkQueue) master(ctx context.Context) error {
	gen := w.c.inc
	// Leases made in this generation: numbered after every fence of it
	// in the log, so that a fence is never given twice, also by a job
	// launched again whose generations start from 0 again.
	var next uint64
	// What an honest rank may send: a done of the one lease it holds
	// (holds: its item and lease number), else a request; nothing while
	// it waits for a reply (asked) or after it was told the end.
	type lease struct {
		id int
		n  uint64
	}
	holds := map[int]lease{}
	asked := map[int]bool{}
	ended := map[int]bool{}
	var pending []int
	published, shard := 0, 0 // of this master's shard
	w.mu.Lock()
	for _, r := range w.log.pub {
		if r.f.gen == gen {
			next = max(next, r.f.lease)
		}
	}
	for _, r := range w.log.recs {
		if r.f.gen == gen {
			next = max(next, r.f.lease)
		}
	}
	for id := w.group; id < len(w.items); id += w.groups {
		shard++
		if _, done := w.log.pub[id]; done {
			published++
		} else {
			pending = append(pending, id)
		}
	}
	w.mu.Unlock()
	var parked []int
	told := 0
	// The log under the checkpoint directory, written on a goroutine of
	// its own; the queue ends when it is written whole.
	// With several masters rank 0 writes theirs too (collect).
	var wr *wqWriter
	var collected chan error
	if w.diskOn() {
		wr = w.startWriter()
		defer func() {
			if wr != nil {
				wr.finish()
			}
		}()
		if w.diskAll {
			collected = make(chan error, 1)
			go func() { collected <- w.collect(ctx, wr) }()
		}
	}
	send := func(to int, b []byte) error {
		if to == w.masterRank {
			w.local <- b // the master's own worker has one request out at most: never blocks
			return nil
		}
		return w.q.Send(ctx, to, wqTagRep, b)
	}
	reply := func(to int) error {
		switch {
		case len(pending) > 0:
			id := pending[0]
			pending = pending[1:]
			next++
			holds[to], asked[to] = lease{id, next}, false
			b := []byte{'L'}
			b = binary.BigEndian.AppendUint32(b, gen)
			b = binary.BigEndian.AppendUint64(b, next)
			return send(to, binary.BigEndian.AppendUint32(b, uint32(id)))
		case published == shard:
			told++
			ended[to], asked[to] = true, false
			return send(to, []byte{'E'})
		}
		parked = append(parked, to)
		return nil
	}
	// The other ranks' requests are read by a goroutine of their own,
	// which the master's end withdraws, and waits for: its receive is an
	// open operation until the goroutine has seen the cancel, and a
	// program that finishes right after the queue would end with it open
	// (H1617, "recv from rank -1 tag 1": tests/elastic
	// TestRerunWithoutJobSaysSo, about one run in eight).
	rctx, stop := context.WithCancel(ctx)
	readDone := make(chan struct{})
	defer func() {
		stop()
		if w.groupSize > 1 {
			<-readDone
		}
	}()
	readErr := make(chan error, 1)
	if w.groupSize > 1 {
		go func() {
			defer close(readDone)
			for {
				b, env, err := w.q.RecvFrom(rctx, AnySource, wqTagReq)
				if err != nil {
					readErr <- err
					return
				}
				select {
				case w.reqs <- wqReq{env.Source, b}:
				case <-rctx.Done():
					return
				}
			}
		}()
	}
	for told < w.groupSize {
		// A rank lost (to a program that manages its losses) ends the
		// queue here, and its revoke everywhere: the ranks shrink, and
		// the queue starts again from its log, the lost rank's lease
		// leased again. (Without it, the others would wait for ever on a
		// master that waits for the lost one.)
		wake := w.c.links.losses()
		if lost := w.q.Failed(); len(lost) > 0 {
			return &codes.Error{Code: codes.PeerLost, Op: "work_queue", Rank: lost[0],
				Msg:   fmt.Sprintf("work_queue %q: rank %d lost: the queue goes on from its log once the ranks shrink", w.name, lost[0]),
				Cause: &codes.Cause{Kind: codes.CauseLost, Rank: lost[0], Code: codes.PeerLost}}
		}
		var req wqReq
		select {
		case req = <-w.reqs:
		case err := <-readErr:
			return err
		case <-wake:
			continue
		case <-ctx.Done():
			return ctx.Err()
		}
		b, from := req.b, req.from
		if from < w.masterRank || from >= w.masterRank+w.groupSize {
			return w.liar(from, "a message to the master of group %d (ranks %d to %d)", w.group, w.masterRank, w.masterRank+w.groupSize-1)
		}
		if asked[from] || ended[from] {
			return w.liar(from, "a message while it waits for a reply or after the end")
		}
		held, holding := holds[from]
		switch {
		case len(b) == 1 && b[0] == 'R':
			if holding {
				return w.liar(from, "a request while it holds item %d", held.id)
			}
		case len(b) >= 17 && b[0] == 'D':
			f := fence{binary.BigEndian.Uint32(b[1:]), binary.BigEndian.Uint64(b[5:])}
			id := int(binary.BigEndian.Uint32(b[13:]))
			if f.gen > gen || (f.gen == gen && (!holding || held != lease{id, f.lease})) || (f.gen < gen && holding) || id >= len(w.items) || id%w.groups != w.group {
				// A fence no master made, another rank's lease, or one
				// it gave already.
				return w.liar(from, "a done of item %d with fence (%d, %d), which no master gave it (generation %d, %d leases)", id, f.gen, f.lease, gen, next)
			}
			// A fence of an earlier generation is stale: its execution
			// is counted, never published.
			rec := wqRecord{kind: 'X', f: f, id: id, slot: w.q.worldSlot(from), sum: sha256.Sum256(b[17:])}
			if f.gen == gen {
				rec.kind, rec.result = 'P', append([]byte{}, b[17:]...)
				delete(holds, from)
			}
			if err := w.logRecord(ctx, rec); err != nil {
				return err
			}
			if rec.kind == 'P' {
				published++
			}
			if wr != nil {
				wr.add(rec)
			} else if w.diskAll {
				if err := w.q.Send(ctx, 0, wqTagDsk, rec.append(nil)); err != nil {
					return err
				}
			}
		default:
			return w.liar(from, "a request of %d bytes that is no request or done", len(b))
		}
		asked[from] = true
		if err := reply(from); err != nil {
			return err
		}
		if published == shard {
			for _, p := range parked {
				if err := reply(p); err != nil {
					return err
				}
			}
			parked = nil
		}
	}
	if collected != nil {
		// The other masters' records, until each said its end.
		select {
		case err := <-collected:
			if err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if wr != nil {
		err := wr.finish()
		wr = nil
		if err != nil {
			return err
		}
	} else if w.diskAll {
		if err := w.q.Send(ctx, 0, wqTagDsk, []byte{'E'}); err != nil {
			return err
		}
	}
	if w.buddyRank >= 0 {
		return w.q.Send(ctx, w.buddyRank, wqTagLog, []byte{'E'})
	}
	return nil
}

// collect takes, on rank 0, the records the other masters logged, for the
// log on disk, until each of them said its end. They are checked as any
// log record is, and only masters send them.
func (w *WorkQueue) collect(ctx context.Context, wr *wqWriter) error {
	ended := map[int]bool{}
	for len(ended) < w.groups-1 {
		b, env, err := w.q.RecvFrom(ctx, AnySource, wqTagDsk)
		if err != nil {
			return err
		}
		from := env.Source
		g := from * w.groups / w.q.Size()
		if from == 0 || from != wqFirst(g, w.q.Size(), w.groups) || ended[from] {
			return w.liar(from, "a record for the log on disk, which only a master sends, before its end")
		}
		if len(b) == 1 && b[0] == 'E' {
			ended[from] = true
			continue
		}
		recs, err := parseRecords(b, len(w.items), w.c.links.slots)
		if err != nil || len(recs) != 1 || recs[0].id%w.groups != g {
			return w.liar(from, "a record for the log on disk that does not parse or is not of its shard (%v)", err)
		}
		w.mu.Lock()
		err = w.audit(recs, from, w.log)
		w.mu.Unlock()
		if err != nil {
			return err
		}
		wr.add(recs[0])
	}
	return nil
}

// logRecord adds a record to the log: the buddy's copy first (its
// acknowledgement), then the master's, so that a result counts only
// once two ranks hold it.
func (w *WorkQueue) logRecord(ctx context.Context, r wqRecord) error {
	if w.buddyRank >= 0 {
		if err := w.q.Send(ctx, w.buddyRank, wqTagLog, r.append(nil)); err != nil {
			return err
		}
		ack, err := w.q.Recv(ctx, w.buddyRank, wqTagAck)
		if err != nil {
			return err
		}
		if len(ack) != 0 {
			return w.liar(w.buddyRank, "a log acknowledgement of %d bytes", len(ack))
		}
	}
	w.mu.Lock()
	w.log.add(r)
	w.mu.Unlock()
	return nil
}

// buddy holds its master's records until the master's end.
func (w *WorkQueue) buddy(ctx context.Context) error {
	for {
		b, err := w.q.Recv(ctx, w.masterRank, wqTagLog)
		if err != nil {
			return err
		}
		if len(b) == 1 && b[0] == 'E' {
			return nil
		}
		recs, err := parseRecords(b, len(w.items), w.c.links.slots)
		if err != nil || len(recs) != 1 || recs[0].id%w.groups != w.group {
			return w.liar(w.masterRank, "a log record that does not parse or is not of its shard (%v)", err)
		}
		w.mu.Lock()
		err = w.audit(recs, w.masterRank, w.log)
		if err == nil {
			w.log.add(recs[0])
		}
		w.mu.Unlock()
		if err != nil {
			return err
		}
		if err := w.q.Send(ctx, w.masterRank, wqTagAck, nil); err != nil {
			return err
		}
	}
}

// liar ends the job: rank r of the queue sent what no honest rank sends.
func (w *WorkQueue) liar(r int, format string, args ...any) error {
	err := violation(w.q.worldRank(r), "work_queue %q: "+format, append([]any{w.name}, args...)...)
	w.c.fail(err)
	return err
}

// worldSlot is the slot of rank r of c.
func (c *Comm) worldSlot(r int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.slotOfLocked(r)
}
