package workq

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sync"

	"sperli/codes"
	"sperli/runtime"
	"sperli/wire"
)

// DefaultPerMaster is the ranks a work queue's master serves at most by
// default (SPEC §19): a queue on more ranks has several masters.
const DefaultPerMaster = 64

// maxPerMaster bounds Options.PerMaster.
const maxPerMaster = 1 << 20

// MaxResult bounds a result (a frame's payload, less the done's head).
const MaxResult = wire.MaxPayload - 64

// maxItems bounds a queue's items (their ids are u32 on the wire).
const maxItems = 1 << 24

// Options are a work queue's options, the same on every rank.
type Options struct {
	// PerMaster is the ranks a master serves at most (2 to 1,048,576;
	// 0: DefaultPerMaster). A queue on n ranks has ceil(n / PerMaster)
	// masters, at most n / 2: every master has a buddy.
	PerMaster int
}

// Task is an item leased to this rank: its id (its index in the items)
// and data (the item; the queue's, not to be changed), and the lease's
// fence.
type Task struct {
	ID   int
	Data []byte
	f    fence
}

// kept is what the process keeps of a queue by name (runtime.Hook.Keep):
// its log, and the lock that guards it, shared by every start of the
// queue and by its master's and buddy's goroutines.
type kept struct {
	mu  sync.Mutex
	log *qlog // nil until the queue's first start
}

// Queue is a work queue on a communicator (SPEC §19): Next leases a
// task, Done gives its result, and once every item is published Next
// returns false on every rank and Results is the same on every rank.
// One goroutine uses it.
type Queue struct {
	c, q   *runtime.Comm
	hook   runtime.Hook // c's
	name   string
	items  [][]byte
	sum    [32]byte // of the name, the options and the items
	kept   *kept
	mu     *sync.Mutex // kept's
	log    *qlog       // this start's, shared with the master and buddy goroutines while they run
	layout             // the groups
	// diskAll: rank 0 writes the log to disk, and the other masters
	// send it their records (tagDisk).
	diskAll bool
	worker
	// This rank's master or buddy goroutine: closed at its end, with
	// srvErr set; nil on the other ranks.
	srvDone chan struct{}
	srvErr  error
	// A master talks to its own worker in the process: its requests join
	// the others' (reqs), and its replies come on local.
	reqs  chan req
	local chan []byte
}

// layout is a start's groups: their number, this rank's, its master's and
// buddy's ranks (-1: none) and the size of its group.
type layout struct {
	groups, group, masterRank, buddyRank, groupSize int
}

// worker is this rank's side of the queue, as its program calls it.
type worker struct {
	held    *Task
	asked   bool // a request (or a done) is out: the next reply is this rank's
	dones   int  // the results this rank gave
	endSeen bool // the master's end came: Next goes on with finish
	ended   bool
}

// req is a request or done that came to the master.
type req struct {
	from int
	b    []byte
}

// Tags of a queue's messages on its private communicator (part of the
// protocol: docs/workqueue.md).
const (
	tagReq  = 1 // worker → master: a request, or a done that is one
	tagRep  = 2 // master → worker: a lease, or the end
	tagLog  = 3 // master → buddy: a log record, or the end
	tagAck  = 4 // buddy → master: the record is held
	tagDisk = 5 // master → rank 0: a record for the log on disk, or the master's end
)

// New starts the queue name of items on c: a collective call, with the
// same name, items and options on every rank (else H1613 on every rank).
// A queue of that name this process ran before, in an earlier generation
// or on a communicator the job shrank from, goes on from its log: the
// published results stay, and only the rest is leased. The queue keeps
// items (the caller must not change them). Bad arguments are H1616.
func New(ctx context.Context, c *runtime.Comm, name string, items [][]byte, opt Options) (*Queue, error) {
	sum, err := check(name, items, &opt)
	if err != nil {
		return nil, err
	}
	q, err := c.Split(ctx, 0, c.Rank())
	if err != nil {
		return nil, err
	}
	w := &Queue{c: c, q: q, hook: c.Hook(), name: name, items: items, sum: sum}
	w.kept = w.hook.Keep("workq/"+name, func() any { return &kept{} }).(*kept)
	w.mu = &w.kept.mu
	w.layout = layoutOf(q.Size(), q.Rank(), opt.PerMaster)
	if err := w.start(ctx); err != nil {
		return nil, err
	}
	w.serve(ctx)
	return w, nil
}

