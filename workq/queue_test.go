package workq_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"sperli/codes"
	"sperli/runtime"
	"sperli/workq"
)

// wqItems are n items, "0" … "n-1".
func wqItems(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = []byte(fmt.Sprint(i))
	}
	return out
}

// farm runs a queue of items on c, each result the item's text twice.
func farm(ctx context.Context, c *runtime.Comm, items [][]byte) (map[int][]byte, workq.Stats, int, error) {
	res, st, did, _, err := farmWith(ctx, c, items, workq.Options{})
	return res, st, did, err
}

// farmWith is farm with options; it says how many masters the queue had.
func farmWith(ctx context.Context, c *runtime.Comm, items [][]byte, opt workq.Options) (map[int][]byte, workq.Stats, int, int, error) {
	w, err := workq.New(ctx, c, "farm", items, opt)
	if err != nil {
		return nil, workq.Stats{}, 0, 0, err
	}
	did := 0
	for {
		t, ok, err := w.Next(ctx)
		if err != nil {
			return nil, workq.Stats{}, did, w.Masters(), err
		}
		if !ok {
			break
		}
		if err := w.Done(ctx, t, append(append([]byte{}, t.Data...), t.Data...)); err != nil {
			return nil, workq.Stats{}, did, w.Masters(), err
		}
		did++
	}
	res, err := w.Results()
	return res, w.Stats(), did, w.Masters(), err
}

// TestWorkQueue: every item is done once and published once, the results
// are the same on every rank, and the stats come from the log; with
// several masters too (a shard of the items each, a group of the ranks).
func TestWorkQueue(t *testing.T) {
	for _, tc := range []struct{ n, perMaster, masters int }{
		{1, 0, 1}, {2, 0, 1}, {3, 0, 1}, {5, 0, 1},
		{2, 2, 1}, {5, 2, 2}, {6, 2, 3}, {7, 3, 3}, {8, 64, 1},
	} {
		n := tc.n
		t.Run(fmt.Sprintf("%d ranks, %d a master", n, tc.perMaster), func(t *testing.T) {
			ctx := testCtx(t)
			comms := newFixture(t, n).initAll(ctx)
			items := wqItems(97)
			results := make([]map[int][]byte, n)
			stats := make([]workq.Stats, n)
			dids := make([]int, n)
			masters := make([]int, n)
			errs := each(comms, func(c *runtime.Comm) error {
				var err error
				results[c.Rank()], stats[c.Rank()], dids[c.Rank()], masters[c.Rank()], err = farmWith(ctx, c, items, workq.Options{PerMaster: tc.perMaster})
				return err
			})
			total := 0
			for r, err := range errs {
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
				total += dids[r]
				if masters[r] != tc.masters {
					t.Fatalf("rank %d: %d masters, want %d", r, masters[r], tc.masters)
				}
				if len(results[r]) != len(items) {
					t.Fatalf("rank %d: %d results, want %d", r, len(results[r]), len(items))
				}
				for id, v := range results[r] {
					if want := strings.Repeat(fmt.Sprint(id), 2); string(v) != want {
						t.Fatalf("rank %d: result %d = %q, want %q", r, id, v, want)
					}
				}
				st := stats[r]
				if st.Items != 97 || st.Published != 97 || st.Executed != 97 || st.Duplicates != 0 || st.Generations != 1 {
					t.Fatalf("rank %d: stats %+v", r, st)
				}
				by := 0
				for _, k := range st.ByRank {
					by += k
				}
				if by != 97 {
					t.Fatalf("rank %d: by rank %v sums to %d", r, st.ByRank, by)
				}
			}
			if total != len(items) {
				t.Fatalf("the ranks computed %d items, want %d", total, len(items))
			}
		})
	}
}

