package runtime

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"sperli/ckpt"
	"sperli/codes"
	"sperli/pki"
)

// A work queue's log under --checkpoint-dir (docs/workqueue.md): the
// master writes it to DIR/<job>/queues/<name's SHA-256>.wq so that a
// launcher restart resumes the queue from it. At its first write the
// master writes the whole log as a new file (synced, renamed over the
// last one, its directory synced); then it appends the new records in
// chunks, each synced. File: "SPRLWQ3\x00" (2: slots were u16), the SHA-256 of the queue's
// name and items (32 bytes), then chunks: the records' length (u32), the
// records (as on the wire), and the job key's signature (as a COMMIT's)
// of the items' SHA-256, the chunk's number (u32), the records' SHA-256
// and the signature of the chunk before (none for the first). A chunk cut
// short at the end (a crash while it was written) is dropped; a whole one
// whose signature does not verify is H1620.

const wqFileMagic = "SPRLWQ3\x00"

// wqDiskEvery is how many new records wake the writer (wqWriter), which
// also writes at the end.
const wqDiskEvery = 32

// wqDisk is the master's open log file.
type wqDisk struct {
	st   *ckpt.Store
	f    *os.File
	k    uint32 // chunks written
	prev []byte // the last chunk's signature
}

// diskName is the log file's name: of the queue's name and its items, so
// that a queue of the same name and other items (a later call, another
// communicator's) has its own.
func (w *WorkQueue) diskName() string {
	h := sha256.Sum256(append([]byte(w.name+"\x00"), w.sum[:]...))
	return hex.EncodeToString(h[:8]) + ".wq"
}

// diskOn reports whether this rank writes the queue's log: the master of a
// job with a checkpoint directory, holding the job key.
func (w *WorkQueue) diskOn() bool {
	return w.c.job.CheckpointDir != "" && w.c.jobPriv != nil && w.q.Rank() == 0
}

// chunkMsg is what a chunk's signature signs.
func chunkMsg(sum [32]byte, k uint32, records, prev []byte) []byte {
	h := sha256.Sum256(records)
	b := binary.BigEndian.AppendUint32(append([]byte{}, sum[:]...), k)
	return append(append(b, h[:]...), prev...)
}

// chunk is the bytes of chunk k of records after the chunk signed prev.
func (w *WorkQueue) chunk(k uint32, records, prev []byte) ([]byte, []byte, error) {
	sig, err := w.c.jobPriv.Sign(pki.DomainWorkLog, chunkMsg(w.log.sum, k, records, prev))
	if err != nil {
		return nil, nil, err
	}
	b := binary.BigEndian.AppendUint32(nil, uint32(len(records)))
	return append(append(b, records...), sig...), sig, nil
}

// writeDisk writes the records logged since the last write (fresh): the
// whole log as a new file at the first write, else a chunk appended.
func (w *WorkQueue) writeDisk(d **wqDisk, fresh []byte) error {
	if *d == nil {
		st, err := ckpt.OpenStore(w.c.job.CheckpointDir, w.c.job.ID)
		if err != nil {
			return w.diskErr(err)
		}
		if err := st.MkDir("queues"); err != nil {
			st.Close()
			return w.diskErr(err)
		}
		if err := st.SyncDir("."); err != nil { // the new directory's entry
			st.Close()
			return w.diskErr(err)
		}
		w.mu.Lock()
		all := w.log.encode()
		w.mu.Unlock()
		c, sig, err := w.chunk(0, all, nil)
		if err != nil {
			st.Close()
			return err
		}
		t, err := st.CreateIn("queues", w.diskName())
		if err != nil {
			st.Close()
			return w.diskErr(err)
		}
		t.Write(append(append([]byte(wqFileMagic), w.log.sum[:]...), c...))
		if err := t.Commit(); err != nil {
			st.Close()
			return w.diskErr(err)
		}
		f, err := st.Root.OpenFile(filepath.Join("queues", w.diskName()), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			st.Close()
			return w.diskErr(err)
		}
		*d = &wqDisk{st: st, f: f, k: 1, prev: sig}
		return nil
	}
	if len(fresh) == 0 {
		return nil
	}
	c, sig, err := w.chunk((*d).k, fresh, (*d).prev)
	if err != nil {
		return err
	}
	if _, err := (*d).f.Write(c); err != nil {
		return w.diskErr(err)
	}
	if err := (*d).f.Sync(); err != nil {
		return w.diskErr(err)
	}
	(*d).k++
	(*d).prev = sig
	return nil
}

