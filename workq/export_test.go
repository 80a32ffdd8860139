package workq

import (
	"context"
	"crypto/sha256"

	"sperli/runtime"
	"sperli/wire"
)

// TaskFenceForTest is t's fence.
func TaskFenceForTest(t *Task) (gen uint32, lease uint64) { return t.f.Gen, t.f.Lease }

// ForgeDoneForTest sends w's master a done of item id with the fence
// (gen, lease), held or not: a joined rank that lies. Test only.
func ForgeDoneForTest(ctx context.Context, w *Queue, id int, gen uint32, lease uint64, result []byte) error {
	if err := w.request(ctx, wire.AppendWorkDone(nil, fence{Gen: gen, Lease: lease}, id, result)); err != nil {
		return err
	}
	w.held, w.asked = nil, true
	return nil
}

// RequestForTest sends w's master a request for a task, held one or not.
// Test only.
func RequestForTest(ctx context.Context, w *Queue) error {
	if err := w.request(ctx, []byte{wire.WorkRequest}); err != nil {
		return err
	}
	w.held, w.asked = nil, true
	return nil
}

// DropQueueForTest forgets the log of the work queue name that c's
// process holds, as a process launched again would: by a restart, in a
// later incarnation (later: records of the earlier one that name its slot
// are not its to audit), or by a launcher started again with the job's
// directory, whose generations start from 0 again (!later). Test only.
func DropQueueForTest(c *runtime.Comm, name string, later bool) {
	k := c.Hook().Keep("workq/"+name, func() any { return &kept{} }).(*kept)
	k.mu.Lock()
	if l := k.log; l != nil {
		fresh := newLog(l.sum)
		fresh.since = l.since
		if later {
			fresh.since++
		}
		k.log = fresh
	}
	k.mu.Unlock()
}

// DiskFromForTest checks b as the bytes of the log on disk that rank 0 of
// w's communicator sent at the queue's start, and returns how many
// records they hold. Test only.
func DiskFromForTest(w *Queue, b []byte) (int, error) {
	recs, err := w.diskFrom(b)
	return len(recs), err
}

// ForgeDiskRecordForTest sends rank 0 of w's communicator a published
// record of item id for the log on disk, as a master does: a joined rank
// that lies. Test only.
func ForgeDiskRecordForTest(ctx context.Context, w *Queue, id int, result []byte) error {
	r := record{Kind: wire.WorkPublished, Fence: fence{Gen: w.c.Incarnation(), Lease: 1}, Item: id, Slot: w.c.Slot(), Sum: sha256.Sum256(result), Result: result}
	return w.q.Send(ctx, 0, tagDisk, wire.AppendWorkRecord(nil, r))
}

// ForgeRecordForTest puts in w's log an execution of item id by slot
// with the fence (w's generation, lease) and result: a joined rank that
// lies in the log it sends at the queue's end. Test only.
func ForgeRecordForTest(w *Queue, id, slot int, lease uint64, result []byte) {
	w.mu.Lock()
	w.log.add(record{Kind: wire.WorkExecuted, Fence: fence{Gen: w.c.Incarnation(), Lease: lease}, Item: id, Slot: slot, Sum: sha256.Sum256(result)})
	w.mu.Unlock()
}