// TestWorkQueueItemsDiffer: items that differ between ranks are H1613 on
// every rank, at the first call.
func TestWorkQueueItemsDiffer(t *testing.T) {
	ctx := testCtx(t)
	comms := newFixture(t, 3).initAll(ctx)
	errs := each(comms, func(c *runtime.Comm) error {
		items := wqItems(10)
		if c.Rank() == 2 {
			items[4] = []byte("four")
		}
		_, err := workq.New(ctx, c, "q", items, workq.Options{})
		return err
	})
	for r, err := range errs {
		wantCode(t, fmt.Sprintf("rank %d", r), err, codes.CollectiveMismatch)
		if !strings.Contains(err.Error(), "items differ") {
			t.Fatalf("rank %d: %q does not say the items differ", r, err)
		}
	}
}

// TestWorkQueueBadCalls: ranks a master out of range, a done for a task
// this rank does not hold, a second done, a result over the limit and
// results before the end are H1616, and the queue goes on to its end.
func TestWorkQueueBadCalls(t *testing.T) {
	ctx := testCtx(t)
	comms := newFixture(t, 2).initAll(ctx)
	errs := each(comms, func(c *runtime.Comm) error {
		for _, per := range []int{1, -3, 1<<20 + 1} {
			if _, err := workq.New(ctx, c, "q", wqItems(6), workq.Options{PerMaster: per}); codes.Of(err) != codes.OutOfRange || !strings.Contains(err.Error(), "ranks a master") {
				return fmt.Errorf("%d ranks a master: %v, want H1616", per, err)
			}
		}
		w, err := workq.New(ctx, c, "q", wqItems(6), workq.Options{})
		if err != nil {
			return err
		}
		if _, err := w.Results(); codes.Of(err) != codes.OutOfRange {
			return fmt.Errorf("results before the end: %v, want H1616", err)
		}
		if err := w.Done(ctx, &workq.Task{ID: 1}, []byte("x")); codes.Of(err) != codes.OutOfRange || !strings.Contains(err.Error(), "does not hold") {
			return fmt.Errorf("done of a task not held: %v, want H1616", err)
		}
		for {
			task, ok, err := w.Next(ctx)
			if err != nil || !ok {
				if err != nil {
					return err
				}
				break
			}
			if err := w.Done(ctx, task, make([]byte, workq.MaxResult+1)); codes.Of(err) != codes.OutOfRange {
				return fmt.Errorf("a result over the limit: %v, want H1616", err)
			}
			if _, _, err := w.Next(ctx); codes.Of(err) != codes.OutOfRange {
				return fmt.Errorf("next with a task not done: %v, want H1616", err)
			}
			if err := w.Done(ctx, task, []byte("ok")); err != nil {
				return err
			}
			if err := w.Done(ctx, task, []byte("again")); codes.Of(err) != codes.OutOfRange {
				return fmt.Errorf("a second done: %v, want H1616", err)
			}
		}
		res, err := w.Results()
		if err != nil || len(res) != 6 || string(res[5]) != "ok" {
			return fmt.Errorf("results %v, %v", res, err)
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// TestWorkQueueForgedDone: a joined rank that sends a done with a fence
// no master gave it, or for another rank's lease, ends the job with H1627
// naming it, and nothing is published for it.
func TestWorkQueueForgedDone(t *testing.T) {
	for _, tc := range []struct {
		name string
		lie  string // "lease": a lease number never made; "gen": a later generation; "twice": its done twice; "request": a request while it holds a task
		says string
	}{
		{"a lease never made", "lease", "which no master gave it"},
		{"a later generation", "gen", "which no master gave it"},
		// Its second done meets a new lease (no master gave it that
		// fence), or, when the others ended the queue first, the end.
		{"the same done twice", "twice", "which no master gave it|after the end"},
		{"a request while it holds a task", "request", "a request while it holds item"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			comms := newFixture(t, 3).initAll(ctx)
			// The others wait until the liar has lied: the queue must not
			// end before its master reads the lie.
			liarHasOne := make(chan struct{})
			release := sync.OnceFunc(func() { close(liarHasOne) })
			errs := each(comms, func(c *runtime.Comm) error {
				w, err := workq.New(ctx, c, "q", wqItems(50), workq.Options{})
				if err != nil {
					return err
				}
				if c.Rank() != 2 {
					select {
					case <-liarHasOne:
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				for {
					task, ok, err := w.Next(ctx)
					if err != nil || !ok {
						return err
					}
					if c.Rank() == 2 {
						defer release() // also when it fails before its lie
						gen, lease := workq.TaskFenceForTest(task)
						var err error
						switch tc.lie {
						case "lease":
							err = workq.ForgeDoneForTest(ctx, w, task.ID, gen, lease+1000, []byte("forged"))
						case "gen":
							err = workq.ForgeDoneForTest(ctx, w, task.ID, gen+1, lease, []byte("forged"))
						case "twice":
							if err = w.Done(ctx, task, []byte("ok")); err == nil {
								err = workq.ForgeDoneForTest(ctx, w, task.ID, gen, lease, []byte("again"))
							}
						case "request":
							err = workq.RequestForTest(ctx, w)
						}
						if err != nil {
							return err
						}
						release()
						_, err = c.Recv(ctx, 0, 99) // nothing sends it: the job's end
						return err
					}
					if err := w.Done(ctx, task, []byte("ok")); err != nil {
						return err
					}
				}
			})
			wantCode(t, "rank 0, the master", errs[0], codes.ProtocolViolation)
			if !strings.Contains(errs[0].Error(), "protocol violation by rank 2") || !regexp.MustCompile(tc.says).MatchString(errs[0].Error()) {
				t.Fatalf("rank 0: %q does not name rank 2 for its done", errs[0])
			}
			for _, r := range []int{1, 2} {
				if e := codes.As(errs[r]); e == nil || (e.Code != codes.JobEnded && e.Code != codes.ProtocolViolation) {
					t.Fatalf("rank %d: %v, want the job ended", r, errs[r])
				}
			}
		})
	}
}

// TestWorkQueueLogOnDisk: under a checkpoint directory the master writes
// the queue's log, signed (tests/elastic TestWorkQueueRestart resumes from
// it); a log whose bytes were changed is H1620 at the start on every rank,
// rank 0's naming the file.
func TestWorkQueueLogOnDisk(t *testing.T) {
	ctx := testCtx(t)
	f := newFixture(t, 2)
	f.base.Spec.CheckpointDir = t.TempDir()
	comms := f.initAll(ctx)
	items := wqItems(40)
	for _, err := range each(comms, func(c *runtime.Comm) error { _, _, _, err := farm(ctx, c, items); return err }) {
		if err != nil {
			t.Fatal(err)
		}
	}
	logs, _ := filepath.Glob(filepath.Join(f.base.Spec.CheckpointDir, "*", "queues", "*.wq"))
	if len(logs) != 1 {
		t.Fatalf("%d logs written, want 1", len(logs))
	}
	// The same name with other items is another queue, with a log of its
	// own.
	for _, err := range each(comms, func(c *runtime.Comm) error { _, _, _, err := farm(ctx, c, wqItems(41)); return err }) {
		if err != nil {
			t.Fatalf("the same name with other items: %v", err)
		}
	}
	if more, _ := filepath.Glob(filepath.Join(f.base.Spec.CheckpointDir, "*", "queues", "*.wq")); len(more) != 2 {
		t.Fatalf("%d logs written, want 2", len(more))
	}
	b, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 1
	if err := os.WriteFile(logs[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	errs := each(comms, func(c *runtime.Comm) error { _, err := workq.New(ctx, c, "farm", items, workq.Options{}); return err })
	wantCode(t, "rank 0", errs[0], codes.CommitSignature)
	wantCode(t, "rank 1", errs[1], codes.CommitSignature)
	if !strings.Contains(errs[0].Error(), "does not verify") || !strings.Contains(errs[0].Error(), filepath.Base(logs[0])) {
		t.Fatalf("rank 0: %q does not name the log and its signature", errs[0])
	}
}

// TestWorkQueueLogUnwritable: a log that cannot be written under the
// checkpoint directory (its directory is a file) ends the job with H1625
// on every rank at the queue's end; no rank waits for ever.
func TestWorkQueueLogUnwritable(t *testing.T) {
	ctx := testCtx(t)
	f := newFixture(t, 3)
	f.base.Spec.CheckpointDir = t.TempDir()
	comms := f.initAll(ctx)
	if err := os.MkdirAll(filepath.Join(f.base.Spec.CheckpointDir, comms[0].JobID()), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.base.Spec.CheckpointDir, comms[0].JobID(), "queues"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	errs := each(comms, func(c *runtime.Comm) error { _, _, _, err := farm(ctx, c, wqItems(20)); return err })
	for r, err := range errs {
		e := codes.As(err)
		if e == nil || (e.Code != codes.CheckpointStorage && (e.Cause == nil || e.Cause.Code != codes.CheckpointStorage)) {
			t.Fatalf("rank %d: %v, want the job ended by H1625", r, err)
		}
	}
}

// TestWorkQueueManyMastersOnDisk: with several masters under a checkpoint
// directory, rank 0 writes every master's records: a process that forgot
// the queue (as after a launcher restart, or a launch again with the
// job's directory, where generations start from 0 again and the records
// on disk name this process's slot in its own generation) starts it again
// with every item published from the file alone, and leases nothing.
func TestWorkQueueManyMastersOnDisk(t *testing.T) {
	for _, later := range []bool{true, false} {
		t.Run(fmt.Sprintf("later incarnation %v", later), func(t *testing.T) { testManyMastersOnDisk(t, later) })
	}
}

func testManyMastersOnDisk(t *testing.T, later bool) {
	ctx := testCtx(t)
	f := newFixture(t, 6)
	f.base.Spec.CheckpointDir = t.TempDir()
	comms := f.initAll(ctx)
	items := wqItems(61)
	opt := workq.Options{PerMaster: 2}
	first := make([]workq.Stats, len(comms))
	for r, err := range each(comms, func(c *runtime.Comm) error {
		var err error
		_, first[c.Rank()], _, _, err = farmWith(ctx, c, items, opt)
		return err
	}) {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for _, c := range comms {
		workq.DropQueueForTest(c, "farm", later)
	}
	stats := make([]workq.Stats, len(comms))
	dids := make([]int, len(comms))
	errs := each(comms, func(c *runtime.Comm) error {
		var err error
		_, stats[c.Rank()], dids[c.Rank()], _, err = farmWith(ctx, c, items, opt)
		return err
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d, again: %v", r, err)
		}
		if st := stats[r]; dids[r] != 0 || st.Published != 61 || st.Executed != 61 || !maps.Equal(st.ByRank, first[0].ByRank) {
			t.Fatalf("rank %d, again: computed %d, stats %+v; want every item published from the file, by the ranks of the first run %v", r, dids[r], st, first[0].ByRank)
		}
	}
}

// TestWorkQueueForgedDiskLog: the bytes of the log on disk that rank 0
// sends at a start are checked by every rank with the job key, as rank 0
// checked the file: the file as written holds the log's records; changed,
// cut inside a chunk, or with bytes after its last chunk, it is a lie of
// rank 0 (H1627 naming it), since rank 0 sends only what verified.
func TestWorkQueueForgedDiskLog(t *testing.T) {
	ctx := testCtx(t)
	f := newFixture(t, 2)
	f.base.Spec.CheckpointDir = t.TempDir()
	comms := f.initAll(ctx)
	items := wqItems(40)
	queues := make([]*workq.Queue, len(comms))
	for r, err := range each(comms, func(c *runtime.Comm) error {
		w, err := workq.New(ctx, c, "farm", items, workq.Options{})
		if err != nil {
			return err
		}
		queues[c.Rank()] = w
		return drain(ctx, w)
	}) {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	logs, _ := filepath.Glob(filepath.Join(f.base.Spec.CheckpointDir, "*", "queues", "*.wq"))
	if len(logs) != 1 {
		t.Fatalf("%d logs written, want 1", len(logs))
	}
	b, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	if n, err := workq.DiskFromForTest(queues[1], b); err != nil || n < 40 {
		t.Fatalf("the log as written: %d records, %v; want the 40 published at least", n, err)
	}
	flipped := append([]byte{}, b...)
	flipped[len(flipped)-100] ^= 1
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"a byte changed", flipped, "does not verify"},
		{"cut inside a chunk", b[:len(b)-1], "after its last whole chunk"},
		{"bytes after its last chunk", append(append([]byte{}, b...), 0, 0), "after its last whole chunk"},
		{"no head", b[:10], "not a work queue's log"},
	} {
		_, err := workq.DiskFromForTest(queues[1], tc.b)
		wantCode(t, tc.name, err, codes.ProtocolViolation)
		if err != nil && (!strings.Contains(err.Error(), "protocol violation by rank 0") || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %q, want rank 0 named and %q", tc.name, err, tc.want)
		}
	}
}

// TestWorkQueueForgedDiskRecord: with several masters, a rank that is no
// master sends rank 0 a record for the log on disk: H1627 names it.
func TestWorkQueueForgedDiskRecord(t *testing.T) {
	ctx := testCtx(t)
	f := newFixture(t, 4)
	f.base.Spec.CheckpointDir = t.TempDir()
	comms := f.initAll(ctx)
	errs := each(comms, func(c *runtime.Comm) error {
		w, err := workq.New(ctx, c, "q", wqItems(40), workq.Options{PerMaster: 2})
		if err != nil {
			return err
		}
		if c.Rank() == 3 { // the buddy of group 1 (ranks 2 and 3)
			if err := workq.ForgeDiskRecordForTest(ctx, w, 1, []byte("forged")); err != nil {
				return err
			}
			_, err := c.Recv(ctx, 0, 99) // nothing sends it: the job's end
			return err
		}
		return drain(ctx, w)
	})
	wantCode(t, "rank 0", errs[0], codes.ProtocolViolation)
	if !strings.Contains(errs[0].Error(), "protocol violation by rank 3") || !strings.Contains(errs[0].Error(), "which only a master sends") {
		t.Fatalf("rank 0: %q does not name rank 3 for its record", errs[0])
	}
}

// TestWorkQueueForgedRecord: a master that sends, at the queue's end, a
// log record naming an honest slot for an execution it never made (a
// fence never given, a result it never gave) is named by that slot
// (H1627): each rank audits the records that name it.
func TestWorkQueueForgedRecord(t *testing.T) {
	ctx := testCtx(t)
	comms := newFixture(t, 4).initAll(ctx)
	errs := each(comms, func(c *runtime.Comm) error {
		w, err := workq.New(ctx, c, "q", wqItems(40), workq.Options{PerMaster: 2})
		if err != nil {
			return err
		}
		if c.Rank() == 2 { // the master of group 1 (ranks 2 and 3)
			workq.ForgeRecordForTest(w, 1, 3, 999, []byte("forged"))
		}
		return drain(ctx, w)
	})
	wantCode(t, "rank 3", errs[3], codes.ProtocolViolation)
	if !strings.Contains(errs[3].Error(), "protocol violation by rank 2") || !strings.Contains(errs[3].Error(), "which never gave that result") {
		t.Fatalf("rank 3: %q does not name rank 2 for the record", errs[3])
	}
	// The others ended with the job, or finished the queue before the
	// end reached them (the forged execution is of no published item).
	for _, r := range []int{0, 1, 2} {
		if e := codes.As(errs[r]); errs[r] != nil && (e == nil || (e.Code != codes.JobEnded && e.Code != codes.ProtocolViolation)) {
			t.Fatalf("rank %d: %v, want the job ended or the queue finished", r, errs[r])
		}
	}
}

// drain takes w's tasks to its end, each result "ok".
func drain(ctx context.Context, w *workq.Queue) error {
	for {
		task, ok, err := w.Next(ctx)
		if err != nil || !ok {
			return err
		}
		if err := w.Done(ctx, task, []byte("ok")); err != nil {
			return err
		}
	}
}
