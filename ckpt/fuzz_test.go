package ckpt

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"sperli/codes"
	"sperli/pki"
)

// Fuzz targets for everything a rank decodes from a peer or a disk in
// checkpoint and resume: the file header, the COMMIT, and the record and
// verdict of every round (docs/protocol.md §11). Each checks that the
// decoder never panics, that what it accepts has the documented shape,
// and that the outcome computed from an accepted verdict never panics.
// The committed seeds are in testdata/fuzz/Fuzz*/ (made by
// TestWriteCkptSeeds with -write-ckpt-seeds).

var writeCkptSeeds = flag.Bool("write-ckpt-seeds", false, "write the seed corpora of the checkpoint fuzz targets to testdata/fuzz")

const fuzzJob = "0123456789abcdef0123456789abcdef"

var fuzzKey = sync.OnceValues(func() (*pki.PublicKey, *pki.PrivateKey) {
	// A fixed key, so that a committed seed COMMIT keeps verifying.
	pub, priv, err := pki.GenerateJobKey(bytes.NewReader(bytes.Repeat([]byte{7}, 1<<12)))
	if err != nil {
		panic(err)
	}
	return pub, priv
})

// fuzzSize and fuzzRank bring fuzzed numbers into a job.
func fuzzSize(n uint16) int        { return 1 + int(n)%16 }
func fuzzRank(r uint16, n int) int { return int(r) % n }

func fuzzCommitOf(size int, epoch uint64) []byte {
	_, priv := fuzzKey()
	sums := make([][32]byte, size)
	for r := range sums {
		sums[r] = sha256.Sum256([]byte(fmt.Sprint(r)))
	}
	b, err := EncodeCommit(fuzzJob, epoch, sums, priv)
	if err != nil {
		panic(err)
	}
	return b
}

func FuzzCheckpointHeader(f *testing.F) {
	state := []byte("state")
	good := append(FileHeader{Version: 1, Job: fuzzJob, Epoch: 2, Rank: 1, Size: 3, Length: uint64(len(state)), Sum: sha256.Sum256(state)}.Encode(), state...)
	f.Add(good)
	f.Add(good[:95])
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeFileHeader(b)
		if err == nil && !bytes.Equal(h.Encode(), b[:HeaderLen]) {
			t.Fatalf("header %x decodes to %+v, which encodes to %x", b[:HeaderLen], h, h.Encode())
		}
		cm := &Commit{Job: fuzzJob, Epoch: 2, Size: 3, Sums: [][32]byte{{}, sha256.Sum256(state), {}}}
		s := VerifyFile(b, cm, 1, fuzzJob)
		if s == FileOK && !bytes.Equal(b, good) {
			t.Fatalf("verifyFile accepts %x, which is not the file", b)
		}
		if err == nil {
			n := uint64(len(b))
			if CheckBuddyHeader(b, fuzzJob, h.Epoch, int(h.Rank), int(h.Size), n) == nil && h.Length != n-HeaderLen {
				t.Fatalf("buddy header of %d bytes of state accepted for a transfer of %d", h.Length, n)
			}
		}
	})
}

func FuzzCommit(f *testing.F) {
	f.Add(fuzzCommitOf(3, 2))
	f.Add(fuzzCommitOf(1, 1))
	pub, _ := fuzzKey()
	for _, seed := range [][]byte{fuzzCommitOf(3, 2), fuzzCommitOf(1, 1)} {
		if _, err := DecodeCommit(seed, pub); err != nil {
			f.Fatalf("a signed COMMIT does not decode: %v", err)
		}
	}
	// The structure is fuzzed; the signature check (slow under coverage
	// instrumentation) is FuzzCommit's seeds above and TestResumeDamage.
	f.Fuzz(func(t *testing.T, b []byte) {
		cm, _, err := ParseCommit(b)
		if err != nil {
			return
		}
		if int(cm.Size) != len(cm.Sums) || len(b) != 56+32*len(cm.Sums)+pki.SignatureSize || cm.Job != string(b[8:40]) || cm.Epoch != binary.BigEndian.Uint64(b[40:]) {
			t.Fatalf("COMMIT %x decodes to job %q epoch %d and %d hashes", b, cm.Job, cm.Epoch, len(cm.Sums))
		}
		for r, s := range cm.Sums {
			if !bytes.Equal(s[:], b[56+32*r:88+32*r]) {
				t.Fatalf("hash %d is not the COMMIT's bytes", r)
			}
		}
	})
}

