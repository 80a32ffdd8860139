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
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"sperli/codes"
	"sperli/job"
	"sperli/pki"
	"sperli/runtime/mesh"
	"sperli/wire"
)

// Checkpoints (SPEC §9). The file formats are in docs/protocol.md §11.
const (
	ckptMagic     = "SPCK"
	commitMagic   = "SPCM"
	ckptVersion   = 1
	ckptHeaderLen = 96
	commitName    = "COMMIT"
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
	st, err := openStore(dir, c.job.ID)
	if err != nil {
		return storageErr(err, "use_checkpoints: cannot make %s", root)
	}
	st.close()
	c.ckpt.dir, c.ckpt.root = dir, root
	c.ckpt.used = true
	return nil
}

// store opens this rank's checkpoint directory for one checkpoint or
// resume (the job's when the program named none).
func (c *Comm) store() (*ckptStore, error) {
	if !c.ckpt.used {
		if err := c.UseCheckpoints(""); err != nil {
			return nil, err
		}
	}
	st, err := openStore(c.ckpt.dir, c.job.ID)
	if err != nil {
		return nil, storageErr(err, "cannot open the checkpoint directory %s", c.ckpt.root)
	}
	return st, nil
}

// fileHeader is the 96-byte header of a rank's checkpoint file.
type fileHeader struct {
	Version uint8
	Job     string
	Epoch   uint64
	Rank    uint32
	Size    uint32
	Length  uint64
	Sum     [32]byte
}

func (h fileHeader) encode() []byte {
	b := make([]byte, ckptHeaderLen)
	copy(b, ckptMagic)
	b[4] = h.Version
	copy(b[8:40], h.Job)
	binary.BigEndian.PutUint64(b[40:], h.Epoch)
	binary.BigEndian.PutUint32(b[48:], h.Rank)
	binary.BigEndian.PutUint32(b[52:], h.Size)
	binary.BigEndian.PutUint64(b[56:], h.Length)
	copy(b[64:96], h.Sum[:])
	return b
}

// decodeFileHeader checks the structure of a checkpoint file's header.
func decodeFileHeader(b []byte) (fileHeader, error) {
	var h fileHeader
	if len(b) < ckptHeaderLen {
		return h, fmt.Errorf("file is %d bytes, shorter than the %d-byte header", len(b), ckptHeaderLen)
	}
	if string(b[:4]) != ckptMagic {
		return h, fmt.Errorf("magic is %q, want %q", b[:4], ckptMagic)
	}
	if b[5] != 0 || b[6] != 0 || b[7] != 0 {
		return h, errors.New("reserved header bytes are not zero")
	}
	h.Version = b[4]
	h.Job = string(b[8:40])
	h.Epoch = binary.BigEndian.Uint64(b[40:])
	h.Rank = binary.BigEndian.Uint32(b[48:])
	h.Size = binary.BigEndian.Uint32(b[52:])
	h.Length = binary.BigEndian.Uint64(b[56:])
	copy(h.Sum[:], b[64:96])
	return h, nil
}

// commit is a decoded COMMIT: the epoch's SHA-256 of every rank's state.
type commit struct {
	Job   string
	Epoch uint64
	Size  uint32
	Sums  [][32]byte
	raw   []byte
}

func encodeCommit(job string, epoch uint64, sums [][32]byte, key *pki.PrivateKey) ([]byte, error) {
	b := make([]byte, 0, 56+32*len(sums)+pki.SignatureSize)
	b = append(b, commitMagic...)
	b = append(b, ckptVersion, 0, 0, 0)
	b = append(b, job...)
	b = binary.BigEndian.AppendUint64(b, epoch)
	b = binary.BigEndian.AppendUint32(b, uint32(len(sums)))
	b = binary.BigEndian.AppendUint32(b, 0)
	for _, s := range sums {
		b = append(b, s[:]...)
	}
	sig, err := key.Sign(pki.DomainCommit, b)
	if err != nil {
		return nil, err
	}
	return append(b, sig...), nil
}

