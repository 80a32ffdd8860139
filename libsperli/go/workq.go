package main

/*
#include <stdint.h>
#include "wait.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"sperli/workq"
)

// Work queues (SPEC §19): sperli.c's table of queues gives each its index,
// the index here too; a recovery or a new session empties the table, and
// the index of the next queue says so (it is 0 again).

// cqueue is a queue of the session and the task this rank holds.
type cqueue struct {
	w    *workq.Queue
	held *workq.Task
}

func (s *session) queue(qi C.long) *cqueue {
	i := int(qi)
	if i < 0 || i >= len(s.queues) {
		broken(fmt.Sprintf("work queue %d of %d reached the Go layer", i, len(s.queues)))
	}
	return s.queues[i]
}

// sperligo_work_start starts a queue of the n items (items[i] of lens[i]
// bytes, all checked by sperli.c) on communicator ci, at index qi.
//
//export sperligo_work_start
func sperligo_work_start(ci C.int, qi C.long, name *C.char, items *unsafe.Pointer, lens *C.size_t, n C.size_t, d *C.sperligo_done) {
	defer guard()
	s := need()
	c := s.at(ci)
	if int(qi) > len(s.queues) {
		broken(fmt.Sprintf("work queue %d started, %d made", int(qi), len(s.queues)))
	}
	s.queues = s.queues[:qi]
	ptrs := unsafe.Slice(items, int(n))
	ls := unsafe.Slice(lens, int(n))
	copied := make([][]byte, n)
	for i := range copied {
		copied[i] = C.GoBytes(ptrs[i], C.int(ls[i]))
	}
	nm := C.GoString(name)
	async(d, func() C.int {
		w, err := workq.New(ctx, c, nm, copied, workq.Options{})
		if err != nil {
			return code(err)
		}
		s.queues = append(s.queues, &cqueue{w: w})
		return 0
	})
}

// sperligo_work_next leases the next task of queue qi: its id (-1 at the
// end) and its data as the session's result.
//
//export sperligo_work_next
func sperligo_work_next(qi C.long, id *C.int64_t, outlen *C.size_t, d *C.sperligo_done) {
	defer guard()
	s := need()
	q := s.queue(qi)
	async(d, func() C.int {
		t, ok, err := q.w.Next(ctx)
		if err != nil || !ok {
			if err == nil {
				*id = -1
			}
			return s.keep(nil, err, outlen)
		}
		q.held, *id = t, C.int64_t(t.ID)
		return s.keep(append([]byte{}, t.Data...), nil, outlen)
	})
}

// sperligo_work_done gives the result of the task queue qi's rank holds
// (sperli.c checked it is the one).
//
//export sperligo_work_done
func sperligo_work_done(qi C.long, data unsafe.Pointer, n C.size_t, d *C.sperligo_done) {
	defer guard()
	s := need()
	q := s.queue(qi)
	if q.held == nil {
		broken("a done without a task reached the Go layer")
	}
	result := C.GoBytes(data, C.int(n))
	async(d, func() C.int {
		err := q.w.Done(ctx, q.held, result)
		if err == nil {
			q.held = nil
		}
		return code(err)
	})
}

// sperligo_work_result makes item id's result the session's result (the
// queue has ended, sperli.c checked).
//
//export sperligo_work_result
func sperligo_work_result(qi C.long, id C.int64_t, outlen *C.size_t) C.int {
	defer guard()
	s := need()
	res, err := s.queue(qi).w.Result(int(id))
	if err != nil {
		return code(err)
	}
	return s.keep(append([]byte{}, res...), nil, outlen)
}

// sperligo_work_stats writes the queue's statistics: items, published,
// executed, duplicates, generations.
//
//export sperligo_work_stats
func sperligo_work_stats(qi C.long, out *C.int64_t) {
	defer guard()
	st := need().queue(qi).w.Stats()
	o := unsafe.Slice(out, 5)
	o[0], o[1], o[2], o[3], o[4] = C.int64_t(st.Items), C.int64_t(st.Published), C.int64_t(st.Executed), C.int64_t(st.Duplicates), C.int64_t(st.Generations)
}

// sperligo_work_by_rank is the executions the queue's log holds of slot
// slot, or -1 when the job has no such slot.
//
//export sperligo_work_by_rank
func sperligo_work_by_rank(qi C.long, slot C.int64_t) C.int64_t {
	defer guard()
	st := need().queue(qi).w.Stats()
	if slot < 0 || int64(slot) >= int64(st.Slots) {
		return -1
	}
	return C.int64_t(st.ByRank[int(slot)])
}
