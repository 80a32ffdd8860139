// Package workq is the fenced work queue of SPEC §19 (docs/workqueue.md):
// a job hands out items, any rank may be lost at any moment, and every
// item's result is published exactly once, proved by a log held by two
// ranks and, under --checkpoint-dir, by a signed file.
//
//	w, err := workq.New(ctx, comm, "sweep", items, workq.Options{})
//	for {
//		t, ok, err := w.Next(ctx) // ok is false at the end, on every rank
//		if err != nil || !ok {
//			break
//		}
//		err = w.Done(ctx, t, compute(t.Data))
//	}
//	res, err := w.Results() // the same on every rank, each id once
//	st := w.Stats()
//
// The queue is a package over the core, not a part of it: it runs on
// runtime.Comm's public calls (Split for a communicator of its own,
// Send/Recv/RecvFrom for leases and log records, Allgather, Bcast and
// Gather for its start and end) and on the narrow runtime.Hook (a log
// kept by the process by the queue's name, a wake at each loss, the
// job's slots, the loss mode, the checkpoint directory, the job key's
// signature of the log file, the job's end on a lie).
//
// Its decisions are pure machines with no I/O, no goroutine and no clock
// (machine.go, log.go): the master's lease machine (leases fenced by
// generation and lease number, the dones it takes, what it refuses), the
// keeper of a master's records (the buddy, and rank 0's collector for
// the log on disk) and the log itself (content-addressed records, the
// audit of records that name this process's slot). Their messages are
// package wire's (wire/workq.go). The driver (serve.go, start.go,
// disk.go) performs what they decide.
//
// Goroutines, for the life of one start of a queue: on each master the
// master loop and a reader of its group's requests (the master's own
// worker reaches it by a channel); on each buddy the buddy; under
// --checkpoint-dir on rank 0 the writer of the log file and, with several
// masters, the collector of the other masters' records. All end when the
// queue's master has told every rank of its group the end, or at a loss,
// a revoke or the job's end; the queue's end on this rank waits for them.
//
// A Queue is used by one goroutine.
package workq
