package ckpt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"
)

// The records of the checkpoint and resume rounds (docs/protocol.md §11.3)
// and the checks a receiver makes on each before it uses one byte of it.
// Every function here is pure: it is what the fuzz targets of
// fuzz_test.go drive. A check that fails is a protocol violation by
// the sender (H1627): an honest rank never sends such a record.

// MaxState is the largest state a checkpoint takes (1 TiB). A checkpoint
// transfer that announces more than a header and MaxState is refused
// before anything is allocated for it.
const MaxState = 1 << 40

// MaxReason is the most bytes of the reason in a failed COMMIT verdict.
const MaxReason = 512

// Status of a rank in the checkpoint begin round.
const (
	BeginReady   = 0 // it can take part
	BeginOpen    = 1 // it has an open send or receive (H1624)
	BeginStorage = 2 // its checkpoint directory cannot be used (H1625)
	BeginTooBig  = 3 // its state is over MaxState (H1616)
)

// Status of a rank in the checkpoint commit round.
const (
	CommitOK        = 0
	CommitOwnFailed = 1 // could not write its file
	CommitBuddyFail = 2 // could not store the buddy copy it keeps
	CommitNotKept   = 3 // its buddy could not store its copy
)

// Flags of a resume offer record and verdict.
const (
	OfferSawCommit = 1 // some COMMIT file exists
	OfferStorage   = 2 // the checkpoint directory cannot be used
)

// Status of a rank in the resume restore round (after the fetches).
const (
	RestoreOK      = 0
	RestoreDamaged = 1 // the copy from its buddy is damaged (H1621)
	RestoreHeader  = 2 // the copy from its buddy has a wrong header (H1622)
	RestoreStorage = 3 // the copy could not be written back (H1625)
)

// Sizes of the fixed records.
const (
	CommitRecLen = 33
	OfferRecLen  = 9
	OfferVerLen  = 17
	StatusRecLen = 2
	BlobLenLen   = 8
)

// NoFile is the length record of a transfer that sends no file (the
// sender's own write failed).
const NoFile = ^uint64(0)

// CheckByteRecord checks a record of one status byte at most max.
func CheckByteRecord(b []byte, max byte) error {
	if len(b) != 1 {
		return fmt.Errorf("record of %d bytes, want 1", len(b))
	}
	if b[0] > max {
		return fmt.Errorf("status %d, want 0 to %d", b[0], max)
	}
	return nil
}

// CheckTable checks a verdict that is one status byte (at most max) per
// rank, width bytes per rank, of which this rank's are mine.
func CheckTable(v []byte, size, width, rank int, mine []byte, max byte) error {
	if len(v) != size*width {
		return fmt.Errorf("verdict of %d bytes, want %d (%d per rank of %d)", len(v), size*width, width, size)
	}
	for i, x := range v {
		if x > max {
			return fmt.Errorf("verdict byte %d is %d, want 0 to %d", i, x, max)
		}
	}
	for i, x := range mine {
		if v[rank*width+i] != x {
			return fmt.Errorf("verdict says %d for this rank's byte %d, this rank sent %d", v[rank*width+i], i, x)
		}
	}
	return nil
}

// CheckBeginRecord and checkBeginVerdict: 1 status byte per rank.
func CheckBeginRecord(b []byte) error { return CheckByteRecord(b, BeginTooBig) }
func CheckBeginVerdict(v []byte, size, rank int, mine byte) error {
	return CheckTable(v, size, 1, rank, []byte{mine}, BeginTooBig)
}

// CheckCommitRecord: a status and a SHA-256.
func CheckCommitRecord(b []byte) error {
	if len(b) != CommitRecLen {
		return fmt.Errorf("record of %d bytes, want %d", len(b), CommitRecLen)
	}
	if b[0] > CommitNotKept {
		return fmt.Errorf("status %d, want 0 to %d", b[0], CommitNotKept)
	}
	return nil
}

