package runtime_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sperli/codes"
	"sperli/runtime"
)

// Checkpoint and resume against a hostile joined peer: the hostile rank
// takes part in the rounds of docs/protocol.md §11.3 with frames laid out
// by hand, and lies in one record or transfer. The honest ranks must end
// with H1627 (or H1612 caused by it), never panic, allocate what the peer
// claims, or use data they cannot verify.

// Internal collective kinds of §11.3 and checkpoint-frame tags.
const (
	ckKindBegin        = 64
	ckKindCommit       = 65
	ckKindOffer        = 66
	ckKindResumeCommit = 67
	ckKindStatus       = 68
	ckKindRestore      = 69

	ckTagFile  = 1
	ckTagAck   = 2
	ckTagFetch = 3
)

// call lays out a call descriptor (§3.5): kind, type 0, op 0, reserved,
// u32 root, u32 length.
func ckCall(kind byte, root, length uint32) []byte {
	b := []byte{kind, 0, 0, 0}
	b = binary.BigEndian.AppendUint32(b, root)
	return binary.BigEndian.AppendUint32(b, length)
}

// contribution is a non-root's collective frame of call seq (§8.2).
func ckContrib(seq uint64, kind byte, root uint32, data []byte) rawFrame {
	return rawFrame{Type: tCollective, Seq: seq, Payload: append(ckCall(kind, root, uint32(len(data))), data...)}
}

// result is the root's ack frame of call seq.
func ckResult(seq uint64, kind byte, root uint32, data []byte) rawFrame {
	return rawFrame{Type: tCollective, Flags: fAck, Seq: seq, Payload: append(ckCall(kind, root, 0), data...)}
}

// ckptFrame is a checkpoint frame (type 8) with a tag.
func ckFrame(tag uint32, payload []byte) rawFrame {
	return rawFrame{Type: tCheckpoint, Tag: tag, Payload: payload}
}

