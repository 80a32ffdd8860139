package runtime

import (
	"context"
	"encoding"
	"fmt"
	"sort"
	"sperli/ckpt"
	"sperli/codes"
	"sperli/runtime/mesh"
	"sperli/wire"
)

// Resume (SPEC §9.4): the rounds that bring every rank back to the same
// committed epoch, over the formats and checks of package ckpt.

// checkFile reads epoch's file name and checks it against the COMMIT's
// hash of rank.
func (c *Comm) checkFile(st *ckpt.Store, cm *ckpt.Commit, name string, rank int) (byte, []byte) {
	b, err := st.Read(cm.Epoch, name)
	if err != nil {
		return ckpt.FileAbsent, nil
	}
	if s := ckpt.VerifyFile(b, cm, rank, c.job.ID); s != ckpt.FileOK {
		return s, nil
	}
	return ckpt.FileOK, b
}

// newestCommit finds this rank's newest COMMIT that verifies; saw tells
// whether any COMMIT file exists at all.
func (c *Comm) newestCommit(st *ckpt.Store) (cm *ckpt.Commit, saw bool) {
	epochs := st.Epochs()
	sort.Slice(epochs, func(i, j int) bool { return epochs[i] > epochs[j] })
	for _, e := range epochs {
		b, err := st.Read(e, ckpt.CommitName)
		if err != nil {
			continue
		}
		saw = true
		x, err := ckpt.DecodeCommit(b, c.jobPub)
		if err == nil && x.Job == c.job.ID && x.Epoch == e {
			return x, true
		}
	}
	return nil, saw
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
	defer st.Close()
	mine, v, err := c.resumeOffer(ctx, st, stErr)
	if err != nil {
		return nil, false, err
	}
	epoch, src := v.Epoch, int(v.Src)
	if epoch == 0 {
		if v.Flags&ckpt.OfferSawCommit != 0 {
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
	ownSt, own, bud, table, err := c.resumeStatus(ctx, st, cm, epoch)
	if err != nil {
		return nil, false, err
	}
	// 4. Own files that are not good come back from the buddy (restore).
	if own, err = c.restore(ctx, st, cm, table, ownSt, own, bud); err != nil {
		return nil, false, err
	}
	c.ckpt.epoch = epoch
	return own[ckpt.HeaderLen:], true, nil
}

// resumeOffer is step 1 of Resume: every rank offers its newest verified
// epoch (or says it saw a COMMIT, or that its directory cannot be used);
// the newest wins. It returns this rank's newest COMMIT and the verdict.
func (c *Comm) resumeOffer(ctx context.Context, st *ckpt.Store, stErr error) (*ckpt.Commit, ckpt.Offer, error) {
	var mine *ckpt.Commit
	var my ckpt.Offer
	if stErr != nil {
		my.Flags = ckpt.OfferStorage
	} else {
		var saw bool
		mine, saw = c.newestCommit(st)
		if mine != nil {
			my.Epoch = mine.Epoch
		}
		if saw {
			my.Flags = ckpt.OfferSawCommit
		}
	}
	out, err := c.agree(ctx, wire.CollResumeOffer, my.Record(), func(b []byte) error {
		_, err := ckpt.DecodeOfferRecord(b)
		return err
	}, func(recs [][]byte) []byte {
		offers := make([]ckpt.Offer, len(recs))
		for r, x := range recs {
			offers[r], _ = ckpt.DecodeOfferRecord(x)
		}
		return ckpt.DecideOffer(offers).Verdict()
	})
	if err != nil {
		return nil, ckpt.Offer{}, err
	}
	v, verr := ckpt.DecodeOfferVerdict(out, c.size, c.rank, my)
	if verr != nil {
		return nil, ckpt.Offer{}, c.violation(0, "resume: the verdict of rank 0 on the epoch: %v", verr)
	}
	if v.Flags&ckpt.OfferStorage != 0 {
		if stErr != nil {
			return nil, ckpt.Offer{}, stErr
		}
		return nil, ckpt.Offer{}, &codes.Error{Code: codes.CheckpointStorage, Rank: int(v.Bad), Msg: fmt.Sprintf("resume: rank %d cannot use its checkpoint directory", v.Bad)}
	}
	return mine, v, nil
}

// resumeStatus is step 3 of Resume: every rank checks its file and the
// buddy copy it keeps; the table of all goes to everyone, so every rank
// reaches the same verdict. It returns this rank's own file's status, its
// good own file and buddy copy (nil when not good), and the table.
func (c *Comm) resumeStatus(ctx context.Context, st *ckpt.Store, cm *ckpt.Commit, epoch uint64) (ownSt byte, own, bud, table []byte, err error) {
	prev := (c.rank + c.size - 1) % c.size
	ownSt, own = c.checkFile(st, cm, ckpt.OwnName(c.rank), c.rank)
	budSt := byte(ckpt.FileAbsent)
	if c.size > 1 {
		budSt, bud = c.checkFile(st, cm, ckpt.BuddyName(prev), prev)
	}
	mineSt := []byte{ownSt, budSt}
	table, err = c.agree(ctx, wire.CollResumeStatus, mineSt, ckpt.CheckStatusRecord, concat)
	if err != nil {
		return 0, nil, nil, nil, err
	}
	if verr := ckpt.CheckStatusVerdict(table, c.size, c.rank, mineSt); verr != nil {
		return 0, nil, nil, nil, c.violation(0, "resume: the verdict of rank 0 on the files: %v", verr)
	}
	if err := ckpt.StatusOutcome(table, epoch, c.size); err != nil {
		return 0, nil, nil, nil, err
	}
	return ownSt, own, bud, table, nil
}

// resumeCommit is step 2 of Resume: the rank src, which offered the
// newest epoch, hands its COMMIT (mine there) to all, and every rank checks
// it.
func (c *Comm) resumeCommit(ctx context.Context, mine *ckpt.Commit, epoch uint64, src int) (*ckpt.Commit, error) {
	var raw []byte
	if c.rank == src {
		raw = mine.Raw
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
	cm, derr := ckpt.DecodeCommit(raw, c.jobPub)
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
func (c *Comm) restore(ctx context.Context, st *ckpt.Store, cm *ckpt.Commit, table []byte, ownSt byte, own, bud []byte) ([]byte, error) {
	epoch := cm.Epoch
	prev, next := (c.rank+c.size-1)%c.size, (c.rank+1)%c.size
	var err error
	fetching := false
	for r := 0; r < c.size; r++ {
		fetching = fetching || table[2*r] != ckpt.FileOK
	}
	if fetching {
		var frames []*mesh.Frame
		if table[2*prev] != ckpt.FileOK {
			frames, err = c.sendFile(prev, tagFetch, true, bud)
			if err != nil {
				return nil, err
			}
		}
		restore := byte(ckpt.RestoreOK)
		var restoreErr error
		if ownSt != ckpt.FileOK {
			got, err := c.recvFetch(ctx, next, fmt.Sprintf("resume: epoch %d: the copy of rank %d's file from rank %d", epoch, c.rank, next))
			if err != nil {
				return nil, err
			}
			switch ckpt.VerifyFile(got, cm, c.rank, c.job.ID) {
			case ckpt.FileOK:
				if err := st.Write(epoch, ckpt.OwnName(c.rank), got); err != nil {
					restore, restoreErr = ckpt.RestoreStorage, storageErr(err, "resume: epoch %d: cannot write back %s", epoch, ckpt.OwnName(c.rank))
				} else {
					own = got
				}
			case ckpt.FileBadHeader:
				restore = ckpt.RestoreHeader
			default:
				restore = ckpt.RestoreDamaged
			}
		}
		if err := waitFrames(ctx, c, prev, frames); err != nil {
			return nil, err
		}
		tab, err := c.agree(ctx, wire.CollResumeRestore, []byte{restore}, ckpt.CheckRestoreRecord, concat)
		if err != nil {
			return nil, err
		}
		if verr := ckpt.CheckRestoreVerdict(tab, c.size, c.rank, restore); verr != nil {
			return nil, c.violation(0, "resume: the verdict of rank 0 on the restored files: %v", verr)
		}
		if err := ckpt.RestoreOutcome(tab, epoch, c.rank, restoreErr); err != nil {
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