// CheckCommitVerdict checks the structure of the commit round's verdict:
// 0x00 and a COMMIT, or 0x01 and a reason (1 to 512 bytes of UTF-8
// without control characters). A rank that reported a failure must get
// 0x01. The COMMIT itself is checked by the caller (signature, job, epoch,
// hashes).
func CheckCommitVerdict(v []byte, mine byte) (ok bool, rest []byte, err error) {
	if len(v) == 0 {
		return false, nil, errors.New("empty verdict")
	}
	switch v[0] {
	case 0:
		if mine != CommitOK {
			return false, nil, fmt.Errorf("verdict commits the epoch although this rank reported status %d", mine)
		}
		return true, v[1:], nil
	case 1:
		r := v[1:]
		if len(r) == 0 || len(r) > MaxReason {
			return false, nil, fmt.Errorf("reason of %d bytes, want 1 to %d", len(r), MaxReason)
		}
		if !utf8.Valid(r) {
			return false, nil, errors.New("reason is not UTF-8")
		}
		for _, ch := range string(r) {
			if ch < 0x20 || ch == 0x7f {
				return false, nil, fmt.Errorf("reason holds control character %#x", ch)
			}
		}
		return false, r, nil
	}
	return false, nil, fmt.Errorf("verdict status %d, want 0 or 1", v[0])
}

// Offer is a resume Offer record or verdict.
type Offer struct {
	Epoch uint64
	Src   uint32 // verdict: the lowest rank holding Epoch
	Flags byte
	Bad   uint32 // verdict: the lowest rank with offerStorage
}

func (o Offer) Record() []byte {
	return append(binary.BigEndian.AppendUint64(nil, o.Epoch), o.Flags)
}

func (o Offer) Verdict() []byte {
	b := binary.BigEndian.AppendUint64(nil, o.Epoch)
	b = binary.BigEndian.AppendUint32(b, o.Src)
	b = append(b, o.Flags)
	return binary.BigEndian.AppendUint32(b, o.Bad)
}

// DecodeOfferRecord: u64 epoch, u8 flags; a rank without a usable
// directory offers epoch 0.
func DecodeOfferRecord(b []byte) (Offer, error) {
	if len(b) != OfferRecLen {
		return Offer{}, fmt.Errorf("record of %d bytes, want %d", len(b), OfferRecLen)
	}
	o := Offer{Epoch: binary.BigEndian.Uint64(b), Flags: b[8]}
	if o.Flags > OfferSawCommit|OfferStorage {
		return Offer{}, fmt.Errorf("flags %#x, want bits 0 and 1 only", o.Flags)
	}
	if o.Flags&OfferStorage != 0 && o.Epoch != 0 {
		return Offer{}, fmt.Errorf("offers epoch %d without a usable directory", o.Epoch)
	}
	return o, nil
}

// DecideOffer is rank 0's verdict from every rank's offer.
func DecideOffer(recs []Offer) Offer {
	var v Offer
	bad := -1
	for r, x := range recs {
		if x.Epoch > v.Epoch {
			v.Epoch, v.Src = x.Epoch, uint32(r)
		}
		v.Flags |= x.Flags
		if x.Flags&OfferStorage != 0 && bad < 0 {
			bad = r
		}
	}
	if bad >= 0 {
		v.Bad = uint32(bad)
	}
	return v
}

