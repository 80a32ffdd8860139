package runtime

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"sperli/ckpt"
	"sperli/codes"
	"sperli/runtime/mesh"
	"sperli/wire"
)

// The runtime's own messages travel in checkpoint frames, matched like data
// on tags with the top bit set, which no program can use.
const (
	sysTag     = 1 << 31
	tagFile    = 1 // a checkpoint file to the buddy
	tagFileAck = 2 // the buddy stored it (1) or not (0)
	tagFetch   = 3 // resume: a buddy copy back to its owner
)

type ckptState struct {
	dir   string // DIR, as given
	root  string // DIR/<job>
	used  bool
	epoch uint64 // the last committed (or resumed) epoch
	count int    // checkpoints completed in this incarnation
}

func storageErr(err error, format string, args ...any) error {
	return &codes.Error{Code: codes.CheckpointStorage, Rank: -1, Err: err, Msg: fmt.Sprintf(format, args...) + ": " + errText(err)}
}

func errText(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Op + " " + pe.Path + ": " + pe.Err.Error()
	}
	return err.Error()
}

// violation ends the job: rank, a joined peer, sent a record or transfer
// of checkpoint or resume that contradicts the protocol (H1627).
func (c *Comm) violation(rank int, format string, args ...any) error {
	c.fail(&codes.Error{Code: codes.ProtocolViolation, Rank: rank, Msg: fmt.Sprintf(format, args...)})
	return c.deadErr()
}

// UseCheckpoints names the checkpoint directory, relative to the working
// directory; "" takes the job's (the launcher's --checkpoint-dir). Files go
// to DIR/<job>/<epoch>/. It is local to this rank and makes the directory.
func (c *Comm) UseCheckpoints(dir string) error {
	if err := c.subRefusal("use_checkpoints"); err != nil {
		return err
	}
	if dir == "" {
		dir = c.job.CheckpointDir
	}
	if dir == "" {
		return &codes.Error{Code: codes.CheckpointStorage, Rank: -1, Msg: "use_checkpoints: no directory given and the job has none (--checkpoint-dir)"}
	}
	root := filepath.Join(dir, c.job.ID)
	st, err := ckpt.OpenStore(dir, c.job.ID)
	if err != nil {
		return storageErr(err, "use_checkpoints: cannot make %s", root)
	}
	st.Close()
	c.ckpt.dir, c.ckpt.root = dir, root
	c.ckpt.used = true
	return nil
}

// store opens this rank's checkpoint directory for one checkpoint or
// resume (the job's when the program named none).
func (c *Comm) store() (*ckpt.Store, error) {
	if !c.ckpt.used {
		if err := c.UseCheckpoints(""); err != nil {
			return nil, err
		}
	}
	st, err := ckpt.OpenStore(c.ckpt.dir, c.job.ID)
	if err != nil {
		return nil, storageErr(err, "cannot open the checkpoint directory %s", c.ckpt.root)
	}
	return st, nil
}

// agree runs one internal collective: every rank gives rec, rank 0 checks
// every record with check (a record that fails is H1627 naming its
// sender) and computes the verdict with decide, every rank returns the
// verdict. The caller checks the verdict: it comes from a peer too.
func (c *Comm) agree(ctx context.Context, kind wire.CollKind, rec []byte, check func([]byte) error, decide func([][]byte) []byte) ([]byte, error) {
	mine := wire.Call{Kind: kind, Length: uint32(len(rec))}
	return c.collective(ctx, mine, "", rec, func(all [][]byte) ([]byte, [][]byte, error) {
		for r, x := range all {
			if err := check(x); err != nil {
				return nil, nil, c.violation(r, "%s: the record of rank %d: %v", kind, r, err)
			}
		}
		out := decide(all)
		res := make([][]byte, len(all))
		for i := range res {
			res[i] = out
		}
		return out, res, nil
	})
}

// concat is the verdict of a round whose verdict is every record in rank
// order.
func concat(recs [][]byte) []byte {
	return bytes.Join(recs, nil)
}

// sysSend starts an internal message; sysRecv waits for one.
func (c *Comm) sysSend(dest int, tag uint32, data []byte) (*mesh.Frame, error) {
	f := &mesh.Frame{H: wire.Header{Type: wire.Checkpoint, Incarnation: c.inc, Tag: tag, Length: uint32(len(data))}, Payload: data, Counted: true, Done: make(chan struct{})}
	p := c.linkRank(dest)
	if p == nil {
		return f, fmt.Errorf("no link to rank %d", dest)
	}
	return f, c.linkErr("checkpoint", dest, p.Enqueue(f))
}