// decodeCommit checks a COMMIT's structure and signature.
func decodeCommit(b []byte, pub *pki.PublicKey) (*commit, error) {
	c, body, err := parseCommit(b)
	if err != nil {
		return nil, err
	}
	if !pub.Verify(pki.DomainCommit, b[:body], b[body:]) {
		return nil, errors.New("COMMIT signature does not verify")
	}
	return c, nil
}

// parseCommit checks a COMMIT's structure (length first, then magic,
// version, reserved bytes) and returns it and the length of its signed
// body; it does not check the signature.
func parseCommit(b []byte) (*commit, int, error) {
	if len(b) < 56+pki.SignatureSize || string(b[:4]) != commitMagic {
		return nil, 0, errors.New("not a COMMIT")
	}
	if b[4] != ckptVersion {
		return nil, 0, fmt.Errorf("COMMIT version %d, want %d", b[4], ckptVersion)
	}
	if b[5] != 0 || b[6] != 0 || b[7] != 0 || binary.BigEndian.Uint32(b[52:]) != 0 {
		return nil, 0, errors.New("COMMIT reserved bytes are not zero")
	}
	size := binary.BigEndian.Uint32(b[48:])
	body := 56 + 32*int(size)
	if size == 0 || size > job.MaxSize || len(b) != body+pki.SignatureSize {
		return nil, 0, fmt.Errorf("COMMIT of %d bytes does not hold %d hashes and a signature", len(b), size)
	}
	c := &commit{Job: string(b[8:40]), Epoch: binary.BigEndian.Uint64(b[40:]), Size: size, raw: b}
	for i := 0; i < int(size); i++ {
		var s [32]byte
		copy(s[:], b[56+32*i:])
		c.Sums = append(c.Sums, s)
	}
	return c, body, nil
}

func ownName(rank int) string   { return fmt.Sprintf("rank-%d.ckpt", rank) }
func buddyName(rank int) string { return fmt.Sprintf("rank-%d.ckpt.buddy", rank) }

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
		n = noFile
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

// checkBuddyHeader checks the header of a buddy copy being received at
// checkpoint: the file of rank of this job and epoch, as long as its
// transfer.
func checkBuddyHeader(b []byte, job string, e uint64, rank, size int, n uint64) error {
	h, err := decodeFileHeader(b)
	if err != nil {
		return err
	}
	switch {
	case h.Version != ckptVersion:
		return fmt.Errorf("header version %d, want %d", h.Version, ckptVersion)
	case h.Job != job || h.Epoch != e || h.Rank != uint32(rank) || h.Size != uint32(size):
		return fmt.Errorf("header names job %q epoch %d rank %d size %d, want %s, %d, %d, %d", h.Job, h.Epoch, h.Rank, h.Size, job, e, rank, size)
	case h.Length != n-ckptHeaderLen:
		return fmt.Errorf("header says %d bytes of state, the transfer %d", h.Length, n-ckptHeaderLen)
	}
	return nil
}