func ckU64(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

// fileBytes lays out a checkpoint file (§11.1) with the given header
// fields and the SHA-256 of state.
func ckFile(job string, epoch uint64, rank, size int, state []byte) []byte {
	b := make([]byte, 96)
	copy(b, "SPCK")
	b[4] = 1
	copy(b[8:40], job)
	binary.BigEndian.PutUint64(b[40:], epoch)
	binary.BigEndian.PutUint32(b[48:], uint32(rank))
	binary.BigEndian.PutUint32(b[52:], uint32(size))
	binary.BigEndian.PutUint64(b[56:], uint64(len(state)))
	sum := sha256.Sum256(state)
	copy(b[64:], sum[:])
	return append(b, state...)
}

// transfer is a file sent the way §11.3 says: a u64 length, then chunks.
func ckTransfer(tag uint32, file []byte) []rawFrame {
	fs := []rawFrame{ckFrame(tag, ckU64(uint64(len(file))))}
	if len(file) > 0 {
		fs = append(fs, ckFrame(tag, file))
	}
	return fs
}

// honest runs fn on every rank but the hostile one and returns the errors
// by rank (nil at the hostile rank).
func ckHonest(comms []*runtime.Comm, hostile int, fn func(c *runtime.Comm) error) []error {
	return each(comms, func(c *runtime.Comm) error {
		if c.Rank() == hostile {
			return nil
		}
		return fn(c)
	})
}

// wantViolation: every honest rank ends with H1627 naming the hostile
// rank, or with H1612 whose cause is H1627; at least one saw it itself.
func ckWantViolation(t *testing.T, what string, errs []error, hostile int) {
	t.Helper()
	saw := false
	for r, err := range errs {
		if r == hostile {
			continue
		}
		e := codes.As(err)
		switch {
		case e == nil:
			t.Errorf("%s: rank %d = %v, want H1627 or H1612 caused by H1627", what, r, err)
		case e.Code == codes.ProtocolViolation:
			saw = true
			if e.Rank != hostile || !strings.HasPrefix(err.Error(), "H1627: ") {
				t.Errorf("%s: rank %d = %q (rank %d), want H1627 naming rank %d", what, r, err, e.Rank, hostile)
			}
		case e.Code == codes.JobEnded && e.Cause != nil && e.Cause.Code == codes.ProtocolViolation:
		default:
			t.Errorf("%s: rank %d = %v, want H1627 or H1612 caused by H1627", what, r, err)
		}
	}
	if !saw {
		t.Errorf("%s: no rank returned H1627: %v", what, errs)
	}
}

// TestHostileCheckpointLength: rank 2, the buddy of rank 0, announces a
// file of a length no state can have, or one its header contradicts; rank
// 0 refuses it before allocating anything for it (a make of the announced
// size would end the test process out of memory).
func TestHostileCheckpointLength(t *testing.T) {
	cases := []struct {
		name   string
		frames func(job string) []rawFrame
	}{
		{"2^64-2 bytes", func(string) []rawFrame { return []rawFrame{ckFrame(ckTagFile, ckU64(^uint64(0)-1))} }},
		{"over a header and 1 TiB", func(string) []rawFrame { return []rawFrame{ckFrame(ckTagFile, ckU64(96+1<<40+1))} }},
		{"512 GiB, header says 10 bytes", func(job string) []rawFrame {
			return []rawFrame{ckFrame(ckTagFile, ckU64(1<<39)), ckFrame(ckTagFile, ckFile(job, 1, 2, 3, make([]byte, 10))[:96])}
		}},
		{"shorter than a header", func(string) []rawFrame { return []rawFrame{ckFrame(ckTagFile, ckU64(50))} }},
		{"length record of 4 bytes", func(string) []rawFrame { return []rawFrame{ckFrame(ckTagFile, []byte{0, 0, 0, 1})} }},
		{"a chunk past the announced length", func(job string) []rawFrame {
			return []rawFrame{ckFrame(ckTagFile, ckU64(100)), ckFrame(ckTagFile, ckFile(job, 1, 2, 3, make([]byte, 200)))}
		}},
		{"an empty chunk", func(job string) []rawFrame {
			return []rawFrame{ckFrame(ckTagFile, ckU64(106)), ckFrame(ckTagFile, nil)}
		}},
		{"the file of another rank", func(job string) []rawFrame {
			return ckTransfer(ckTagFile, ckFile(job, 1, 1, 3, []byte("0123456789")))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			cj := newCkptJob(t, 3)
			comms := cj.start(ctx)
			h := newHostile(t, comms[2])
			h.write(0, ckContrib(1, ckKindBegin, 0, []byte{0}))
			h.write(0, tc.frames(cj.id.ID)...)
			errs := ckHonest(comms, 2, func(c *runtime.Comm) error { return c.Checkpoint(ctx, stateOf(c.Rank(), 1)) })
			ckWantViolation(t, tc.name, errs, 2)
			wantCode(t, "rank 0, the receiver", errs[0], codes.ProtocolViolation)
		})
	}
}

// TestHostileResumeFetch: rank 1's own file is gone, so it takes its
// state from the copy rank 2 keeps; rank 2 sends something else. The copy
// is checked like an own file before it is used or written: H1621 or
// H1622 on every honest rank, the same text, and no file written.
func TestHostileResumeFetch(t *testing.T) {
	cases := []struct {
		name string
		file func(job string, real []byte) []byte
		want codes.Code
	}{
		{"a forged state with its own SHA-256", func(job string, _ []byte) []byte {
			return ckFile(job, 2, 1, 3, []byte("forged state"))
		}, codes.CheckpointDamaged},
		{"10 bytes", func(string, []byte) []byte { return []byte("0123456789") }, codes.CheckpointDamaged},
		{"nothing", func(string, []byte) []byte { return nil }, codes.CheckpointDamaged},
		{"the right state, a header naming rank 0", func(_ string, real []byte) []byte {
			b := bytes.Clone(real)
			binary.BigEndian.PutUint32(b[48:], 0)
			return b
		}, codes.CheckpointHeader},
		{"the right state, a header of epoch 1", func(_ string, real []byte) []byte {
			b := bytes.Clone(real)
			binary.BigEndian.PutUint64(b[40:], 1)
			return b
		}, codes.CheckpointHeader},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			cj := newCkptJob(t, 3)
			comms := cj.start(ctx)
			checkpoints(t, ctx, comms, 1, 2)
			for _, c := range comms {
				c.Close()
			}
			own1 := filepath.Join(cj.epochDir(1, 2), "rank-1.ckpt")
			real, err := os.ReadFile(filepath.Join(cj.epochDir(2, 2), "rank-1.ckpt.buddy"))
			if err != nil {
				t.Fatal(err)
			}
			os.Remove(own1)
			cj.next()
			comms = cj.start(ctx)
			h := newHostile(t, comms[2])
			h.write(0,
				ckContrib(1, ckKindOffer, 0, append(ckU64(2), 1)),
				ckContrib(2, ckKindResumeCommit, 0, nil),
				ckContrib(3, ckKindStatus, 0, []byte{0, 0}), // both of its files good
			)
			h.write(1, ckTransfer(ckTagFetch, tc.file(cj.id.ID, real))...)
			h.write(0, ckContrib(4, ckKindRestore, 0, []byte{0}))
			states, oks, errs := ckResumeAll(ctx, comms, 2)
			for _, r := range []int{0, 1} {
				if oks[r] || states[r] != nil {
					t.Errorf("rank %d resumed %q", r, states[r])
				}
			}
			wantAll(t, tc.name, errs[:2], tc.want)
			if _, err := os.Lstat(own1); !os.IsNotExist(err) {
				t.Errorf("rank 1's own file was written from a bad copy: %v", err)
			}
		})
	}
	t.Run("the no-file marker", func(t *testing.T) {
		ctx := testCtx(t)
		cj := newCkptJob(t, 3)
		comms := cj.start(ctx)
		checkpoints(t, ctx, comms, 1, 2)
		for _, c := range comms {
			c.Close()
		}
		os.Remove(filepath.Join(cj.epochDir(1, 2), "rank-1.ckpt"))
		cj.next()
		comms = cj.start(ctx)
		h := newHostile(t, comms[2])
		h.write(0,
			ckContrib(1, ckKindOffer, 0, append(ckU64(2), 1)),
			ckContrib(2, ckKindResumeCommit, 0, nil),
			ckContrib(3, ckKindStatus, 0, []byte{0, 0}),
		)
		h.write(1, ckFrame(ckTagFetch, ckU64(^uint64(0))))
		_, _, errs := ckResumeAll(ctx, comms, 2)
		ckWantViolation(t, "marker", errs, 2)
	})
}

