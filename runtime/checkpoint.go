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

	"sperli/codes"
	"sperli/pki"
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

// Internal collective kinds of checkpoint and resume; they take part in the
// job's sequence of calls like any collective, so a rank that checkpoints
// while another calls a collective is a mismatch (H1613).
const (
	kindCkptBegin    Kind = 64
	kindCkptCommit   Kind = 65
	kindResumeOffer  Kind = 66
	kindResumeCommit Kind = 67
	kindResumeStatus Kind = 68
)

func init() {
	kindNames[kindCkptBegin] = "checkpoint"
	kindNames[kindCkptCommit] = "checkpoint (commit)"
	kindNames[kindResumeOffer] = "resume"
	kindNames[kindResumeCommit] = "resume (commit)"
	kindNames[kindResumeStatus] = "resume (files)"
}

type ckptState struct {
	root  string // <dir>/<job>
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

// UseCheckpoints names the checkpoint directory, relative to the working
// directory; "" takes the job's (the launcher's --checkpoint-dir). Files go
// to DIR/<job>/<epoch>/. It is local to this rank and makes the directory.
func (c *Comm) UseCheckpoints(dir string) error {
	if dir == "" {
		dir = c.job.CheckpointDir
	}
	if dir == "" {
		return &codes.Error{Code: codes.CheckpointStorage, Rank: -1, Msg: "use_checkpoints: no directory given and the job has none (--checkpoint-dir)"}
	}
	root := filepath.Join(dir, c.job.ID)
	if err := os.MkdirAll(root, 0o700); err != nil {
		return storageErr(err, "use_checkpoints: cannot make %s", root)
	}
	c.ckpt.root = root
	c.ckpt.used = true
	return nil
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
	if len(b) < 56+pki.SignatureSize || string(b[:4]) != commitMagic {
		return nil, errors.New("not a COMMIT")
	}
	if b[4] != ckptVersion {
		return nil, fmt.Errorf("COMMIT version %d, want %d", b[4], ckptVersion)
	}
	size := binary.BigEndian.Uint32(b[48:])
	body := 56 + 32*int(size)
	if size == 0 || size > MaxSize || len(b) != body+pki.SignatureSize {
		return nil, fmt.Errorf("COMMIT of %d bytes does not hold %d hashes and a signature", len(b), size)
	}
	if !pub.Verify(pki.DomainCommit, b[:body], b[body:]) {
		return nil, errors.New("COMMIT signature does not verify")
	}
	c := &commit{Job: string(b[8:40]), Epoch: binary.BigEndian.Uint64(b[40:]), Size: size, raw: b}
	for i := 0; i < int(size); i++ {
		var s [32]byte
		copy(s[:], b[56+32*i:])
		c.Sums = append(c.Sums, s)
	}
	return c, nil
}

func (c *Comm) epochDir(e uint64) string {
	return filepath.Join(c.ckpt.root, strconv.FormatUint(e, 10))
}

func ownName(rank int) string   { return fmt.Sprintf("rank-%d.ckpt", rank) }
func buddyName(rank int) string { return fmt.Sprintf("rank-%d.ckpt.buddy", rank) }

// writeDurable writes b to dir/name through a temporary name, syncs it,
// renames it and syncs the directory; on any failure it leaves no file.
func writeDurable(dir, name string, b []byte, tmpSuffix string) error {
	tmp := filepath.Join(dir, name+".tmp"+tmpSuffix)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// agree runs one internal collective: every rank gives rec (all the same
// length), rank 0 computes out = decide(all records by rank), every rank
// returns out.
func (c *Comm) agree(ctx context.Context, kind Kind, rec []byte, decide func([][]byte) ([]byte, error)) ([]byte, error) {
	mine := wire.Call{Kind: uint8(kind), Length: uint32(len(rec))}
	return c.collective(ctx, mine, "", rec, func(all [][]byte) ([]byte, [][]byte, error) {
		if err := sameLengths(kind.String(), all); err != nil {
			return nil, nil, err
		}
		out, err := decide(all)
		if err != nil {
			return nil, nil, err
		}
		res := make([][]byte, len(all))
		for i := range res {
			res[i] = out
		}
		return out, res, nil
	})
}

// sysSend starts an internal message; sysRecv waits for one.
func (c *Comm) sysSend(dest int, tag uint32, data []byte) (*outFrame, error) {
	f := &outFrame{h: wire.Header{Type: wire.Checkpoint, Tag: tag, Length: uint32(len(data))}, payload: data, counted: true, done: make(chan struct{})}
	return f, c.peers[dest].enqueue(f)
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
		c.consumedLocked(c.peers[src], r.cost)
		c.mu.Unlock()
		return r.data, nil
	}
	c.mu.Unlock()
	if p := c.peers[src]; p != nil {
		p.readFor(ctx, r.done)
	}
	select {
	case <-r.done:
		return r.data, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// sendBlob sends b to dest as a length and chunks of at most 16 MiB,
// without waiting; the frames are returned so the caller can wait for them.
// A nil b sends the failure marker (no file).
func (c *Comm) sendBlob(dest int, tag uint32, b []byte, ok bool) ([]*outFrame, error) {
	n := uint64(len(b))
	if !ok {
		n = ^uint64(0)
	}
	f, err := c.sysSend(dest, tag, binary.BigEndian.AppendUint64(nil, n))
	if err != nil {
		return nil, err
	}
	frames := []*outFrame{f}
	for ok && len(b) > 0 {
		k := min(len(b), wire.MaxPayload)
		f, err := c.sysSend(dest, tag, b[:k])
		if err != nil {
			return nil, err
		}
		frames = append(frames, f)
		b = b[k:]
	}
	return frames, nil
}

// recvBlob receives what sendBlob sent; ok is false for the failure marker.
func (c *Comm) recvBlob(ctx context.Context, src int, tag uint32) (b []byte, ok bool, err error) {
	head, err := c.sysRecv(ctx, src, tag)
	if err != nil {
		return nil, false, err
	}
	if len(head) != 8 {
		return nil, false, c.mismatch("checkpoint transfer from rank %d: bad length record", src)
	}
	n := binary.BigEndian.Uint64(head)
	if n == ^uint64(0) {
		return nil, false, nil
	}
	if n > 1<<40 {
		return nil, false, c.mismatch("checkpoint transfer from rank %d announces %d bytes", src, n)
	}
	b = make([]byte, 0, n)
	for uint64(len(b)) < n {
		chunk, err := c.sysRecv(ctx, src, tag)
		if err != nil {
			return nil, false, err
		}
		b = append(b, chunk...)
	}
	if uint64(len(b)) != n {
		return nil, false, c.mismatch("checkpoint transfer from rank %d: %d bytes, announced %d", src, len(b), n)
	}
	return b, true, nil
}

func waitFrames(ctx context.Context, c *Comm, frames []*outFrame) error {
	for _, f := range frames {
		select {
		case <-f.done:
			if f.err != nil {
				return f.err
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
// H1624 on every rank; a file that cannot be written is H1625 on every rank,
// and the previous epoch is left as it was. state is not changed.
func (c *Comm) Checkpoint(ctx context.Context, state []byte) error {
	c.ckptMu.Lock()
	defer c.ckptMu.Unlock()
	if !c.ckpt.used {
		if err := c.UseCheckpoints(""); err != nil {
			return err
		}
	}
	c.mu.Lock()
	err := c.callableLocked("checkpoint")
	open := len(c.open)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	e := c.ckpt.epoch + 1
	c.failurePoint("before-ckpt", c.ckpt.count+1)

	// 1. Every rank says whether it can take part; one open operation
	// anywhere is H1624 everywhere.
	flag := []byte{0}
	if open > 0 {
		flag[0] = 1
	}
	all, err := c.agree(ctx, kindCkptBegin, flag, func(recs [][]byte) ([]byte, error) {
		out := make([]byte, 0, len(recs))
		for _, r := range recs {
			out = append(out, r[0])
		}
		return out, nil
	})
	if err != nil {
		return err
	}
	var busy []string
	for r, f := range all {
		if f != 0 {
			busy = append(busy, strconv.Itoa(r))
		}
	}
	if len(busy) > 0 {
		return &codes.Error{Code: codes.CheckpointOpen, Rank: -1, Msg: fmt.Sprintf("checkpoint of epoch %d: rank %s still has an open send or receive", e, strings.Join(busy, ", "))}
	}

	// 2. This rank's file.
	dir := c.epochDir(e)
	sum := sha256.Sum256(state)
	hdr := fileHeader{Version: ckptVersion, Job: c.job.ID, Epoch: e, Rank: uint32(c.rank), Size: uint32(c.size), Length: uint64(len(state)), Sum: sum}
	file := append(hdr.encode(), state...)
	var ownErr error
	if err := os.MkdirAll(dir, 0o700); err != nil {
		ownErr = storageErr(err, "checkpoint of epoch %d: cannot make %s", e, dir)
	} else {
		os.Remove(filepath.Join(dir, commitName)) // a replaced epoch is garbage until its new COMMIT
		if err := writeDurable(dir, ownName(c.rank), file, ""); err != nil {
			ownErr = storageErr(err, "checkpoint of epoch %d: cannot write %s", e, ownName(c.rank))
		}
	}
	c.failurePoint("mid-ckpt", c.ckpt.count+1)

	// 3. The buddy copy: send ours to rank n+1, keep rank n-1's.
	buddyOK := true
	var buddyErr error
	if c.size > 1 {
		next, prev := (c.rank+1)%c.size, (c.rank+c.size-1)%c.size
		frames, err := c.sendBlob(next, tagFile, file, ownErr == nil)
		if err != nil {
			return err
		}
		got, ok, err := c.recvBlob(ctx, prev, tagFile)
		if err != nil {
			return err
		}
		stored := byte(0)
		if ok {
			if err := writeDurable(dir, buddyName(prev), got, ""); err != nil {
				buddyErr = storageErr(err, "checkpoint of epoch %d: cannot write %s", e, buddyName(prev))
			} else {
				stored = 1
			}
		}
		ack, err := c.sysSend(prev, tagFileAck, []byte{stored})
		if err != nil {
			return err
		}
		a, err := c.sysRecv(ctx, next, tagFileAck)
		if err != nil {
			return err
		}
		buddyOK = len(a) == 1 && a[0] == 1
		if err := waitFrames(ctx, c, append(frames, ack)); err != nil {
			return err
		}
	}

	// 4. Rank 0 gathers the hashes, signs the COMMIT and hands it to all.
	rec := make([]byte, 33)
	switch {
	case ownErr != nil:
		rec[0] = 1
	case buddyErr != nil:
		rec[0] = 2
	case !buddyOK:
		rec[0] = 3
	}
	copy(rec[1:], sum[:])
	res, err := c.agree(ctx, kindCkptCommit, rec, func(recs [][]byte) ([]byte, error) {
		sums := make([][32]byte, len(recs))
		for r, x := range recs {
			if x[0] != 0 {
				why := [...]string{"", "could not write its file", "could not store its buddy copy", "its buddy could not store its copy"}[x[0]&3]
				return append([]byte{1}, fmt.Sprintf("rank %d %s", r, why)...), nil
			}
			copy(sums[r][:], x[1:])
		}
		if c.jobPriv == nil {
			return append([]byte{1}, "rank 0 has no job key to sign the COMMIT"...), nil
		}
		cm, err := encodeCommit(c.job.ID, e, sums, c.jobPriv)
		if err != nil {
			return append([]byte{1}, ("signing the COMMIT: " + err.Error())...), nil
		}
		return append([]byte{0}, cm...), nil
	})
	if err != nil {
		return err
	}
	if len(res) == 0 || res[0] != 0 {
		c.removeEpochFiles(e)
		for _, own := range []error{ownErr, buddyErr} {
			if own != nil {
				return own
			}
		}
		return &codes.Error{Code: codes.CheckpointStorage, Rank: -1, Msg: fmt.Sprintf("checkpoint of epoch %d failed: %s", e, res[1:])}
	}
	if err := writeDurable(dir, commitName, res[1:], "."+strconv.Itoa(c.rank)); err != nil {
		return storageErr(err, "checkpoint of epoch %d: cannot store the COMMIT", e)
	}
	c.ckpt.epoch = e
	c.ckpt.count++
	c.prune(e)
	c.failurePoint("after-ckpt", c.ckpt.count)
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

// removeEpochFiles removes this rank's files of a failed epoch.
func (c *Comm) removeEpochFiles(e uint64) {
	dir := c.epochDir(e)
	os.Remove(filepath.Join(dir, ownName(c.rank)))
	if c.size > 1 {
		os.Remove(filepath.Join(dir, buddyName((c.rank+c.size-1)%c.size)))
	}
	os.Remove(dir) // only if empty
}

// prune keeps only epochs e and e-1: an older epoch directory goes whole,
// with any temporary file a crash left in it (a COMMIT or a written-back
// file being stored when the process was killed). No rank needs an epoch
// before e-1 once a COMMIT of e is stored.
func (c *Comm) prune(e uint64) {
	entries, err := os.ReadDir(c.ckpt.root)
	if err != nil {
		return
	}
	for _, d := range entries {
		n, err := strconv.ParseUint(d.Name(), 10, 64)
		if err != nil || !d.IsDir() || n+1 >= e {
			continue
		}
		os.RemoveAll(c.epochDir(n))
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

// checkFile reads dir/name and checks it against the COMMIT's hash of rank.
func (c *Comm) checkFile(path string, cm *commit, rank int) (byte, []byte) {
	b, err := os.ReadFile(path)
	if err != nil {
		return fileAbsent, nil
	}
	h, err := decodeFileHeader(b)
	if err != nil {
		return fileDamaged, nil
	}
	state := b[ckptHeaderLen:]
	sum := sha256.Sum256(state)
	if uint64(len(state)) != h.Length || sum != h.Sum || sum != cm.Sums[rank] {
		return fileDamaged, nil
	}
	if h.Version != ckptVersion || h.Job != c.job.ID || h.Epoch != cm.Epoch || h.Rank != uint32(rank) || h.Size != uint32(c.size) {
		return fileHeader_, nil
	}
	return fileOK, b
}

// newestCommit finds this rank's newest COMMIT that verifies; saw tells
// whether any COMMIT file exists at all.
func (c *Comm) newestCommit() (cm *commit, saw bool) {
	entries, _ := os.ReadDir(c.ckpt.root)
	var epochs []uint64
	for _, d := range entries {
		if n, err := strconv.ParseUint(d.Name(), 10, 64); err == nil && d.IsDir() && n > 0 {
			epochs = append(epochs, n)
		}
	}
	sort.Slice(epochs, func(i, j int) bool { return epochs[i] > epochs[j] })
	for _, e := range epochs {
		b, err := os.ReadFile(filepath.Join(c.epochDir(e), commitName))
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

// Resume returns the newest committed state of the job, or nil with ok
// false on a fresh start (no COMMIT anywhere). It is collective and its
// outcome is the same on every rank: every rank resumes the same epoch, or
// every rank returns the same code (H1619 … H1623, docs/errors.md). A
// damaged or missing file is taken from the buddy copy and written back.
func (c *Comm) Resume(ctx context.Context) (state []byte, ok bool, err error) {
	c.ckptMu.Lock()
	defer c.ckptMu.Unlock()
	if !c.ckpt.used {
		if err := c.UseCheckpoints(""); err != nil {
			return nil, false, err
		}
	}
	mine, saw := c.newestCommit()
	rec := make([]byte, 9)
	if mine != nil {
		binary.BigEndian.PutUint64(rec, mine.Epoch)
	}
	if saw {
		rec[8] = 1
	}
	// 1. Every rank offers its newest verified epoch; the newest wins.
	offer, err := c.agree(ctx, kindResumeOffer, rec, func(recs [][]byte) ([]byte, error) {
		var best uint64
		src, anySaw := uint32(0), byte(0)
		for r, x := range recs {
			if e := binary.BigEndian.Uint64(x); e > best {
				best, src = e, uint32(r)
			}
			anySaw |= x[8]
		}
		out := binary.BigEndian.AppendUint64(nil, best)
		out = binary.BigEndian.AppendUint32(out, src)
		return append(out, anySaw), nil
	})
	if err != nil {
		return nil, false, err
	}
	epoch, src := binary.BigEndian.Uint64(offer), int(binary.BigEndian.Uint32(offer[8:]))
	if epoch == 0 {
		if offer[12] != 0 {
			return nil, false, &codes.Error{Code: codes.CommitSignature, Rank: -1, Msg: "resume: COMMIT files exist but none verifies with the job key"}
		}
		return nil, false, nil
	}
	// 2. The rank that has it hands the COMMIT to all.
	var raw []byte
	if c.rank == src {
		raw = mine.raw
	}
	raw, err = c.collective(ctx, wire.Call{Kind: uint8(kindResumeCommit), Root: uint32(src)}, "", nil, func([][]byte) ([]byte, [][]byte, error) {
		out := make([][]byte, c.size)
		for i := range out {
			out[i] = raw
		}
		return raw, out, nil
	})
	if err != nil {
		return nil, false, err
	}
	cm, derr := decodeCommit(raw, c.jobPub)
	if derr != nil {
		return nil, false, &codes.Error{Code: codes.CommitSignature, Rank: -1, Msg: fmt.Sprintf("resume: the COMMIT of epoch %d from rank %d: %v", epoch, src, derr)}
	}
	if int(cm.Size) != c.size {
		return nil, false, &codes.Error{Code: codes.ResumeSize, Rank: -1, Msg: fmt.Sprintf("resume: epoch %d was written by a job of %d ranks, this job has %d", epoch, cm.Size, c.size)}
	}
	if cm.Job != c.job.ID {
		return nil, false, &codes.Error{Code: codes.CheckpointHeader, Rank: -1, Msg: fmt.Sprintf("resume: the COMMIT of epoch %d names job %s", epoch, cm.Job)}
	}
	// 3. Every rank checks its file and the buddy copy it keeps; the table
	// of all goes to everyone, so every rank reaches the same verdict.
	dir := c.epochDir(epoch)
	prev := (c.rank + c.size - 1) % c.size
	ownSt, own := c.checkFile(filepath.Join(dir, ownName(c.rank)), cm, c.rank)
	budSt, bud := byte(fileAbsent), []byte(nil)
	if c.size > 1 {
		budSt, bud = c.checkFile(filepath.Join(dir, buddyName(prev)), cm, prev)
	}
	table, err := c.agree(ctx, kindResumeStatus, []byte{ownSt, budSt}, func(recs [][]byte) ([]byte, error) {
		out := make([]byte, 0, 2*len(recs))
		for _, x := range recs {
			out = append(out, x...)
		}
		return out, nil
	})
	if err != nil {
		return nil, false, err
	}
	for r := 0; r < c.size; r++ {
		o := table[2*r]
		b := byte(fileAbsent)
		if c.size > 1 {
			b = table[2*((r+1)%c.size)+1] // rank r's copy is kept by r+1
		}
		if o == fileOK || b == fileOK {
			continue
		}
		switch {
		case o == fileAbsent && b == fileAbsent:
			return nil, false, &codes.Error{Code: codes.NoEpoch, Rank: r, Msg: fmt.Sprintf("resume: epoch %d: rank %d's file and its buddy copy are both missing", epoch, r)}
		case o == fileHeader_ || b == fileHeader_:
			return nil, false, &codes.Error{Code: codes.CheckpointHeader, Rank: r, Msg: fmt.Sprintf("resume: epoch %d: rank %d's file has a header that does not match the COMMIT or the job", epoch, r)}
		default:
			return nil, false, &codes.Error{Code: codes.CheckpointDamaged, Rank: r, Msg: fmt.Sprintf("resume: epoch %d: rank %d's state is damaged and no buddy copy is good", epoch, r)}
		}
	}
	// 4. Missing own files come back from the buddy.
	if c.size > 1 {
		next := (c.rank + 1) % c.size
		var frames []*outFrame
		if table[2*prev] != fileOK {
			frames, err = c.sendBlob(prev, tagFetch, bud, true)
			if err != nil {
				return nil, false, err
			}
		}
		if ownSt != fileOK {
			got, _, err := c.recvBlob(ctx, next, tagFetch)
			if err != nil {
				return nil, false, err
			}
			own = got
			if err := writeDurable(dir, ownName(c.rank), own, ""); err != nil {
				return nil, false, storageErr(err, "resume: cannot write back %s", ownName(c.rank))
			}
		}
		if err := waitFrames(ctx, c, frames); err != nil {
			return nil, false, err
		}
	}
	c.ckpt.epoch = epoch
	return own[ckptHeaderLen:], true, nil
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

var _ = bytes.Equal
