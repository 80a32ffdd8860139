package workq

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"sperli/ckpt"
	"sperli/codes"
	"sperli/runtime"
	"sperli/wire"
)

// A work queue's log under --checkpoint-dir (docs/workqueue.md): the
// master writes it to DIR/<job>/queues/<name's SHA-256>.wq so that a
// launcher restart resumes the queue from it. At its first write the
// master writes the whole log as a new file (synced, renamed over the
// last one, its directory synced); then it appends the new records in
// chunks, each synced. The format is package wire's (WorkFileMagic,
// AppendWorkChunk, WorkChunkMsg): each chunk signed with the job key
// (runtime.Hook.SignWorkLog). A chunk cut short at the end (a crash while
// it was written) is dropped; a whole one whose signature does not verify
// is H1620. The directory is the core's checkpoint store
// (runtime.Hook.CheckpointStore, package ckpt): an os.Root no name leaves.

// diskEvery is how many new records wake the writer, which also writes
// at the end.
const diskEvery = 32

// queuesDir is the directory of the queues' logs in the job's checkpoint
// directory.
const queuesDir = "queues"

// file is the master's open log file.
type file struct {
	st   *ckpt.Store
	f    *os.File
	k    uint32 // chunks written
	prev []byte // the last chunk's signature
}

// diskName is the log file's name: of the queue's name and its items, so
// that a queue of the same name and other items (a later call, another
// communicator's) has its own.
func (w *Queue) diskName() string {
	h := sha256.Sum256(append([]byte(w.name+"\x00"), w.sum[:]...))
	return hex.EncodeToString(h[:8]) + ".wq"
}

// diskOn reports whether this rank writes the queue's log: the master of a
// job with a checkpoint directory, holding the job key.
func (w *Queue) diskOn() bool {
	return w.c.Job().CheckpointDir != "" && w.hook.CanSignWorkLog() && w.q.Rank() == 0
}

// chunk is the bytes of chunk k of records after the chunk signed prev.
func (w *Queue) chunk(k uint32, records, prev []byte) ([]byte, []byte, error) {
	sig, err := w.hook.SignWorkLog(wire.WorkChunkMsg(w.sum, k, records, prev))
	if err != nil {
		return nil, nil, err
	}
	return wire.AppendWorkChunk(nil, records, sig), sig, nil
}

// create writes the whole log as a new file, durably, and opens it to
// append to.
func (w *Queue) create() (*file, error) {
	st, err := w.hook.CheckpointStore()
	if err != nil {
		return nil, w.diskErr(err)
	}
	d := &file{st: st, k: 1}
	if err := d.mkDir(); err != nil {
		d.close()
		return nil, w.diskErr(err)
	}
	w.mu.Lock()
	all := w.log.encode()
	w.mu.Unlock()
	c, sig, err := w.chunk(0, all, nil)
	if err != nil {
		d.close()
		return nil, err
	}
	if err := d.replace(w.diskName(), wire.AppendWorkFileHead(nil, w.sum), c); err != nil {
		d.close()
		return nil, w.diskErr(err)
	}
	if d.f, err = st.OpenAppend(queuesDir, w.diskName()); err != nil {
		d.close()
		return nil, w.diskErr(err)
	}
	d.prev = sig
	return d, nil
}

// append writes the records logged since the last write (fresh) as a
// chunk, synced.
func (w *Queue) append(d *file, fresh []byte) error {
	if len(fresh) == 0 {
		return nil
	}
	c, sig, err := w.chunk(d.k, fresh, d.prev)
	if err != nil {
		return err
	}
	if _, err := d.f.Write(c); err != nil {
		return w.diskErr(err)
	}
	if err := d.f.Sync(); err != nil {
		return w.diskErr(err)
	}
	d.k++
	d.prev = sig
	return nil
}

// mkDir makes the queues' directory (or finds it: a real one, not a file
// or a link) and syncs its parent's entry.
func (d *file) mkDir() error {
	if err := d.st.MkDir(queuesDir); err != nil {
		return err
	}
	return d.st.SyncDir(".")
}

// replace writes parts as the queues' file name, durably: under a fresh
// temporary name (a link there is never followed), synced, renamed over
// name, its directory synced; on any failure it leaves no file.
func (d *file) replace(name string, parts ...[]byte) error {
	t, err := d.st.CreateIn(queuesDir, name)
	if err != nil {
		return err
	}
	for _, p := range parts {
		t.Write(p)
	}
	return t.Commit()
}

func (d *file) close() {
	if d == nil {
		return
	}
	if d.f != nil {
		d.f.Close()
	}
	d.st.Close()
}