// resumeAll2 is resumeAll on every rank but the hostile one.
func ckResumeAll(ctx context.Context, comms []*runtime.Comm, hostile int) ([][]byte, []bool, []error) {
	n := len(comms)
	states, oks := make([][]byte, n), make([]bool, n)
	errs := ckHonest(comms, hostile, func(c *runtime.Comm) error {
		s, ok, err := c.Resume(ctx)
		states[c.Rank()], oks[c.Rank()] = s, ok
		return err
	})
	return states, oks, errs
}

// TestHostileRecords: every record of the rounds is length- and
// range-checked, by rank 0 on the records it gathers and by every other
// rank on the verdict it gets. A hostile rank 0 sends verdicts; a hostile
// rank 2 sends records.
func TestHostileRecords(t *testing.T) {
	type scenario struct {
		name    string
		hostile int
		resume  bool // the honest ranks call Resume, else Checkpoint
		frames  func(h *hostile, job string)
	}
	toBoth := func(h *hostile, fs ...rawFrame) {
		h.write(1, fs...)
		h.write(2, fs...)
	}
	// rank 0's part of a checkpoint's buddy exchange: its file to rank 1,
	// the ack of rank 2's to rank 2.
	root0Exchange := func(h *hostile, job string) {
		h.write(1, ckTransfer(ckTagFile, ckFile(job, 1, 0, 3, stateOf(0, 1)))...)
		h.write(2, ckFrame(ckTagAck, []byte{1}))
	}
	cases := []scenario{
		{"short offer verdict", 0, true, func(h *hostile, _ string) {
			toBoth(h, ckResult(1, ckKindOffer, 0, nil))
		}},
		{"offer verdict naming rank 7 as the source", 0, true, func(h *hostile, _ string) {
			v := append(ckU64(5), 0, 0, 0, 7, 1, 0, 0, 0, 0)
			toBoth(h, ckResult(1, ckKindOffer, 0, v))
		}},
		{"offer verdict with unknown flags", 0, true, func(h *hostile, _ string) {
			v := append(ckU64(0), 0, 0, 0, 0, 0x81, 0, 0, 0, 0)
			toBoth(h, ckResult(1, ckKindOffer, 0, v))
		}},
		{"short begin verdict", 0, false, func(h *hostile, _ string) {
			toBoth(h, ckResult(1, ckKindBegin, 0, nil))
		}},
		{"begin verdict with status 9", 0, false, func(h *hostile, _ string) {
			toBoth(h, ckResult(1, ckKindBegin, 0, []byte{9, 0, 0}))
		}},
		{"commit verdict with a COMMIT that does not verify", 0, false, func(h *hostile, job string) {
			toBoth(h, ckResult(1, ckKindBegin, 0, []byte{0, 0, 0}))
			root0Exchange(h, job)
			toBoth(h, ckResult(2, ckKindCommit, 0, append([]byte{0}, bytes.Repeat([]byte{7}, 3000)...)))
		}},
		{"commit verdict with a reason of 600 bytes", 0, false, func(h *hostile, job string) {
			toBoth(h, ckResult(1, ckKindBegin, 0, []byte{0, 0, 0}))
			root0Exchange(h, job)
			toBoth(h, ckResult(2, ckKindCommit, 0, append([]byte{1}, strings.Repeat("a", 600)...)))
		}},
		{"commit verdict with status 2", 0, false, func(h *hostile, job string) {
			toBoth(h, ckResult(1, ckKindBegin, 0, []byte{0, 0, 0}))
			root0Exchange(h, job)
			toBoth(h, ckResult(2, ckKindCommit, 0, []byte{2, 'x'}))
		}},
		{"begin record of 5 bytes", 2, false, func(h *hostile, _ string) {
			h.write(0, ckContrib(1, ckKindBegin, 0, []byte{0, 0, 0, 0, 0}))
		}},
		{"begin record with status 7", 2, false, func(h *hostile, _ string) {
			h.write(0, ckContrib(1, ckKindBegin, 0, []byte{7}))
		}},
		{"offer record with flags 0x80", 2, true, func(h *hostile, _ string) {
			h.write(0, ckContrib(1, ckKindOffer, 0, append(ckU64(0), 0x80)))
		}},
		{"offer record of 3 bytes", 2, true, func(h *hostile, _ string) {
			h.write(0, ckContrib(1, ckKindOffer, 0, []byte{1, 2, 3}))
		}},
		{"commit record with status 4", 2, false, func(h *hostile, _ string) {
			h.write(0, ckContrib(1, ckKindBegin, 0, []byte{0}))
			h.write(0, ckFrame(ckTagFile, ckU64(^uint64(0)))) // "my write failed"
			h.write(1, ckFrame(ckTagAck, []byte{1}))
			h.write(0, ckContrib(2, ckKindCommit, 0, append([]byte{4}, make([]byte, 32)...)))
		}},
		{"an ack of 3 bytes", 2, false, func(h *hostile, _ string) {
			h.write(0, ckContrib(1, ckKindBegin, 0, []byte{0}))
			h.write(0, ckFrame(ckTagFile, ckU64(^uint64(0))))
			h.write(1, ckFrame(ckTagAck, []byte{1, 1, 1}))
			h.write(0, ckContrib(2, ckKindCommit, 0, make([]byte, 33)))
		}},
		{"a COMMIT from the source that does not verify", 2, true, func(h *hostile, _ string) {
			h.write(0, ckContrib(1, ckKindOffer, 0, append(ckU64(9), 1)))
			h.write(0, ckResult(2, ckKindResumeCommit, 2, bytes.Repeat([]byte{1}, 2600)))
			h.write(1, ckResult(2, ckKindResumeCommit, 2, bytes.Repeat([]byte{1}, 2600)))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			cj := newCkptJob(t, 3)
			comms := cj.start(ctx)
			tc.frames(newHostile(t, comms[tc.hostile]), cj.id.ID)
			errs := ckHonest(comms, tc.hostile, func(c *runtime.Comm) error {
				if tc.resume {
					_, _, err := c.Resume(ctx)
					return err
				}
				return c.Checkpoint(ctx, stateOf(c.Rank(), 1))
			})
			ckWantViolation(t, tc.name, errs, tc.hostile)
		})
	}
}