// check checks New's arguments and returns the SHA-256 of the name, the
// options and the items.
func check(name string, items [][]byte, opt *Options) ([32]byte, error) {
	if len(items) == 0 || len(items) > maxItems || len(name) > 255 {
		return [32]byte{}, &codes.Error{Code: codes.OutOfRange, Op: "work_queue", Rank: -1,
			Msg: fmt.Sprintf("work_queue: %d items and a name of %d bytes; want 1 to %d items and a name of at most 255", len(items), len(name), maxItems)}
	}
	if opt.PerMaster == 0 {
		opt.PerMaster = DefaultPerMaster
	}
	if opt.PerMaster < 2 || opt.PerMaster > maxPerMaster {
		return [32]byte{}, &codes.Error{Code: codes.OutOfRange, Op: "work_queue", Rank: -1,
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
	return sum, nil
}

// layoutOf is the groups of a queue on size ranks, as rank sees them.
func layoutOf(size, rank, perMaster int) layout {
	var l layout
	l.groups = groupsOf(size, perMaster)
	l.group = rank * l.groups / size
	l.masterRank = first(l.group, size, l.groups)
	l.groupSize = first(l.group+1, size, l.groups) - l.masterRank
	l.buddyRank = -1
	if l.groupSize > 1 {
		l.buddyRank = l.masterRank + 1
	}
	return l
}

// Next leases the next task to this rank: ok is false once every item is
// published (the queue has ended on every rank; Results holds them all).
// After a loss it raises H1611 or H1626 on every live rank (a program that
// manages its losses shrinks, and starts the queue again on the new
// communicator: its log goes on). The next task before the held one is
// done is H1616.
func (w *Queue) Next(ctx context.Context) (t *Task, ok bool, err error) {
	t, ok, err = w.next(ctx)
	return t, ok, w.lost(err)
}

func (w *Queue) next(ctx context.Context) (t *Task, ok bool, err error) {
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
		if err := w.request(ctx, []byte{wire.WorkRequest}); err != nil {
			return nil, false, err
		}
		w.asked = true
	}
	b, err := w.reply(ctx)
	if err != nil {
		return nil, false, err
	}
	w.asked = false
	m, err := wire.DecodeWorkReply(b, len(w.items))
	if err != nil {
		return nil, false, w.liar(w.masterRank, "%s", why(err))
	}
	if m.Kind == wire.WorkEnd {
		w.endSeen = true
		return nil, false, w.finish(ctx)
	}
	w.held = &Task{ID: m.Item, Data: w.items[m.Item], f: m.Fence}
	return w.held, true, nil
}

// Done gives the result of t, a task this rank holds; the queue copies
// result before it returns. A result over MaxResult or a task not held is
// H1616, and the queue goes on.
func (w *Queue) Done(ctx context.Context, t *Task, result []byte) error {
	if t == nil || t != w.held {
		id := -1
		if t != nil {
			id = t.ID
		}
		return &codes.Error{Code: codes.OutOfRange, Op: "work_queue", Rank: -1,
			Msg: fmt.Sprintf("work_queue %q: done for task %d, which this rank does not hold", w.name, id)}
	}
	if len(result) > MaxResult {
		return &codes.Error{Code: codes.OutOfRange, Op: "work_queue", Rank: -1,
			Msg: fmt.Sprintf("work_queue %q: a result of %d bytes for task %d, at most %d", w.name, len(result), t.ID, MaxResult)}
	}
	w.dones++
	w.hook.FailurePoint("work-done", w.dones)
	sum := sha256.Sum256(result)
	w.mu.Lock()
	w.log.own[key{t.f, t.ID}] = sum // before it goes: the log may name it as soon as it does
	w.mu.Unlock()
	if err := w.request(ctx, wire.AppendWorkDone(nil, t.f, t.ID, result)); err != nil {
		return w.lost(err)
	}
	// This rank's own record of the execution: if the master is lost
	// before it logs the done, the next start counts it (sync).
	w.mu.Lock()
	w.log.add(record{Kind: wire.WorkExecuted, Fence: t.f, Item: t.ID, Slot: w.c.Slot(), Sum: sum})
	w.mu.Unlock()
	w.held, w.asked = nil, true
	return nil
}

// request sends a request or done to this rank's master: in the process
// on a master.
func (w *Queue) request(ctx context.Context, b []byte) error {
	if w.reqs == nil {
		return w.q.Send(ctx, w.masterRank, tagReq, b)
	}
	select {
	case w.reqs <- req{w.masterRank, b}:
		return nil
	case <-w.srvDone:
		return w.served()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// reply is the master's answer to this rank's request.
func (w *Queue) reply(ctx context.Context) ([]byte, error) {
	if w.reqs == nil {
		return w.q.Recv(ctx, w.masterRank, tagRep)
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
func (w *Queue) served() error {
	if w.srvErr != nil {
		return w.srvErr
	}
	return &codes.Error{Code: codes.Finished, Op: "work_queue", Rank: -1, Msg: fmt.Sprintf("work_queue %q: the queue has ended", w.name)}
}

// finish ends the queue on this rank: the master's and buddy's
// goroutines have ended, and each master sends every rank its shard's
// log (the published records of its shard, and the executions it knows).
func (w *Queue) finish(ctx context.Context) error {
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
		root := first(g, w.q.Size(), w.groups)
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
		if err := w.take(all, root, w.log, false); err != nil {
			return err
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for id := range w.items {
		if _, ok := w.log.pub[id]; !ok {
			g := id % w.groups
			return w.liar(first(g, w.q.Size(), w.groups), "ended without item %d published (%d of %d items are)", id, len(w.log.pub), len(w.items))
		}
	}
	w.ended = true
	return nil
}

// take decodes the records b that rank from sent, audits them and adds
// them to l (under the log's lock when locked).
func (w *Queue) take(b []byte, from int, l *qlog, unlocked bool) error {
	recs, err := wire.DecodeWorkRecords(b, len(w.items), w.hook.Slots())
	if err != nil {
		return w.liar(from, "%s", why(err))
	}
	if !unlocked {
		w.mu.Lock()
		defer w.mu.Unlock()
	}
	if err := l.audit(recs, w.c.Slot()); err != nil {
		return w.liar(from, "%v", err)
	}
	for _, r := range recs {
		l.add(r)
	}
	return nil
}

// Results is every item's result by id, once Next returned false; the
// map is the caller's, its values the queue's (not to be changed).
// Before the end it is H1616.
func (w *Queue) Results() (map[int][]byte, error) {
	if !w.ended {
		return nil, &codes.Error{Code: codes.OutOfRange, Op: "work_queue", Rank: -1,
			Msg: fmt.Sprintf("work_queue %q: results before the queue ended (iterate it to the end first)", w.name)}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[int][]byte, len(w.log.pub))
	for id, r := range w.log.pub {
		out[id] = r.Result
	}
	return out, nil
}

// Result is item id's result, once Next returned false (the queue's
// bytes, not to be changed). Before the end, or an id out of range, it
// is H1616.
func (w *Queue) Result(id int) ([]byte, error) {
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
	return w.log.pub[id].Result, nil
}

// Masters is the number of the queue's masters (groups) in this start:
// one a Options.PerMaster ranks, at most half the ranks.
func (w *Queue) Masters() int { return w.groups }

// Stats are the queue's statistics from its log as this rank holds it
// (after the end, the whole log: the same on every rank). Safe to call
// at any time from the goroutine that uses the queue.
func (w *Queue) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.log.stats(len(w.items))
	st.Slots = w.hook.Slots()
	return st
}

// liar ends the job: rank r of the queue sent what no honest rank sends.
func (w *Queue) liar(r int, format string, args ...any) error {
	err := codes.Violation(w.q.Hook().JobRank(r), "work_queue %q: "+format, append([]any{w.name}, args...)...)
	w.hook.End(err)
	return err
}

// why is err's message without its code (a refusal of package wire's,
// which the caller names a rank in).
func why(err error) string {
	if e := codes.As(err); e != nil && e.Msg != "" {
		return e.Msg
	}
	return err.Error()
}

// lost passes err on. In a program that manages its losses, one of a
// loss or a revoke first revokes the queue's communicator, so that no
// rank waits on a live one that will never answer (the master, the
// buddy, a worker waiting for a lease). (When the job recovers in place,
// the generation's end reaches every rank, as H1611.)
func (w *Queue) lost(err error) error {
	if c := codes.Of(err); (c == codes.PeerLost || c == codes.Revoked) && w.hook.LossReturn() {
		w.q.Revoke()
	}
	return err
}