// DecodeOfferVerdict checks the verdict against what this rank offered.
func DecodeOfferVerdict(b []byte, size, rank int, mine Offer) (Offer, error) {
	if len(b) != OfferVerLen {
		return Offer{}, fmt.Errorf("verdict of %d bytes, want %d", len(b), OfferVerLen)
	}
	v := Offer{Epoch: binary.BigEndian.Uint64(b), Src: binary.BigEndian.Uint32(b[8:]), Flags: b[12], Bad: binary.BigEndian.Uint32(b[13:])}
	switch {
	case v.Flags > OfferSawCommit|OfferStorage:
		return Offer{}, fmt.Errorf("flags %#x, want bits 0 and 1 only", v.Flags)
	case v.Flags&mine.Flags != mine.Flags:
		return Offer{}, fmt.Errorf("flags %#x lack this rank's %#x", v.Flags, mine.Flags)
	case v.Epoch < mine.Epoch:
		return Offer{}, fmt.Errorf("epoch %d is older than this rank's %d", v.Epoch, mine.Epoch)
	case int64(v.Src) >= int64(size) || (v.Epoch == 0 && v.Src != 0):
		return Offer{}, fmt.Errorf("source rank %d for epoch %d in a job of %d", v.Src, v.Epoch, size)
	case int(v.Src) == rank && v.Epoch != mine.Epoch:
		return Offer{}, fmt.Errorf("names this rank as the source of epoch %d, which it does not hold", v.Epoch)
	case v.Flags&OfferStorage == 0 && v.Bad != 0:
		return Offer{}, fmt.Errorf("names rank %d without a directory, but no rank lacks one", v.Bad)
	case v.Flags&OfferStorage != 0 && int64(v.Bad) >= int64(size):
		return Offer{}, fmt.Errorf("names rank %d without a directory in a job of %d", v.Bad, size)
	case mine.Flags&OfferStorage != 0 && int(v.Bad) > rank:
		return Offer{}, fmt.Errorf("names rank %d as the first without a directory, this rank %d has none", v.Bad, rank)
	}
	return v, nil
}

// The resume status round: 2 bytes per rank (own file, buddy copy kept),
// each fileOK … fileHeader_.
func CheckStatusRecord(b []byte) error {
	if len(b) != StatusRecLen {
		return fmt.Errorf("record of %d bytes, want %d", len(b), StatusRecLen)
	}
	if b[0] > FileBadHeader || b[1] > FileBadHeader {
		return fmt.Errorf("file status %d, %d, want 0 to %d", b[0], b[1], FileBadHeader)
	}
	return nil
}

func CheckStatusVerdict(v []byte, size, rank int, mine []byte) error {
	return CheckTable(v, size, StatusRecLen, rank, mine, FileBadHeader)
}

// The resume restore round: 1 byte per rank.
func CheckRestoreRecord(b []byte) error { return CheckByteRecord(b, RestoreStorage) }
func CheckRestoreVerdict(v []byte, size, rank int, mine byte) error {
	return CheckTable(v, size, 1, rank, []byte{mine}, RestoreStorage)
}

// CheckBlobLength checks the length record of a checkpoint transfer: 8
// bytes, then for a buddy copy at checkpoint (fetch false) the no-file
// marker or a file of at least its header, for a copy fetched at resume
// any length (what arrives is verified as a file); never more than a
// header and MaxState.
func CheckBlobLength(b []byte, fetch bool) (n uint64, ok bool, err error) {
	if len(b) != BlobLenLen {
		return 0, false, fmt.Errorf("length record of %d bytes, want %d", len(b), BlobLenLen)
	}
	n = binary.BigEndian.Uint64(b)
	if n == NoFile {
		if fetch {
			return 0, false, errors.New("no-file marker where a file is due")
		}
		return 0, false, nil
	}
	min := uint64(HeaderLen)
	if fetch {
		min = 0
	}
	if n < min || n > HeaderLen+MaxState {
		return 0, false, fmt.Errorf("announces %d bytes, want %d to %d (a header and at most %d bytes of state)", n, min, uint64(HeaderLen+MaxState), uint64(MaxState))
	}
	return n, true, nil
}

// CheckAck checks a buddy's answer: 1 byte, 0 (not stored) or 1 (stored).
func CheckAck(b []byte) (bool, error) {
	if err := CheckByteRecord(b, 1); err != nil {
		return false, err
	}
	return b[0] == 1, nil
}