// TestResumeWriteBackFails: rank 1 fetches its file from its buddy and
// cannot write it back (a directory is in the way): H1625 on every rank,
// no temporary file left. The rank that failed names the file.
func TestResumeWriteBackFails(t *testing.T) {
	var own string
	states, oks, errs := damage(t, 3, func(cj *ckptJob) {
		own = filepath.Join(cj.epochDir(1, 2), "rank-1.ckpt")
		os.Remove(own)
		if err := os.MkdirAll(filepath.Join(own, "in-the-way"), 0o700); err != nil {
			t.Fatal(err)
		}
	})
	for r := range errs {
		if oks[r] || states[r] != nil {
			t.Errorf("rank %d resumed although rank 1 could not write back its file", r)
		}
		wantCode(t, fmt.Sprintf("rank %d", r), errs[r], codes.CheckpointStorage)
	}
	if !strings.Contains(errs[1].Error(), "rank-1.ckpt") {
		t.Errorf("rank 1's error %q does not name its file", errs[1])
	}
	if errs[0].Error() != errs[2].Error() || !strings.Contains(errs[0].Error(), "rank 1") {
		t.Errorf("ranks 0 and 2 say %q and %q, want the same text naming rank 1", errs[0], errs[2])
	}
	for _, f := range listFiles(t, filepath.Dir(filepath.Dir(own))) {
		if strings.Contains(f, ".tmp") {
			t.Errorf("%s left after the failed write-back", f)
		}
	}
}