// writer writes the master's records to the log file on a goroutine of
// its own, so that the master does not wait for the disk: it takes what
// came since its last write, all of it, so its chunks grow while the disk
// is slow. A result counts when two ranks hold it; the file is for a
// restart, and a restart takes what reached it.
type writer struct {
	mu      sync.Mutex
	pending []byte
	count   int
	failed  bool // the writer stopped at an error
	kick    chan struct{}
	end     chan struct{}
	done    chan error
}

// startWriter starts the master's writer, which writes the whole log at
// once.
func (w *Queue) startWriter() *writer {
	wr := &writer{kick: make(chan struct{}, 1), end: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		d, err := w.create()
		defer d.close()
		for err == nil {
			ending := false
			select {
			case <-wr.kick:
			case <-wr.end:
				ending = true
			}
			wr.mu.Lock()
			batch := wr.pending
			wr.pending, wr.count = nil, 0
			wr.mu.Unlock()
			if err = w.append(d, batch); ending {
				break
			}
		}
		wr.mu.Lock()
		wr.failed, wr.pending = err != nil, nil
		wr.mu.Unlock()
		wr.done <- err
	}()
	return wr
}

// add queues a record; every diskEvery of them wake the writer. After
// the writer's error nothing more is kept.
func (wr *writer) add(r record) {
	wr.mu.Lock()
	if wr.failed {
		wr.mu.Unlock()
		return
	}
	wr.pending = wire.AppendWorkRecord(wr.pending, r)
	wr.count++
	wake := wr.count >= diskEvery
	wr.mu.Unlock()
	if wake {
		select {
		case wr.kick <- struct{}{}:
		default:
		}
	}
}

// finish writes what is left and returns the writer's first error.
func (wr *writer) finish() error {
	close(wr.end)
	return <-wr.done
}

func (w *Queue) diskErr(err error) error {
	if err == nil {
		return nil
	}
	return codes.Wrap(codes.CheckpointStorage, err, "work_queue %q: its log under the checkpoint directory: %v", w.name, err)
}

// readDisk is the log a restarted job's rank 0 finds and the bytes of it
// that verified (to be sent to every rank, which checks them too), or nil
// when there is none. One whose signature does not verify, or of other
// items, is H1620.
func (w *Queue) readDisk() (*qlog, []byte, error) {
	if w.q.Rank() != 0 {
		return nil, nil, nil
	}
	st, err := w.hook.CheckpointStore()
	if err != nil || st == nil {
		return nil, nil, w.diskErr(err)
	}
	defer st.Close()
	b, err := st.ReadIn(queuesDir, w.diskName())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, w.diskErr(err)
	}
	recs, n, err := w.parseDisk(b)
	if err != nil {
		return nil, nil, codes.New(codes.CommitSignature, "work_queue %q: its log %s/queues/%s: %s", w.name, st.Path, w.diskName(), why(err))
	}
	l := newLog(w.sum)
	for _, r := range recs {
		l.add(r)
	}
	return l, b[:n], nil
}

// parseDisk checks the bytes b of a log file of the queue: its head and
// the chain of its chunks' signatures, with the job's public key. It
// returns the records of the whole chunks and the length of the bytes
// that hold them.
func (w *Queue) parseDisk(b []byte) ([]record, int, error) {
	chunks, n, err := wire.DecodeWorkFile(b, w.sum, runtime.WorkLogSignatureSize)
	if err != nil {
		return nil, 0, err
	}
	var all []record
	var prev []byte
	for k, c := range chunks {
		if !w.hook.VerifyWorkLog(wire.WorkChunkMsg(w.sum, uint32(k), c.Records, prev), c.Sig) {
			return nil, 0, fmt.Errorf("the signature of its chunk %d does not verify", k)
		}
		recs, err := wire.DecodeWorkRecords(c.Records, len(w.items), w.hook.Slots())
		if err != nil {
			return nil, 0, fmt.Errorf("chunk %d: %s", k, why(err))
		}
		all = append(all, recs...)
		prev = c.Sig
	}
	return all, n, nil
}

// diskFrom is the records of the log on disk whose bytes b rank 0 sent.
func (w *Queue) diskFrom(b []byte) ([]record, error) {
	recs, n, err := w.parseDisk(b)
	if err == nil && n != len(b) {
		err = fmt.Errorf("%d bytes after its last whole chunk", len(b)-n)
	}
	if err != nil {
		// Rank 0 verified these bytes before it sent them.
		return nil, w.liar(0, "a log on disk whose chunks do not verify: %s", why(err))
	}
	return recs, nil
}