// wantTableShape checks an accepted table verdict.
func wantTableShape(t *testing.T, v []byte, size, width, rank int, mine []byte) {
	t.Helper()
	if len(v) != size*width || !bytes.Equal(v[rank*width:rank*width+width], mine) {
		t.Fatalf("verdict %x accepted for rank %d of %d with record %x", v, rank, size, mine)
	}
}

func FuzzCkptBeginRound(f *testing.F) {
	f.Add([]byte{0}, []byte{0, 1, 0}, uint16(2), uint16(1))
	f.Add([]byte{4}, []byte{2, 3}, uint16(1), uint16(0))
	f.Fuzz(func(t *testing.T, rec, v []byte, n, r uint16) {
		if CheckBeginRecord(rec) == nil && (len(rec) != 1 || rec[0] > BeginTooBig) {
			t.Fatalf("begin record %x accepted", rec)
		}
		size := fuzzSize(n)
		rank := fuzzRank(r, size)
		mine := byte(r>>8) % 4
		if CheckBeginVerdict(v, size, rank, mine) != nil {
			return
		}
		wantTableShape(t, v, size, 1, rank, []byte{mine})
		err := BeginOutcome(v, 1, rank, nil)
		if all0 := bytes.Count(v, []byte{0}) == len(v); (err == nil) != all0 {
			t.Fatalf("begin verdict %x: outcome %v", v, err)
		}
	})
}

func FuzzCkptCommitRound(f *testing.F) {
	f.Add(make([]byte, 33), append([]byte{0}, fuzzCommitOf(3, 1)...), byte(0))
	f.Add(append([]byte{2}, make([]byte, 32)...), []byte("\x01rank 2 could not write its file"), byte(1))
	f.Fuzz(func(t *testing.T, rec, v []byte, mine byte) {
		if CheckCommitRecord(rec) == nil && (len(rec) != CommitRecLen || rec[0] > CommitNotKept) {
			t.Fatalf("commit record %x accepted", rec)
		}
		ok, rest, err := CheckCommitVerdict(v, mine)
		if err != nil {
			return
		}
		if ok && (mine != CommitOK || v[0] != 0) || !ok && (v[0] != 1 || len(rest) == 0 || len(rest) > MaxReason) {
			t.Fatalf("commit verdict %x accepted as ok %v for status %d", v, ok, mine)
		}
		if ok {
			ParseCommit(rest) // must not panic
		}
	})
}

func FuzzResumeOffer(f *testing.F) {
	f.Add(Offer{Epoch: 3, Flags: 1}.Record(), Offer{Epoch: 3, Src: 1, Flags: 1}.Verdict(), uint16(2), uint16(1), Offer{Epoch: 3, Flags: 1}.Record())
	f.Add(Offer{Flags: 2}.Record(), Offer{Flags: 3, Bad: 1}.Verdict(), uint16(3), uint16(2), Offer{Flags: 2}.Record())
	f.Fuzz(func(t *testing.T, rec, v []byte, n, r uint16, mineRec []byte) {
		if o, err := DecodeOfferRecord(rec); err == nil && !bytes.Equal(o.Record(), rec) {
			t.Fatalf("offer record %x decodes to %+v, which encodes to %x", rec, o, o.Record())
		}
		mine, err := DecodeOfferRecord(mineRec)
		if err != nil {
			return
		}
		size := fuzzSize(n)
		rank := fuzzRank(r, size)
		o, err := DecodeOfferVerdict(v, size, rank, mine)
		if err != nil {
			return
		}
		if !bytes.Equal(o.Verdict(), v) || o.Epoch < mine.Epoch || int(o.Src) >= size || int(o.Bad) >= size || o.Flags&mine.Flags != mine.Flags {
			t.Fatalf("offer verdict %x accepted for rank %d of %d offering %+v", v, rank, size, mine)
		}
		// Rank 0's own verdict from any records is accepted by every rank.
		recs := make([]Offer, size)
		recs[rank] = mine
		d := DecideOffer(recs)
		if _, err := DecodeOfferVerdict(d.Verdict(), size, rank, mine); err != nil {
			t.Fatalf("rank 0's verdict %+v from %+v refused: %v", d, recs, err)
		}
	})
}