// TestCheckpointDirUnusable: one rank whose checkpoint directory cannot be
// made fails checkpoint and resume with H1625 on every rank; the program
// on each rank finishes right after its call returns, as a program that
// does not catch the error would.
func TestCheckpointDirUnusable(t *testing.T) {
	for _, op := range []string{"checkpoint", "resume"} {
		t.Run(op, func(t *testing.T) {
			ctx := testCtx(t)
			cj := newCkptJob(t, 3)
			if err := os.MkdirAll(filepath.Dir(cj.dirs[1]), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(cj.dirs[1], []byte("not a directory"), 0o600); err != nil {
				t.Fatal(err)
			}
			comms := cj.start(ctx)
			errs := each(comms, func(c *runtime.Comm) error {
				defer c.Finish()
				if op == "resume" {
					_, _, err := c.Resume(ctx)
					return err
				}
				return c.Checkpoint(ctx, stateOf(c.Rank(), 1))
			})
			for r, err := range errs {
				wantCode(t, fmt.Sprintf("%s: rank %d", op, r), err, codes.CheckpointStorage)
			}
			if errs[0].Error() != errs[2].Error() || !strings.Contains(errs[0].Error(), "rank 1") {
				t.Errorf("ranks 0 and 2 say %q and %q, want the same text naming rank 1", errs[0], errs[2])
			}
		})
	}
}

// TestCheckpointSymlinks: links planted in the checkpoint directory
// (at the temporary and final names of files, as an epoch directory, as
// the job directory) never receive data: a link at a file name is
// replaced, a link where a directory belongs is H1625 on every rank.
func TestCheckpointSymlinks(t *testing.T) {
	ctx := testCtx(t)
	cj := newCkptJob(t, 3)
	outside := t.TempDir()
	link := func(target, name string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, name); err != nil {
			t.Fatal(err)
		}
	}
	e1 := cj.epochDir(0, 1)
	for _, n := range []string{"rank-0.ckpt.tmp", "rank-2.ckpt.buddy.tmp", "COMMIT.tmp.0", "rank-0.ckpt", "rank-2.ckpt.buddy", "COMMIT"} {
		link(filepath.Join(outside, n), filepath.Join(e1, n))
	}
	os.Mkdir(filepath.Join(outside, "epoch"), 0o700)
	link(filepath.Join(outside, "epoch"), cj.epochDir(1, 1))
	os.Mkdir(filepath.Join(outside, "job"), 0o700)
	link(filepath.Join(outside, "job"), filepath.Join(cj.dirs[2], cj.id.ID))
	comms := cj.start(ctx)

	errs := each(comms, func(c *runtime.Comm) error { return c.Checkpoint(ctx, stateOf(c.Rank(), 1)) })
	for r, err := range errs {
		wantCode(t, fmt.Sprintf("rank %d, links in the way", r), err, codes.CheckpointStorage)
	}
	// The job directory of rank 2 refused at the begin round; rank 1's
	// epoch directory would have been next.
	os.Remove(filepath.Join(cj.dirs[2], cj.id.ID))
	errs = each(comms, func(c *runtime.Comm) error { return c.Checkpoint(ctx, stateOf(c.Rank(), 1)) })
	for r, err := range errs {
		wantCode(t, fmt.Sprintf("rank %d, an epoch directory that is a link", r), err, codes.CheckpointStorage)
	}
	if !strings.Contains(errs[1].Error(), "symbolic link") {
		t.Errorf("rank 1 = %q, want it to name the link", errs[1])
	}
	os.Remove(cj.epochDir(1, 1))
	checkpoints(t, ctx, comms, 1, 1)
	filepath.Walk(outside, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			t.Errorf("%s received data through a planted link", p)
		}
		return nil
	})
	for _, n := range []string{"rank-0.ckpt", "rank-2.ckpt.buddy", "COMMIT"} {
		if fi, err := os.Lstat(filepath.Join(e1, n)); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s is not a regular file after the checkpoint: %v", n, err)
		}
	}
	for _, c := range comms {
		c.Close()
	}
	cj.next()
	states, oks, errs := resumeAll(ctx, cj.start(ctx))
	wantStates(t, "after the links", states, oks, errs, 1)
}

