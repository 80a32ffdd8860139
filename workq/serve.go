package workq

import (
	"context"

	"sperli/codes"
	"sperli/runtime"
	"sperli/wire"
)

// serve starts this rank's master or buddy goroutine, if it is one.
func (w *Queue) serve(ctx context.Context) {
	run := func(fn func(context.Context) error) {
		w.srvDone = make(chan struct{})
		go func() {
			w.srvErr = w.serverEnd(fn(ctx))
			close(w.srvDone)
		}()
	}
	switch w.q.Rank() {
	case w.masterRank:
		w.reqs, w.local = make(chan req), make(chan []byte, 1)
		run(w.master)
	case w.buddyRank:
		run(w.buddy)
	}
}

// serverEnd is the end of the master's or buddy's goroutine: a loss, a
// revoke or the job's end is passed on (lost); any other error ends the
// job, so that no rank waits for a server that has gone.
func (w *Queue) serverEnd(err error) error {
	switch codes.Of(err) {
	case 0:
		if err != nil {
			w.hook.End(err)
		}
		return err
	case codes.PeerLost, codes.Revoked, codes.JobEnded, codes.Finished, codes.ProtocolViolation:
		return w.lost(err)
	}
	w.hook.End(err)
	return err
}

// served is the state of a master's goroutine: its machine, and where
// its records go besides the buddy.
type served struct {
	m         *master
	wr        *writer    // rank 0's log file, or nil
	collected chan error // rank 0's collector of the other masters' records, or nil
}

// master serves its shard of the queue to its group until every rank of
// the group was told its end: it reads requests (reader), steps the
// lease machine and performs its actions.
func (w *Queue) master(ctx context.Context) error {
	w.mu.Lock()
	s := &served{m: newMaster(w.c.Incarnation(), len(w.items), w.group, w.groups, w.masterRank, w.groupSize, w.log)}
	w.mu.Unlock()
	// The log under the checkpoint directory, written on a goroutine of
	// its own; the queue ends when it is written whole. With several
	// masters rank 0 writes theirs too (collect).
	if w.diskOn() {
		s.wr = w.startWriter()
		defer func() {
			if s.wr != nil {
				s.wr.finish()
			}
		}()
		if w.diskAll {
			s.collected = make(chan error, 1)
			go func() { s.collected <- w.collect(ctx, s.wr) }()
		}
	}
	readErr, stop := w.reader(ctx)
	defer stop()
	for !s.m.over() {
		r, err := w.nextReq(ctx, readErr)
		if err != nil {
			return err
		}
		if r == nil {
			continue
		}
		if err := w.step(ctx, s, *r); err != nil {
			return err
		}
	}
	return w.masterEnd(ctx, s)
}

// reader starts the goroutine that reads the other ranks' requests,
// which stop withdraws, and waits for: its receive is an open operation
// until the goroutine has seen the cancel, and a program that finishes
// right after the queue would end with it open (H1617, "recv from rank
// -1 tag 1": tests/elastic TestRerunWithoutJobSaysSo, about one run in
// eight).
func (w *Queue) reader(ctx context.Context) (<-chan error, func()) {
	rctx, cancel := context.WithCancel(ctx)
	readErr := make(chan error, 1)
	if w.groupSize <= 1 {
		return readErr, cancel
	}
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for {
			b, env, err := w.q.RecvFrom(rctx, runtime.AnySource, tagReq)
			if err != nil {
				readErr <- err
				return
			}
			select {
			case w.reqs <- req{env.Source, b}:
			case <-rctx.Done():
				return
			}
		}
	}()
	return readErr, func() {
		cancel()
		<-readDone
	}
}