func FuzzResumeStatus(f *testing.F) {
	f.Add([]byte{0, 2}, []byte{0, 1, 0, 2, 1, 0}, uint16(2), uint16(1))
	f.Add([]byte{1, 1}, []byte{1, 1}, uint16(0), uint16(0))
	f.Fuzz(func(t *testing.T, rec, v []byte, n, r uint16) {
		recOK := CheckStatusRecord(rec) == nil
		if recOK && (len(rec) != 2 || rec[0] > FileBadHeader || rec[1] > FileBadHeader) {
			t.Fatalf("status record %x accepted", rec)
		}
		if !recOK {
			return
		}
		size := fuzzSize(n)
		rank := fuzzRank(r, size)
		if CheckStatusVerdict(v, size, rank, rec) != nil {
			return
		}
		wantTableShape(t, v, size, 2, rank, rec)
		if err := StatusOutcome(v, 1, size); err != nil {
			switch codes.Of(err) {
			case codes.NoEpoch, codes.CheckpointDamaged, codes.CheckpointHeader:
			default:
				t.Fatalf("status verdict %x: outcome %v", v, err)
			}
		}
	})
}

func FuzzResumeRestore(f *testing.F) {
	f.Add([]byte{0}, []byte{0, 3, 0}, uint16(2), uint16(1))
	f.Add([]byte{3}, []byte{3}, uint16(0), uint16(0))
	f.Fuzz(func(t *testing.T, rec, v []byte, n, r uint16) {
		if CheckRestoreRecord(rec) != nil {
			return
		}
		size := fuzzSize(n)
		rank := fuzzRank(r, size)
		if CheckRestoreVerdict(v, size, rank, rec[0]) != nil {
			return
		}
		wantTableShape(t, v, size, 1, rank, rec)
		err := RestoreOutcome(v, 1, rank, nil)
		if all0 := bytes.Count(v, []byte{0}) == len(v); (err == nil) != all0 {
			t.Fatalf("restore verdict %x: outcome %v", v, err)
		}
	})
}

func FuzzCkptTransfer(f *testing.F) {
	f.Add(binary.BigEndian.AppendUint64(nil, 1000), false, []byte{1})
	f.Add(binary.BigEndian.AppendUint64(nil, ^uint64(0)), true, []byte{0, 1})
	f.Fuzz(func(t *testing.T, head []byte, fetch bool, ack []byte) {
		n, ok, err := CheckBlobLength(head, fetch)
		if err == nil {
			if !ok && fetch || ok && (n > HeaderLen+MaxState || !fetch && n < HeaderLen) {
				t.Fatalf("length record %x (fetch %v) accepted as %d, %v", head, fetch, n, ok)
			}
		}
		if stored, err := CheckAck(ack); err == nil && (len(ack) != 1 || stored != (ack[0] == 1) || ack[0] > 1) {
			t.Fatalf("ack %x accepted", ack)
		}
	})
}