// TestHostileResumeVerdicts: a hostile rank 0 leads a resume of epoch 2
// (rank 1 is the COMMIT's source) and sends a files table or a restore
// verdict that is not what it got; the honest ranks 1 and 2 end the job.
// (A verdict that changes only another rank's entry cannot be seen by a
// rank; the rank whose entry it is sees it.)
func TestHostileResumeVerdicts(t *testing.T) {
	offer := ckResult(1, ckKindOffer, 0, append(append(ckU64(2), 0, 0, 0, 1), 1, 0, 0, 0, 0)) // epoch 2 from rank 1
	cases := []struct {
		name       string
		rank2Fetch bool // rank 2's own file is gone: it fetches from rank 0
		frames     func(h *hostile, rank2File []byte) []rawFrame
	}{
		{"files table with a status 9", false, func(*hostile, []byte) []rawFrame {
			return []rawFrame{ckResult(3, ckKindStatus, 0, []byte{9, 0, 0, 0, 0, 0})}
		}},
		{"files table of 5 bytes", false, func(*hostile, []byte) []rawFrame {
			return []rawFrame{ckResult(3, ckKindStatus, 0, []byte{0, 0, 0, 0, 0})}
		}},
		{"files table that says rank 1's file is absent", false, func(*hostile, []byte) []rawFrame {
			return []rawFrame{ckResult(3, ckKindStatus, 0, []byte{0, 0, 1, 0, 0, 0})}
		}},
		{"restore verdict of 2 bytes", true, func(h *hostile, f []byte) []rawFrame {
			h.write(2, ckTransfer(ckTagFetch, f)...)
			return []rawFrame{ckResult(3, ckKindStatus, 0, []byte{0, 0, 0, 0, 1, 0}), ckResult(4, ckKindRestore, 0, []byte{0, 0})}
		}},
		{"restore verdict with a status 7", true, func(h *hostile, f []byte) []rawFrame {
			h.write(2, ckTransfer(ckTagFetch, f)...)
			return []rawFrame{ckResult(3, ckKindStatus, 0, []byte{0, 0, 0, 0, 1, 0}), ckResult(4, ckKindRestore, 0, []byte{0, 0, 7})}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			cj := newCkptJob(t, 3)
			comms := cj.start(ctx)
			checkpoints(t, ctx, comms, 1, 2)
			for _, c := range comms {
				c.Close()
			}
			rank2File, err := os.ReadFile(filepath.Join(cj.epochDir(0, 2), "rank-2.ckpt.buddy"))
			if err != nil {
				t.Fatal(err)
			}
			if tc.rank2Fetch {
				os.Remove(filepath.Join(cj.epochDir(2, 2), "rank-2.ckpt"))
			}
			cj.next()
			comms = cj.start(ctx)
			h := newHostile(t, comms[0])
			h.write(1, offer, ckContrib(2, ckKindResumeCommit, 1, nil))
			h.write(2, offer)
			fs := tc.frames(h, rank2File)
			h.write(1, fs...)
			h.write(2, fs...)
			_, _, errs := ckResumeAll(ctx, comms, 0)
			ckWantViolation(t, tc.name, errs, 0)
		})
	}
}