// nextReq is the next request to the master, or nil when a loss woke it
// and none is lost. A rank lost (to a program that manages its losses)
// ends the queue here, and its revoke everywhere: the ranks shrink, and
// the queue starts again from its log, the lost rank's lease leased
// again. (Without it, the others would wait for ever on a master that
// waits for the lost one.)
func (w *Queue) nextReq(ctx context.Context, readErr <-chan error) (*req, error) {
	wake := w.hook.Lost()
	if lost := w.q.Failed(); len(lost) > 0 {
		return nil, codes.Lost("work_queue", lost[0], "work_queue %q: rank %d lost: the queue goes on from its log once the ranks shrink", w.name, lost[0])
	}
	select {
	case r := <-w.reqs:
		return &r, nil
	case err := <-readErr:
		return nil, err
	case <-wake:
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// step decodes a request, steps the master's machine with it and
// performs the actions.
func (w *Queue) step(ctx context.Context, s *served, r req) error {
	m, err := wire.DecodeWorkRequest(r.b, len(w.items))
	var ev event = request{r.from}
	switch {
	case err != nil:
		ev = garbled{r.from, why(err)}
	case m.Kind == wire.WorkDone:
		ev = done{from: r.from, slot: w.q.Hook().SlotOf(r.from), f: m.Fence, id: m.Item, result: m.Result}
	}
	return w.perform(ctx, s, s.m.Step(ev))
}

// perform does a master's actions in order.
func (w *Queue) perform(ctx context.Context, s *served, acts []action) error {
	for _, a := range acts {
		var err error
		switch a := a.(type) {
		case refuse:
			return w.liar(a.from, "%s", a.why)
		case logRecord:
			err = w.logRecord(ctx, s, a.rec)
		case sendLease:
			err = w.send(ctx, a.to, wire.AppendWorkLease(nil, a.f, a.id))
		case sendEnd:
			err = w.send(ctx, a.to, []byte{wire.WorkEnd})
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// send sends a reply to rank to of the master's group.
func (w *Queue) send(ctx context.Context, to int, b []byte) error {
	if to == w.masterRank {
		w.local <- b // the master's own worker has one request out at most: never blocks
		return nil
	}
	return w.q.Send(ctx, to, tagRep, b)
}

// logRecord adds a record to the log: the buddy's copy first (its
// acknowledgement), then the master's, so that a result counts only
// once two ranks hold it; then the log on disk's.
func (w *Queue) logRecord(ctx context.Context, s *served, r record) error {
	if w.buddyRank >= 0 {
		if err := w.q.Send(ctx, w.buddyRank, tagLog, wire.AppendWorkRecord(nil, r)); err != nil {
			return err
		}
		b, err := w.q.Recv(ctx, w.buddyRank, tagAck)
		if err != nil {
			return err
		}
		if err := wire.DecodeWorkAck(b); err != nil {
			return w.liar(w.buddyRank, "%s", why(err))
		}
	}
	w.mu.Lock()
	w.log.add(r)
	w.mu.Unlock()
	if s.wr != nil {
		s.wr.add(r)
	} else if w.diskAll {
		return w.q.Send(ctx, 0, tagDisk, wire.AppendWorkRecord(nil, r))
	}
	return nil
}

// masterEnd waits for the other masters' records (rank 0, the log on
// disk), writes the rest of the log file, or tells rank 0 this master's
// end, and then tells the buddy.
func (w *Queue) masterEnd(ctx context.Context, s *served) error {
	if s.collected != nil {
		select {
		case err := <-s.collected:
			if err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if s.wr != nil {
		err := s.wr.finish()
		s.wr = nil
		if err != nil {
			return err
		}
	} else if w.diskAll {
		if err := w.q.Send(ctx, 0, tagDisk, []byte{wire.WorkEnd}); err != nil {
			return err
		}
	}
	if w.buddyRank >= 0 {
		return w.q.Send(ctx, w.buddyRank, tagLog, []byte{wire.WorkEnd})
	}
	return nil
}

// keeper is a machine for this rank's buddy (group >= 0) or rank 0's
// collector (group -1).
func (w *Queue) keeper(group int) *keeper {
	return &keeper{items: len(w.items), slots: w.hook.Slots(), groups: w.groups, size: w.q.Size(), self: w.c.Slot(),
		group: group, master: w.masterRank, log: w.log, ended: map[int]bool{}}
}

// collect takes, on rank 0, the records the other masters logged, for the
// log on disk, until each of them said its end.
func (w *Queue) collect(ctx context.Context, wr *writer) error {
	k := w.keeper(-1)
	for !k.over() {
		b, env, err := w.q.RecvFrom(ctx, runtime.AnySource, tagDisk)
		if err != nil {
			return err
		}
		w.mu.Lock()
		acts := k.Step(env.Source, b)
		w.mu.Unlock()
		for _, a := range acts {
			switch a := a.(type) {
			case refuse:
				return w.liar(a.from, "%s", a.why)
			case write:
				wr.add(a.rec)
			}
		}
	}
	return nil
}

// buddy holds its master's records until the master's end.
func (w *Queue) buddy(ctx context.Context) error {
	k := w.keeper(w.group)
	for !k.over() {
		b, err := w.q.Recv(ctx, w.masterRank, tagLog)
		if err != nil {
			return err
		}
		w.mu.Lock()
		acts := k.Step(w.masterRank, b)
		w.mu.Unlock()
		for _, a := range acts {
			switch a := a.(type) {
			case refuse:
				return w.liar(a.from, "%s", a.why)
			case ack:
				if err := w.q.Send(ctx, w.masterRank, tagAck, nil); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