// wqWriter writes the master's records to the log file on a goroutine of
// its own, so that the master does not wait for the disk: it takes what
// came since its last write, all of it, so its chunks grow while the disk
// is slow. A result counts when two ranks hold it; the file is for a
// restart, and a restart takes what reached it.
type wqWriter struct {
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
func (w *WorkQueue) startWriter() *wqWriter {
	wr := &wqWriter{kick: make(chan struct{}, 1), end: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		var d *wqDisk
		defer func() { d.close() }()
		err := w.writeDisk(&d, nil)
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
			if err = w.writeDisk(&d, batch); ending {
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

// add queues a record; every wqDiskEvery of them wake the writer. After
// the writer's error nothing more is kept.
func (wr *wqWriter) add(r wqRecord) {
	wr.mu.Lock()
	if wr.failed {
		wr.mu.Unlock()
		return
	}
	wr.pending = r.append(wr.pending)
	wr.count++
	wake := wr.count >= wqDiskEvery
	wr.mu.Unlock()
	if wake {
		select {
		case wr.kick <- struct{}{}:
		default:
		}
	}
}

// finish writes what is left and returns the writer's first error.
func (wr *wqWriter) finish() error {
	close(wr.end)
	return <-wr.done
}

func (d *wqDisk) close() {
	if d != nil {
		d.f.Close()
		d.st.Close()
	}
}

func (w *WorkQueue) diskErr(err error) error {
	if err == nil {
		return nil
	}
	return codes.Wrap(codes.CheckpointStorage, err, "work_queue %q: its log under the checkpoint directory: %v", w.name, err)
}

// readDisk is the log a restarted job's master finds and the bytes of
// it that verified (to be sent to every rank, which checks them too), or
// nil when there is none. One whose signature does not verify, or of
// other items, is H1620.
func (w *WorkQueue) readDisk(sum [32]byte) (*wqLog, []byte, error) {
	if w.c.job.CheckpointDir == "" || w.q.Rank() != 0 {
		return nil, nil, nil
	}
	st, err := ckpt.OpenStore(w.c.job.CheckpointDir, w.c.job.ID)
	if err != nil {
		return nil, nil, w.diskErr(err)
	}
	defer st.Close()
	b, err := st.ReadIn("queues", w.diskName())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, w.diskErr(err)
	}
	recs, n, err := w.parseDisk(b, sum)
	if err != nil {
		return nil, nil, codes.New(codes.CommitSignature, "work_queue %q: its log %s/queues/%s: %v", w.name, st.Path, w.diskName(), err)
	}
	l := newWQLog(sum)
	for _, r := range recs {
		l.add(r)
	}
	return l, b[:n], nil
}

// parseDisk checks the bytes b of a log file of the queue's items (sum):
// its head and the chain of its chunks' signatures, with the job's public
// key. It returns the records of the whole chunks and the length of the
// bytes that hold them (a chunk cut short at the end, a crash while it
// was written, is dropped).
func (w *WorkQueue) parseDisk(b []byte, sum [32]byte) ([]wqRecord, int, error) {
	head := len(wqFileMagic) + 32
	if len(b) < head || string(b[:len(wqFileMagic)]) != wqFileMagic {
		return nil, 0, fmt.Errorf("not a work queue's log (%d bytes)", len(b))
	}
	if !bytes.Equal(b[len(wqFileMagic):head], sum[:]) {
		return nil, 0, errors.New("it is of other items")
	}
	var all []wqRecord
	var prev []byte
	rest := b[head:]
	for k := uint32(0); len(rest) >= 4; k++ {
		n := uint64(binary.BigEndian.Uint32(rest))
		if uint64(len(rest)) < 4+n+pki.SignatureSize {
			break // cut short by a crash while it was written
		}
		records, sig := rest[4:4+n], rest[4+n:4+n+pki.SignatureSize]
		if !w.c.jobPub.Verify(pki.DomainWorkLog, chunkMsg(sum, k, records, prev), sig) {
			return nil, 0, fmt.Errorf("the signature of its chunk %d does not verify", k)
		}
		recs, err := parseRecords(records, len(w.items), w.c.links.slots)
		if err != nil {
			return nil, 0, fmt.Errorf("chunk %d: %v", k, err)
		}
		all = append(all, recs...)
		prev, rest = sig, rest[4+n+pki.SignatureSize:]
	}
	return all, len(b) - len(rest), nil
}