func (c *Comm) sysRecv(ctx context.Context, src int, tag uint32) ([]byte, error) {
	r := &recvOp{src: src, tag: tag | sysTag, done: make(chan struct{})}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	if c.match.post(r) {
		c.consumedLocked(c.peerRank(src), r.cost)
		c.mu.Unlock()
		return r.data, nil
	}
	c.mu.Unlock()
	if p := c.peerRank(src); p != nil {
		p.ReadFor(ctx, r.done)
	}
	select {
	case <-r.done:
		return r.data, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// sendFile sends the concatenation of parts to dest as a u64 length and
// chunks of at most 16 MiB, without waiting; the frames are returned so
// the caller can wait for them (the parts must not change until then).
// ok false sends the no-file marker instead.
func (c *Comm) sendFile(dest int, tag uint32, ok bool, parts ...[]byte) ([]*mesh.Frame, error) {
	n := uint64(0)
	for _, p := range parts {
		n += uint64(len(p))
	}
	if !ok {
		n = ckpt.NoFile
	}
	f, err := c.sysSend(dest, tag, binary.BigEndian.AppendUint64(nil, n))
	if err != nil {
		return nil, err
	}
	frames := []*mesh.Frame{f}
	for _, b := range parts {
		for ok && len(b) > 0 {
			k := min(len(b), wire.MaxPayload)
			f, err := c.sysSend(dest, tag, b[:k])
			if err != nil {
				return nil, err
			}
			frames = append(frames, f)
			b = b[k:]
		}
	}
	return frames, nil
}

// recvChunks receives the n bytes a transfer announced, chunk by chunk;
// each goes to sink as it arrives, so nothing is allocated for bytes that
// have not come. bad is what contradicts the transfer (an empty chunk, one
// past n, or what sink refuses); err is the end of the job or of ctx.
func (c *Comm) recvChunks(ctx context.Context, src int, tag uint32, n uint64, sink func([]byte) error) (bad, err error) {
	for got := uint64(0); got < n; {
		chunk, err := c.sysRecv(ctx, src, tag)
		if err != nil {
			return nil, err
		}
		if len(chunk) == 0 || uint64(len(chunk)) > n-got {
			return fmt.Errorf("a chunk of %d bytes with %d of the announced %d to come", len(chunk), n-got, n), nil
		}
		got += uint64(len(chunk))
		if bad := sink(chunk); bad != nil {
			return bad, nil
		}
	}
	return nil, nil
}

// recvBuddy receives rank prev's file at checkpoint of epoch e and writes
// it to the buddy copy as it arrives (one chunk in memory at a time). It
// returns the copy's header and whether it is stored; storeErr is a
// failure of this rank's storage, err a violation or the job's end.
func (c *Comm) recvBuddy(ctx context.Context, st *ckpt.Store, e uint64, prev int) (hdr ckpt.FileHeader, stored bool, storeErr, err error) {
	what := fmt.Sprintf("checkpoint of epoch %d: the file of rank %d", e, prev)
	head, err := c.sysRecv(ctx, prev, tagFile)
	if err != nil {
		return hdr, false, nil, err
	}
	n, ok, lerr := ckpt.CheckBlobLength(head, false)
	if lerr != nil {
		return hdr, false, nil, c.violation(prev, "%s: %v", what, lerr)
	}
	if !ok {
		return hdr, false, nil, nil // prev could not write its file
	}
	t, cerr := st.Create(e, ckpt.BuddyName(prev))
	if cerr != nil {
		storeErr = storageErr(cerr, "checkpoint of epoch %d: cannot write %s", e, ckpt.BuddyName(prev))
	}
	first := make([]byte, 0, ckpt.HeaderLen)
	bad, rerr := c.recvChunks(ctx, prev, tagFile, n, func(chunk []byte) error {
		if len(first) < ckpt.HeaderLen {
			k := min(ckpt.HeaderLen-len(first), len(chunk))
			first = append(first, chunk[:k]...)
			if len(first) == ckpt.HeaderLen {
				if err := ckpt.CheckBuddyHeader(first, c.job.ID, e, prev, c.size, n); err != nil {
					return err
				}
			}
		}
		if t != nil {
			t.Write(chunk)
		}
		return nil
	})
	if bad != nil || rerr != nil {
		if t != nil {
			t.Abort()
		}
		if bad != nil {
			rerr = c.violation(prev, "%s: %v", what, bad)
		}
		return hdr, false, nil, rerr
	}
	hdr, _ = ckpt.DecodeFileHeader(first)
	if t == nil {
		return hdr, false, storeErr, nil
	}
	if err := t.Commit(); err != nil {
		return hdr, false, storageErr(err, "checkpoint of epoch %d: cannot write %s", e, ckpt.BuddyName(prev)), nil
	}
	return hdr, true, nil, nil
}

// recvFetch receives the file a buddy sends back at resume. The chunks
// are kept as they come and joined at the end, so what is allocated is
// what arrived, never what the length record claims.
func (c *Comm) recvFetch(ctx context.Context, src int, what string) ([]byte, error) {
	head, err := c.sysRecv(ctx, src, tagFetch)
	if err != nil {
		return nil, err
	}
	n, _, lerr := ckpt.CheckBlobLength(head, true)
	if lerr != nil {
		return nil, c.violation(src, "%s: %v", what, lerr)
	}
	var chunks [][]byte
	bad, rerr := c.recvChunks(ctx, src, tagFetch, n, func(chunk []byte) error {
		chunks = append(chunks, chunk)
		return nil
	})
	if bad != nil {
		return nil, c.violation(src, "%s: %v", what, bad)
	}
	if rerr != nil {
		return nil, rerr
	}
	if len(chunks) == 1 {
		return chunks[0], nil
	}
	return concat(chunks), nil
}

// waitFrames waits until frames, sent to rank to, are written. A write
// that failed (the connection broke: to died while its file went out) is
// the loss of to, or the job's end, as a send's is (linkErr), never the
// socket's own words.
func waitFrames(ctx context.Context, c *Comm, to int, frames []*mesh.Frame) error {
	for _, f := range frames {
		select {
		case <-f.Done:
			if f.Err != nil {
				return c.linkErr("checkpoint", to, f.Err)
			}
		case <-c.dead:
			return c.deadErr()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Checkpoint stores state as the next epoch (SPEC §9): this rank's file,
// the buddy copy on rank (n+1) mod size, and the COMMIT signed by rank 0.
// Every rank calls it in the same order as the collectives. It returns when
// the COMMIT is stored on this rank. An operation still open on any rank is
// H1624 on every rank; a file that cannot be written, or a checkpoint
// directory that cannot be used, is H1625 on every rank, and the previous
// epoch is left as it was; a state over MaxState is H1616 on every rank.
// state is not changed. A record or transfer of a peer that contradicts
// the protocol ends the job (H1627).
func (c *Comm) Checkpoint(ctx context.Context, state []byte) (err error) {
	if sp := traceBegin(); sp.on() {
		defer func() { sp.call("checkpoint", err, targ("bytes", len(state)), targ("epoch", int(c.ckpt.epoch))) }()
	}
	if err := c.subRefusal("checkpoint"); err != nil {
		return err
	}
	c.ckptMu.Lock()
	defer c.ckptMu.Unlock()
	c.mu.Lock()
	err = c.callableLocked("checkpoint")
	open := len(c.open)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	st, stErr := c.store()
	defer st.Close()
	e := c.ckpt.epoch + 1
	c.failurePoint("before-ckpt", c.ckpt.count+1)

	// 1. Every rank says whether it can take part; one rank that cannot
	// is the same code everywhere.
	status := byte(ckpt.BeginReady)
	switch {
	case stErr != nil:
		status = ckpt.BeginStorage
	case uint64(len(state)) > ckpt.MaxState:
		status = ckpt.BeginTooBig
	case open > 0:
		status = ckpt.BeginOpen
	}
	table, err := c.agree(ctx, wire.CollCkptBegin, []byte{status}, ckpt.CheckBeginRecord, concat)
	if err != nil {
		return err
	}
	if verr := ckpt.CheckBeginVerdict(table, c.size, c.rank, status); verr != nil {
		return c.violation(0, "checkpoint of epoch %d: the verdict of rank 0 on the begin round: %v", e, verr)
	}
	if err := ckpt.BeginOutcome(table, e, c.rank, stErr); err != nil {
		return err
	}

	// 2. This rank's file.
	sum := sha256.Sum256(state)
	hdr := ckpt.FileHeader{Version: ckpt.Version, Job: c.job.ID, Epoch: e, Rank: uint32(c.rank), Size: uint32(c.size), Length: uint64(len(state)), Sum: sum}
	head := hdr.Encode()
	var ownErr error
	if err := st.MkEpoch(e); err != nil {
		ownErr = storageErr(err, "checkpoint of epoch %d: cannot make %s", e, c.epochDir(e))
	} else {
		st.Remove(e, ckpt.CommitName) // a replaced epoch is garbage until its new COMMIT
		if err := st.Write(e, ckpt.OwnName(c.rank), head, state); err != nil {
			ownErr = storageErr(err, "checkpoint of epoch %d: cannot write %s", e, ckpt.OwnName(c.rank))
		}
	}
	c.failurePoint("mid-ckpt", c.ckpt.count+1)

	// 3. The buddy copy: send ours to rank n+1, keep rank n-1's.
	bud, err := c.ckptBuddy(ctx, st, e, ownErr == nil, head, state)
	if err != nil {
		return err
	}

	// 4. Rank 0 gathers the hashes, signs the COMMIT and hands it to all.
	return c.ckptCommit(ctx, st, e, sum, ownErr, bud)
}

// buddyCopy is how the buddy copy of a checkpoint went on this rank: the
// copy it keeps of rank n-1's file (stored, its header; err when it could
// not store it) and whether rank n+1 kept this rank's (ok).
type buddyCopy struct {
	hdr    ckpt.FileHeader
	stored bool
	err    error
	ok     bool
}

// ckptBuddy is step 3 of Checkpoint: this rank's file goes to rank n+1
// (sent is whether this rank has one), rank n-1's is kept, and each side
// says whether it stored the copy.
func (c *Comm) ckptBuddy(ctx context.Context, st *ckpt.Store, e uint64, sent bool, head, state []byte) (buddyCopy, error) {
	bud := buddyCopy{ok: true}
	if c.size == 1 {
		return bud, nil
	}
	prev, next := (c.rank+c.size-1)%c.size, (c.rank+1)%c.size
	frames, err := c.sendFile(next, tagFile, sent, head, state)
	if err != nil {
		return bud, err
	}
	bud.hdr, bud.stored, bud.err, err = c.recvBuddy(ctx, st, e, prev)
	if err != nil {
		return bud, err
	}
	stored := byte(0)
	if bud.stored {
		stored = 1
	}
	ack, err := c.sysSend(prev, tagFileAck, []byte{stored})
	if err != nil {
		return bud, err
	}
	a, err := c.sysRecv(ctx, next, tagFileAck)
	if err != nil {
		return bud, err
	}
	if bud.ok, err = ckpt.CheckAck(a); err != nil {
		return bud, c.violation(next, "checkpoint of epoch %d: the answer of rank %d on the buddy copy: %v", e, next, err)
	}
	if err := waitFrames(ctx, c, next, frames); err != nil {
		return bud, err
	}
	return bud, waitFrames(ctx, c, prev, []*mesh.Frame{ack})
}

// ckptCommit is step 4 of Checkpoint: rank 0 gathers every rank's hash (or
// why it failed), signs the COMMIT and hands it to all; every rank checks
// it and stores it, or removes the epoch's files when it failed.
func (c *Comm) ckptCommit(ctx context.Context, st *ckpt.Store, e uint64, sum [32]byte, ownErr error, bud buddyCopy) error {
	rec := make([]byte, ckpt.CommitRecLen)
	switch {
	case ownErr != nil:
		rec[0] = ckpt.CommitOwnFailed
	case bud.err != nil:
		rec[0] = ckpt.CommitBuddyFail
	case !bud.ok:
		rec[0] = ckpt.CommitNotKept
	}
	copy(rec[1:], sum[:])
	res, err := c.agree(ctx, wire.CollCkptCommit, rec, ckpt.CheckCommitRecord, func(recs [][]byte) []byte {
		sums := make([][32]byte, len(recs))
		for r, x := range recs {
			if x[0] != ckpt.CommitOK {
				why := [...]string{"", "could not write its file", "could not store its buddy copy", "its buddy could not store its copy"}[x[0]]
				return append([]byte{1}, fmt.Sprintf("rank %d %s", r, why)...)
			}
			copy(sums[r][:], x[1:])
		}
		if c.jobPriv == nil {
			return append([]byte{1}, "rank 0 has no job key to sign the COMMIT"...)
		}
		cm, err := ckpt.EncodeCommit(c.job.ID, e, sums, c.jobPriv)
		if err != nil {
			return append([]byte{1}, ckpt.CutText("signing the COMMIT: "+err.Error(), ckpt.MaxReason)...)
		}
		return append([]byte{0}, cm...)
	})
	if err != nil {
		return err
	}
	ok, rest, verr := ckpt.CheckCommitVerdict(res, rec[0])
	if verr == nil && ok && c.rank != 0 {
		verr = c.checkNewCommit(rest, e, sum, bud.stored, bud.hdr.Sum)
	}
	if verr != nil {
		return c.violation(0, "checkpoint of epoch %d: the COMMIT verdict of rank 0: %v", e, verr)
	}
	if !ok {
		c.removeEpochFiles(st, e)
		for _, own := range []error{ownErr, bud.err} {
			if own != nil {
				return own
			}
		}
		return &codes.Error{Code: codes.CheckpointStorage, Rank: -1, Msg: fmt.Sprintf("checkpoint of epoch %d failed: %s", e, rest)}
	}
	if err := st.Write(e, ckpt.CommitName, rest); err != nil {
		return storageErr(err, "checkpoint of epoch %d: cannot store the COMMIT", e)
	}
	c.ckpt.epoch = e
	c.ckpt.count++
	c.prune(st, e)
	c.failurePoint("after-ckpt", c.ckpt.count)
	return nil
}

// checkNewCommit checks the COMMIT rank 0 sent at checkpoint of epoch e:
// it verifies, names this job, epoch and size, holds this rank's hash and
// the hash of the buddy copy this rank stored.
func (c *Comm) checkNewCommit(b []byte, e uint64, sum [32]byte, budStored bool, budSum [32]byte) error {
	cm, err := ckpt.DecodeCommit(b, c.jobPub)
	if err != nil {
		return err
	}
	switch {
	case cm.Job != c.job.ID || cm.Epoch != e || int(cm.Size) != c.size:
		return fmt.Errorf("the COMMIT names job %q epoch %d size %d, want %s, %d, %d", cm.Job, cm.Epoch, cm.Size, c.job.ID, e, c.size)
	case cm.Sums[c.rank] != sum:
		return fmt.Errorf("the COMMIT's hash of rank %d is not this rank's", c.rank)
	case budStored && cm.Sums[(c.rank+c.size-1)%c.size] != budSum:
		return fmt.Errorf("the COMMIT's hash of rank %d is not that of its copy this rank keeps", (c.rank+c.size-1)%c.size)
	}
	return nil
}

// CheckpointValue is Checkpoint of v's MarshalBinary.
func (c *Comm) CheckpointValue(ctx context.Context, v encoding.BinaryMarshaler) error {
	b, err := v.MarshalBinary()
	if err != nil {
		return fmt.Errorf("checkpoint: %T.MarshalBinary: %w", v, err)
	}
	return c.Checkpoint(ctx, b)
}

func (c *Comm) epochDir(e uint64) string {
	return filepath.Join(c.ckpt.root, strconv.FormatUint(e, 10))
}

// removeEpochFiles removes this rank's files of a failed epoch.
func (c *Comm) removeEpochFiles(st *ckpt.Store, e uint64) {
	st.Remove(e, ckpt.OwnName(c.rank))
	if c.size > 1 {
		st.Remove(e, ckpt.BuddyName((c.rank+c.size-1)%c.size))
	}
	st.RemoveDir(e) // only if empty
}

// prune keeps only epochs e and e-1: an older epoch directory goes whole,
// with any temporary file a crash left in it (a COMMIT or a written-back
// file being stored when the process was killed). No rank needs an epoch
// before e-1 once a COMMIT of e is stored.
func (c *Comm) prune(st *ckpt.Store, e uint64) {
	for _, n := range st.Epochs() {
		if n+1 < e {
			st.RemoveAll(n)
		}
	}
}

// Epoch returns the last committed or resumed epoch (0: none).
func (c *Comm) Epoch() uint64 { return c.ckpt.epoch }
