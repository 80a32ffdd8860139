package starlib

import (
	"context"
	"fmt"
	"sort"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"sperli/workq"
)

// WorkQueue is the value of comm.work_queue (SPEC §19): iterating it
// leases tasks, done gives a task's result, results and stats read the
// log once the iteration has ended.
type WorkQueue struct {
	w      *workq.Queue
	ctx    context.Context
	thread *starlark.Thread
	name   string
	items  []starlark.Value
	err    error // the iteration's, raised by every later call
}

var (
	_ starlark.Iterable = (*WorkQueue)(nil)
	_ starlark.HasAttrs = (*WorkQueue)(nil)
	_ starlark.HasAttrs = (*Task)(nil)
)

// failKey is the thread-local an iterator leaves its error under. An
// iterator cannot return one: the loop ends, and the error is raised by
// the queue's next call, or else at the end of the enclosing
// sperli.attempt or of the program (pendingErr), whichever comes first.
const failKey = "sperli.fail"

// pendingErr takes the error an iterator left and not raised yet.
func pendingErr(thread *starlark.Thread) error {
	err, _ := thread.Local(failKey).(error)
	thread.SetLocal(failKey, nil)
	return err
}

// commWorkQueue is comm.work_queue(name, items).
func commWorkQueue(c *Comm, thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	var list *starlark.List
	perMaster := intArg{n: workq.DefaultPerMaster}
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name", &name, "items", &list, "per_master?", &perMaster); err != nil {
		return nil, err
	}
	items := make([][]byte, list.Len())
	vals := make([]starlark.Value, list.Len())
	for i := range items {
		vals[i] = list.Index(i)
		s, err := stringOf(vals[i])
		if err != nil {
			return nil, fmt.Errorf("%s: item %d: %v", b.Name(), i, err)
		}
		items[i] = []byte(s)
	}
	w, err := workq.New(c.ctx, c.c, name, items, workq.Options{PerMaster: perMaster.n})
	if err != nil {
		return nil, refused(err, perMaster)
	}
	return &WorkQueue{w: w, ctx: c.ctx, thread: thread, name: name, items: vals}, nil
}

func (q *WorkQueue) String() string        { return fmt.Sprintf("<work_queue %q>", q.name) }
func (q *WorkQueue) Type() string          { return "work_queue" }
func (q *WorkQueue) Freeze()               {}
func (q *WorkQueue) Truth() starlark.Bool  { return starlark.True }
func (q *WorkQueue) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable: work_queue") }

// Iterate leases the tasks of this rank, one per step.
func (q *WorkQueue) Iterate() starlark.Iterator { return &wqIter{q: q} }

type wqIter struct{ q *WorkQueue }

func (it *wqIter) Next(p *starlark.Value) bool {
	if it.q.err != nil {
		return false
	}
	t, ok, err := it.q.w.Next(it.q.ctx)
	if err != nil {
		it.q.err = err
		it.q.thread.SetLocal(failKey, err)
		return false
	}
	if !ok {
		return false
	}
	*p = &Task{t: t, data: it.q.items[t.ID]}
	return true
}

func (it *wqIter) Done() {}

// failed is the iteration's error, now raised.
func (q *WorkQueue) failed() error {
	if q.err != nil && q.thread.Local(failKey) == q.err {
		q.thread.SetLocal(failKey, nil)
	}
	return q.err
}

// Attr returns the queue's methods.
func (q *WorkQueue) Attr(name string) (starlark.Value, error) {
	switch name {
	case "done":
		return starlark.NewBuiltin("work_queue.done", q.done), nil
	case "results":
		return starlark.NewBuiltin("work_queue.results", q.results), nil
	case "stats":
		return starlark.NewBuiltin("work_queue.stats", q.stats), nil
	case "name":
		return starlark.String(q.name), nil
	}
	return nil, nil
}

func (q *WorkQueue) AttrNames() []string { return []string{"done", "name", "results", "stats"} }

func (q *WorkQueue) done(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var t starlark.Value
	var result data
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "task", &t, "result", &result); err != nil {
		return nil, err
	}
	if err := q.failed(); err != nil {
		return nil, err
	}
	task, ok := t.(*Task)
	if !ok {
		return nil, fmt.Errorf("%s: got %s, want a task of the queue", b.Name(), t.Type())
	}
	return starlark.None, q.w.Done(q.ctx, task.t, result)
}

func (q *WorkQueue) results(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
		return nil, err
	}
	if err := q.failed(); err != nil {
		return nil, err
	}
	res, err := q.w.Results()
	if err != nil {
		return nil, err
	}
	ids := make([]int, 0, len(res))
	for id := range res {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	d := starlark.NewDict(len(ids))
	for _, id := range ids {
		d.SetKey(starlark.MakeInt(id), starlark.Bytes(res[id]))
	}
	return d, nil
}

func (q *WorkQueue) stats(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
		return nil, err
	}
	st := q.w.Stats()
	by := starlark.NewDict(len(st.ByRank))
	slots := make([]int, 0, len(st.ByRank))
	for s := range st.ByRank {
		slots = append(slots, s)
	}
	sort.Ints(slots)
	for _, s := range slots {
		by.SetKey(starlark.MakeInt(s), starlark.MakeInt(st.ByRank[s]))
	}
	return starlarkstruct.FromStringDict(starlark.String("work_stats"), starlark.StringDict{
		"items":       starlark.MakeInt(st.Items),
		"published":   starlark.MakeInt(st.Published),
		"executed":    starlark.MakeInt(st.Executed),
		"duplicates":  starlark.MakeInt(st.Duplicates),
		"generations": starlark.MakeInt(st.Generations),
		"by_rank":     by,
	}), nil
}

// Task is a leased task: its id and data (the item as it was given).
type Task struct {
	t    *workq.Task
	data starlark.Value
}

func (t *Task) String() string        { return fmt.Sprintf("<task %d>", t.t.ID) }
func (t *Task) Type() string          { return "work_queue.task" }
func (t *Task) Freeze()               {}
func (t *Task) Truth() starlark.Bool  { return starlark.True }
func (t *Task) Hash() (uint32, error) { return uint32(t.t.ID), nil }

func (t *Task) Attr(name string) (starlark.Value, error) {
	switch name {
	case "id":
		return starlark.MakeInt(t.t.ID), nil
	case "data":
		return t.data, nil
	}
	return nil, nil
}

func (t *Task) AttrNames() []string { return []string{"data", "id"} }