// TestWriteCkptSeeds writes the seed corpora of the targets above (with
// -write-ckpt-seeds); without the flag it checks that they are there.
func TestWriteCkptSeeds(t *testing.T) {
	state := []byte("state")
	good := append(FileHeader{Version: 1, Job: fuzzJob, Epoch: 2, Rank: 1, Size: 3, Length: uint64(len(state)), Sum: sha256.Sum256(state)}.Encode(), state...)
	wrongRank := bytes.Clone(good)
	wrongRank[51] = 0
	longer := append(bytes.Clone(good), 'x')
	cm := fuzzCommitOf(3, 2)
	badSig := bytes.Clone(cm)
	badSig[len(badSig)-5] ^= 0xff
	u64 := func(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }
	b := func(x []byte) string { return fmt.Sprintf("[]byte(%q)", x) }
	seeds := map[string]map[string][]string{
		"FuzzCheckpointHeader": {
			"good": {b(good)}, "wrong_rank": {b(wrongRank)}, "state_longer": {b(longer)}, "short": {b(good[:40])},
		},
		"FuzzCommit": {
			"good": {b(cm)}, "bad_signature": {b(badSig)}, "size_4096": {b(append(append(bytes.Clone(cm[:48]), 0, 0, 0x10, 0), cm[52:]...))},
		},
		"FuzzCkptBeginRound": {
			"ready":      {b([]byte{0}), b([]byte{0, 0, 0}), "uint16(2)", "uint16(1)"},
			"short":      {b([]byte{1}), b(nil), "uint16(2)", "uint16(1)"},
			"status_big": {b([]byte{9}), b([]byte{9, 0, 0}), "uint16(2)", "uint16(1)"},
		},
		"FuzzCkptCommitRound": {
			"commit":     {b(make([]byte, 33)), b(append([]byte{0}, cm...)), "byte('\\x00')"},
			"reason":     {b(append([]byte{1}, make([]byte, 32)...)), b([]byte("\x01rank 1 could not write its file")), "byte('\\x01')"},
			"reason_600": {b(make([]byte, 33)), b(append([]byte{1}, bytes.Repeat([]byte{'a'}, 600)...)), "byte('\\x00')"},
			"empty":      {b(nil), b(nil), "byte('\\x00')"},
		},
		"FuzzResumeOffer": {
			"newest":   {b(Offer{Epoch: 3, Flags: 1}.Record()), b(Offer{Epoch: 3, Src: 1, Flags: 1}.Verdict()), "uint16(2)", "uint16(1)", b(Offer{Epoch: 3, Flags: 1}.Record())},
			"storage":  {b(Offer{Flags: 2}.Record()), b(Offer{Flags: 2, Bad: 2}.Verdict()), "uint16(2)", "uint16(2)", b(Offer{Flags: 2}.Record())},
			"src_7":    {b(u64(0)), b(Offer{Epoch: 5, Src: 7}.Verdict()), "uint16(2)", "uint16(0)", b(append(u64(0), 0))},
			"13_bytes": {b(append(u64(2), 1)), b(append(u64(2), 0, 0, 0, 0, 1)), "uint16(2)", "uint16(0)", b(append(u64(2), 1))},
		},
		"FuzzResumeStatus": {
			"table":   {b([]byte{0, 2}), b([]byte{1, 0, 0, 2, 0, 0}), "uint16(2)", "uint16(1)"},
			"missing": {b([]byte{1, 1}), b([]byte{1, 1, 1, 1}), "uint16(1)", "uint16(0)"},
			"value_9": {b([]byte{0, 0}), b([]byte{0, 0, 9, 0}), "uint16(1)", "uint16(0)"},
		},
		"FuzzResumeRestore": {
			"ok":       {b([]byte{0}), b([]byte{0, 0, 0}), "uint16(2)", "uint16(1)"},
			"storage":  {b([]byte{3}), b([]byte{0, 3, 1}), "uint16(2)", "uint16(1)"},
			"not_mine": {b([]byte{0}), b([]byte{0, 1, 0}), "uint16(2)", "uint16(1)"},
		},
		"FuzzCkptTransfer": {
			"file":           {b(u64(1000)), "bool(false)", b([]byte{1})},
			"marker":         {b(u64(^uint64(0))), "bool(false)", b([]byte{0})},
			"2pow64_minus_2": {b(u64(^uint64(0) - 1)), "bool(true)", b([]byte{2})},
			"1TiB_plus":      {b(u64(96 + 1<<40 + 1)), "bool(false)", b([]byte{1, 1})},
		},
	}
	for target, files := range seeds {
		dir := filepath.Join("testdata", "fuzz", target)
		for name, args := range files {
			body := "go test fuzz v1\n"
			for _, a := range args {
				body += a + "\n"
			}
			path := filepath.Join(dir, name)
			if *writeCkptSeeds {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if got, err := os.ReadFile(path); err != nil || string(got) != body {
				t.Errorf("seed %s is missing or stale (go test -run TestWriteCkptSeeds -write-ckpt-seeds ./runtime/): %v", path, err)
			}
		}
	}
}