// recvBuddy receives rank prev's file at checkpoint of epoch e and writes
// it to the buddy copy as it arrives (one chunk in memory at a time). It
// returns the copy's header and whether it is stored; storeErr is a
// failure of this rank's storage, err a violation or the job's end.
func (c *Comm) recvBuddy(ctx context.Context, st *ckptStore, e uint64, prev int) (hdr fileHeader, stored bool, storeErr, err error) {
	what := fmt.Sprintf("checkpoint of epoch %d: the file of rank %d", e, prev)
	head, err := c.sysRecv(ctx, prev, tagFile)
	if err != nil {
		return hdr, false, nil, err
	}
	n, ok, lerr := checkBlobLength(head, false)
	if lerr != nil {
		return hdr, false, nil, c.violation(prev, "%s: %v", what, lerr)
	}
	if !ok {
		return hdr, false, nil, nil // prev could not write its file
	}
	t, cerr := st.create(e, buddyName(prev))
	if cerr != nil {
		storeErr = storageErr(cerr, "checkpoint of epoch %d: cannot write %s", e, buddyName(prev))
	}
	first := make([]byte, 0, ckptHeaderLen)
	bad, rerr := c.recvChunks(ctx, prev, tagFile, n, func(chunk []byte) error {
		if len(first) < ckptHeaderLen {
			k := min(ckptHeaderLen-len(first), len(chunk))
			first = append(first, chunk[:k]...)
			if len(first) == ckptHeaderLen {
				if err := checkBuddyHeader(first, c.job.ID, e, prev, c.size, n); err != nil {
					return err
				}
			}
		}
		if t != nil {
			t.write(chunk)
		}
		return nil
	})
	if bad != nil || rerr != nil {
		if t != nil {
			t.abort()
		}
		if bad != nil {
			rerr = c.violation(prev, "%s: %v", what, bad)
		}
		return hdr, false, nil, rerr
	}
	hdr, _ = decodeFileHeader(first)
	if t == nil {
		return hdr, false, storeErr, nil
	}
	if err := t.commit(); err != nil {
		return hdr, false, storageErr(err, "checkpoint of epoch %d: cannot write %s", e, buddyName(prev)), nil
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
	n, _, lerr := checkBlobLength(head, true)
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

// ranksWith lists the ranks whose byte in table (one per rank) is x.
func ranksWith(table []byte, x byte) []string {
	var out []string
	for r, v := range table {
		if v == x {
			out = append(out, strconv.Itoa(r))
		}
	}
	return out
}

// beginOutcome is the outcome of the begin round on every rank: nil to
// go on, else the same code everywhere; a rank that is itself the cause
// of H1625 returns its own error (it names the directory and the system's
// error), the others name it.
func beginOutcome(table []byte, e uint64, rank int, ownErr error) error {
	if rs := ranksWith(table, beginStorage); len(rs) > 0 {
		if table[rank] == beginStorage && ownErr != nil {
			return ownErr
		}
		return &codes.Error{Code: codes.CheckpointStorage, Rank: -1, Msg: fmt.Sprintf("checkpoint of epoch %d: rank %s cannot use its checkpoint directory", e, strings.Join(rs, ", "))}
	}
	if rs := ranksWith(table, beginTooBig); len(rs) > 0 {
		return &codes.Error{Code: codes.OutOfRange, Op: "checkpoint", Rank: -1, Msg: fmt.Sprintf("checkpoint of epoch %d: the state of rank %s is over the limit of %d bytes", e, strings.Join(rs, ", "), uint64(MaxState))}
	}
	if rs := ranksWith(table, beginOpen); len(rs) > 0 {
		return &codes.Error{Code: codes.CheckpointOpen, Rank: -1, Msg: fmt.Sprintf("checkpoint of epoch %d: rank %s still has an open send or receive", e, strings.Join(rs, ", "))}
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
	defer st.close()
	e := c.ckpt.epoch + 1
	c.failurePoint("before-ckpt", c.ckpt.count+1)

	// 1. Every rank says whether it can take part; one rank that cannot
	// is the same code everywhere.
	status := byte(beginReady)
	switch {
	case stErr != nil:
		status = beginStorage
	case uint64(len(state)) > MaxState:
		status = beginTooBig
	case open > 0:
		status = beginOpen
	}
	table, err := c.agree(ctx, wire.CollCkptBegin, []byte{status}, checkBeginRecord, concat)
	if err != nil {
		return err
	}
	if verr := checkBeginVerdict(table, c.size, c.rank, status); verr != nil {
		return c.violation(0, "checkpoint of epoch %d: the verdict of rank 0 on the begin round: %v", e, verr)
	}
	if err := beginOutcome(table, e, c.rank, stErr); err != nil {
		return err
	}

	// 2. This rank's file.
	sum := sha256.Sum256(state)
	hdr := fileHeader{Version: ckptVersion, Job: c.job.ID, Epoch: e, Rank: uint32(c.rank), Size: uint32(c.size), Length: uint64(len(state)), Sum: sum}
	head := hdr.encode()
	var ownErr error
	if err := st.mkEpoch(e); err != nil {
		ownErr = storageErr(err, "checkpoint of epoch %d: cannot make %s", e, c.epochDir(e))
	} else {
		st.remove(e, commitName) // a replaced epoch is garbage until its new COMMIT
		if err := st.write(e, ownName(c.rank), head, state); err != nil {
			ownErr = storageErr(err, "checkpoint of epoch %d: cannot write %s", e, ownName(c.rank))
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
	hdr    fileHeader
	stored bool
	err    error
	ok     bool
}

// ckptBuddy is step 3 of Checkpoint: this rank's file goes to rank n+1
// (sent is whether this rank has one), rank n-1's is kept, and each side
// says whether it stored the copy.
func (c *Comm) ckptBuddy(ctx context.Context, st *ckptStore, e uint64, sent bool, head, state []byte) (buddyCopy, error) {
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
	if bud.ok, err = checkAck(a); err != nil {
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
func (c *Comm) ckptCommit(ctx context.Context, st *ckptStore, e uint64, sum [32]byte, ownErr error, bud buddyCopy) error {
	rec := make([]byte, commitRecLen)
	switch {
	case ownErr != nil:
		rec[0] = commitOwnFailed
	case bud.err != nil:
		rec[0] = commitBuddyFail
	case !bud.ok:
		rec[0] = commitNotKept
	}
	copy(rec[1:], sum[:])
	res, err := c.agree(ctx, wire.CollCkptCommit, rec, checkCommitRecord, func(recs [][]byte) []byte {
		sums := make([][32]byte, len(recs))
		for r, x := range recs {
			if x[0] != commitOK {
				why := [...]string{"", "could not write its file", "could not store its buddy copy", "its buddy could not store its copy"}[x[0]]
				return append([]byte{1}, fmt.Sprintf("rank %d %s", r, why)...)
			}
			copy(sums[r][:], x[1:])
		}
		if c.jobPriv == nil {
			return append([]byte{1}, "rank 0 has no job key to sign the COMMIT"...)
		}
		cm, err := encodeCommit(c.job.ID, e, sums, c.jobPriv)
		if err != nil {
			return append([]byte{1}, cutText("signing the COMMIT: "+err.Error(), maxReason)...)
		}
		return append([]byte{0}, cm...)
	})
	if err != nil {
		return err
	}
	ok, rest, verr := checkCommitVerdict(res, rec[0])
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
	if err := st.write(e, commitName, rest); err != nil {
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
	cm, err := decodeCommit(b, c.jobPub)
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

// cutText cuts s to at most n bytes on a rune boundary.
func cutText(s string, n int) string {
	for len(s) > n {
		_, k := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-k]
	}
	return s
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
func (c *Comm) removeEpochFiles(st *ckptStore, e uint64) {
	st.remove(e, ownName(c.rank))
	if c.size > 1 {
		st.remove(e, buddyName((c.rank+c.size-1)%c.size))
	}
	st.removeDir(e) // only if empty
}

// prune keeps only epochs e and e-1: an older epoch directory goes whole,
// with any temporary file a crash left in it (a COMMIT or a written-back
// file being stored when the process was killed). No rank needs an epoch
// before e-1 once a COMMIT of e is stored.
func (c *Comm) prune(st *ckptStore, e uint64) {
	for _, n := range st.epochs() {
		if n+1 < e {
			st.removeAll(n)
		}
	}
}

// Epoch returns the last committed or resumed epoch (0: none).
func (c *Comm) Epoch() uint64 { return c.ckpt.epoch }

// file status at resume, as one byte in the status table.
const (
	fileOK      = 0
	fileAbsent  = 1
	fileDamaged = 2
	fileHeader_ = 3
)

// verifyFile checks a checkpoint file (read from disk or fetched from a
// buddy) against the COMMIT's hash of rank and against the job: damaged
// when it is short, its magic or reserved bytes are wrong, or its state's
// length or SHA-256 is not its header's or not the COMMIT's; header when
// intact but its version, job, epoch, rank or size is not the COMMIT's.
func verifyFile(b []byte, cm *commit, rank int, job string) byte {
	h, err := decodeFileHeader(b)
	if err != nil {
		return fileDamaged
	}
	state := b[ckptHeaderLen:]
	sum := sha256.Sum256(state)
	if uint64(len(state)) != h.Length || sum != h.Sum || rank < 0 || rank >= len(cm.Sums) || sum != cm.Sums[rank] {
		return fileDamaged
	}
	if h.Version != ckptVersion || h.Job != job || h.Epoch != cm.Epoch || h.Rank != uint32(rank) || h.Size != cm.Size {
		return fileHeader_
	}
	return fileOK
}

// checkFile reads epoch's file name and checks it against the COMMIT's
// hash of rank.
func (c *Comm) checkFile(st *ckptStore, cm *commit, name string, rank int) (byte, []byte) {
	b, err := st.read(cm.Epoch, name)
	if err != nil {
		return fileAbsent, nil
	}
	if s := verifyFile(b, cm, rank, c.job.ID); s != fileOK {
		return s, nil
	}
	return fileOK, b
}

// newestCommit finds this rank's newest COMMIT that verifies; saw tells
// whether any COMMIT file exists at all.
func (c *Comm) newestCommit(st *ckptStore) (cm *commit, saw bool) {
	epochs := st.epochs()
	sort.Slice(epochs, func(i, j int) bool { return epochs[i] > epochs[j] })
	for _, e := range epochs {
		b, err := st.read(e, commitName)
		if err != nil {
			continue
		}
		saw = true
		x, err := decodeCommit(b, c.jobPub)
		if err == nil && x.Job == c.job.ID && x.Epoch == e {
			return x, true
		}
	}
	return nil, saw
}

// statusOutcome is the verdict of the resume status table on every rank:
// nil when every rank has a good copy of its state, else the code of the
// lowest rank without one.
func statusOutcome(table []byte, epoch uint64, size int) error {
	for r := 0; r < size; r++ {
		o := table[2*r]
		b := byte(fileAbsent)
		if size > 1 {
			b = table[2*((r+1)%size)+1] // rank r's copy is kept by r+1
		}
		if o == fileOK || b == fileOK {
			continue
		}
		switch {
		case o == fileAbsent && b == fileAbsent:
			return &codes.Error{Code: codes.NoEpoch, Rank: r, Msg: fmt.Sprintf("resume: epoch %d: rank %d's file and its buddy copy are both missing", epoch, r)}
		case o == fileHeader_ || b == fileHeader_:
			return &codes.Error{Code: codes.CheckpointHeader, Rank: r, Msg: fmt.Sprintf("resume: epoch %d: rank %d's file has a header that does not match the COMMIT or the job", epoch, r)}
		default:
			return &codes.Error{Code: codes.CheckpointDamaged, Rank: r, Msg: fmt.Sprintf("resume: epoch %d: rank %d's state is damaged and no buddy copy is good", epoch, r)}
		}
	}
	return nil
}

// restoreOutcome is the verdict of the restore round on every rank: the
// code of the lowest rank whose copy from its buddy was bad or could not
// be written back; a rank whose own write-back failed returns its own
// error when the code is H1625.
func restoreOutcome(table []byte, epoch uint64, rank int, ownErr error) error {
	for r, x := range table {
		switch x {
		case restoreDamaged:
			return &codes.Error{Code: codes.CheckpointDamaged, Rank: r, Msg: fmt.Sprintf("resume: epoch %d: rank %d's copy from its buddy is damaged", epoch, r)}
		case restoreHeader:
			return &codes.Error{Code: codes.CheckpointHeader, Rank: r, Msg: fmt.Sprintf("resume: epoch %d: rank %d's copy from its buddy has a header that does not match the COMMIT or the job", epoch, r)}
		case restoreStorage:
			if table[rank] == restoreStorage && ownErr != nil {
				return ownErr
			}
			return &codes.Error{Code: codes.CheckpointStorage, Rank: r, Msg: fmt.Sprintf("resume: epoch %d: rank %d could not write back its file", epoch, r)}
		}
	}
	return nil
}

// Resume returns the newest committed state of the job, or nil with ok
// false on a fresh start (no COMMIT anywhere). It is collective and its
// outcome is the same on every rank: every rank resumes the same epoch, or
// every rank returns the same code (H1619 … H1623, H1625,
// docs/errors.md). A damaged or missing file is taken from the buddy
// copy, verified like the own file and written back. A record or transfer
// of a peer that contradicts the protocol ends the job (H1627).
func (c *Comm) Resume(ctx context.Context) (state []byte, ok bool, err error) {
	if sp := traceBegin(); sp.on() {
		defer func() { sp.call("resume", err, targ("bytes", len(state)), targ("epoch", int(c.ckpt.epoch))) }()
	}
	if err := c.subRefusal("resume"); err != nil {
		return nil, false, err
	}
	c.ckptMu.Lock()
	defer c.ckptMu.Unlock()
	st, stErr := c.store()
	defer st.close()
	var mine *commit
	var my offer
	if stErr != nil {
		my.Flags = offerStorage
	} else {
		var saw bool
		mine, saw = c.newestCommit(st)
		if mine != nil {
			my.Epoch = mine.Epoch
		}
		if saw {
			my.Flags = offerSawCommit
		}
	}
	// 1. Every rank offers its newest verified epoch; the newest wins.
	out, err := c.agree(ctx, wire.CollResumeOffer, my.record(), func(b []byte) error {
		_, err := decodeOfferRecord(b)
		return err
	}, func(recs [][]byte) []byte {
		offers := make([]offer, len(recs))
		for r, x := range recs {
			offers[r], _ = decodeOfferRecord(x)
		}
		return decideOffer(offers).verdict()
	})
	if err != nil {
		return nil, false, err
	}
	v, verr := decodeOfferVerdict(out, c.size, c.rank, my)
	if verr != nil {
		return nil, false, c.violation(0, "resume: the verdict of rank 0 on the epoch: %v", verr)
	}
	if v.Flags&offerStorage != 0 {
		if stErr != nil {
			return nil, false, stErr
		}
		return nil, false, &codes.Error{Code: codes.CheckpointStorage, Rank: int(v.Bad), Msg: fmt.Sprintf("resume: rank %d cannot use its checkpoint directory", v.Bad)}
	}
	epoch, src := v.Epoch, int(v.Src)
	if epoch == 0 {
		if v.Flags&offerSawCommit != 0 {
			return nil, false, &codes.Error{Code: codes.CommitSignature, Rank: -1, Msg: "resume: COMMIT files exist but none verifies with the job key"}
		}
		return nil, false, nil
	}
	// 2. The rank that has it hands the COMMIT to all.
	cm, err := c.resumeCommit(ctx, mine, epoch, src)
	if err != nil {
		return nil, false, err
	}
	// 3. Every rank checks its file and the buddy copy it keeps; the table
	// of all goes to everyone, so every rank reaches the same verdict.
	prev := (c.rank + c.size - 1) % c.size
	ownSt, own := c.checkFile(st, cm, ownName(c.rank), c.rank)
	budSt, bud := byte(fileAbsent), []byte(nil)
	if c.size > 1 {
		budSt, bud = c.checkFile(st, cm, buddyName(prev), prev)
	}
	mineSt := []byte{ownSt, budSt}
	table, err := c.agree(ctx, wire.CollResumeStatus, mineSt, checkStatusRecord, concat)
	if err != nil {
		return nil, false, err
	}
	if verr := checkStatusVerdict(table, c.size, c.rank, mineSt); verr != nil {
		return nil, false, c.violation(0, "resume: the verdict of rank 0 on the files: %v", verr)
	}
	if err := statusOutcome(table, epoch, c.size); err != nil {
		return nil, false, err
	}
	// 4. Own files that are not good come back from the buddy (restore).
	if own, err = c.restore(ctx, st, cm, table, ownSt, own, bud); err != nil {
		return nil, false, err
	}
	c.ckpt.epoch = epoch
	return own[ckptHeaderLen:], true, nil
}

// resumeCommit is step 2 of Resume: the rank src, which offered the
// newest epoch, hands its COMMIT (mine there) to all, and every rank checks
// it.
func (c *Comm) resumeCommit(ctx context.Context, mine *commit, epoch uint64, src int) (*commit, error) {
	var raw []byte
	if c.rank == src {
		raw = mine.raw
	}
	raw, err := c.collective(ctx, wire.Call{Kind: wire.CollResumeCommit, Root: uint32(src)}, "", nil, func([][]byte) ([]byte, [][]byte, error) {
		out := make([][]byte, c.size)
		for i := range out {
			out[i] = raw
		}
		return raw, out, nil
	})
	if err != nil {
		return nil, err
	}
	// The source verified it before it offered it: one that does not
	// verify, or is of another epoch or job, is the source's lie.
	cm, derr := decodeCommit(raw, c.jobPub)
	if derr == nil && (cm.Epoch != epoch || cm.Job != c.job.ID) {
		derr = fmt.Errorf("it names job %q epoch %d", cm.Job, cm.Epoch)
	}
	if derr != nil {
		return nil, c.violation(src, "resume: the COMMIT of epoch %d from rank %d: %v", epoch, src, derr)
	}
	if int(cm.Size) != c.size {
		return nil, &codes.Error{Code: codes.ResumeSize, Rank: -1, Msg: fmt.Sprintf("resume: epoch %d was written by a job of %d ranks, this job has %d", epoch, cm.Size, c.size)}
	}
	return cm, nil
}

// restore is step 4 of Resume: own files that are not good (table, the
// files' statuses of every rank) come back from the buddy, are checked
// like the own file and written back; then every rank says how that went,
// so that a bad copy or a failed write-back is one outcome for all (the
// round is skipped when every own file was good). It returns this rank's
// file, restored or as it was (own).
func (c *Comm) restore(ctx context.Context, st *ckptStore, cm *commit, table []byte, ownSt byte, own, bud []byte) ([]byte, error) {
	epoch := cm.Epoch
	prev, next := (c.rank+c.size-1)%c.size, (c.rank+1)%c.size
	var err error
	fetching := false
	for r := 0; r < c.size; r++ {
		fetching = fetching || table[2*r] != fileOK
	}
	if fetching {
		var frames []*mesh.Frame
		if table[2*prev] != fileOK {
			frames, err = c.sendFile(prev, tagFetch, true, bud)
			if err != nil {
				return nil, err
			}
		}
		restore := byte(restoreOK)
		var restoreErr error
		if ownSt != fileOK {
			got, err := c.recvFetch(ctx, next, fmt.Sprintf("resume: epoch %d: the copy of rank %d's file from rank %d", epoch, c.rank, next))
			if err != nil {
				return nil, err
			}
			switch verifyFile(got, cm, c.rank, c.job.ID) {
			case fileOK:
				if err := st.write(epoch, ownName(c.rank), got); err != nil {
					restore, restoreErr = restoreStorage, storageErr(err, "resume: epoch %d: cannot write back %s", epoch, ownName(c.rank))
				} else {
					own = got
				}
			case fileHeader_:
				restore = restoreHeader
			default:
				restore = restoreDamaged
			}
		}
		if err := waitFrames(ctx, c, prev, frames); err != nil {
			return nil, err
		}
		tab, err := c.agree(ctx, wire.CollResumeRestore, []byte{restore}, checkRestoreRecord, concat)
		if err != nil {
			return nil, err
		}
		if verr := checkRestoreVerdict(tab, c.size, c.rank, restore); verr != nil {
			return nil, c.violation(0, "resume: the verdict of rank 0 on the restored files: %v", verr)
		}
		if err := restoreOutcome(tab, epoch, c.rank, restoreErr); err != nil {
			return nil, err
		}
	}
	return own, nil
}

// ResumeValue is Resume into v's UnmarshalBinary; ok is false on a fresh
// start (v unchanged).
func (c *Comm) ResumeValue(ctx context.Context, v encoding.BinaryUnmarshaler) (ok bool, err error) {
	b, ok, err := c.Resume(ctx)
	if err != nil || !ok {
		return ok, err
	}
	if err := v.UnmarshalBinary(b); err != nil {
		return false, fmt.Errorf("resume: %T.UnmarshalBinary: %w", v, err)
	}
	return true, nil
}
