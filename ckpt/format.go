package ckpt

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sperli/codes"
	"sperli/job"
	"sperli/pki"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The file formats of a checkpoint (docs/protocol.md §11.1): a rank's
// file (a 96-byte header and its state) and the COMMIT rank 0 signs, and
// the verdicts every rank derives from a round's table. Every function
// here is pure.

// Checkpoints (SPEC §9). The file formats are in docs/protocol.md §11.
const (
	FileMagic   = "SPCK"
	CommitMagic = "SPCM"
	Version     = 1
	HeaderLen   = 96
	CommitName  = "COMMIT"
)

// FileHeader is the 96-byte header of a rank's checkpoint file.
type FileHeader struct {
	Version uint8
	Job     string
	Epoch   uint64
	Rank    uint32
	Size    uint32
	Length  uint64
	Sum     [32]byte
}

func (h FileHeader) Encode() []byte {
	b := make([]byte, HeaderLen)
	copy(b, FileMagic)
	b[4] = h.Version
	copy(b[8:40], h.Job)
	binary.BigEndian.PutUint64(b[40:], h.Epoch)
	binary.BigEndian.PutUint32(b[48:], h.Rank)
	binary.BigEndian.PutUint32(b[52:], h.Size)
	binary.BigEndian.PutUint64(b[56:], h.Length)
	copy(b[64:96], h.Sum[:])
	return b
}

// DecodeFileHeader checks the structure of a checkpoint file's header.
func DecodeFileHeader(b []byte) (FileHeader, error) {
	var h FileHeader
	if len(b) < HeaderLen {
		return h, fmt.Errorf("file is %d bytes, shorter than the %d-byte header", len(b), HeaderLen)
	}
	if string(b[:4]) != FileMagic {
		return h, fmt.Errorf("magic is %q, want %q", b[:4], FileMagic)
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

// Commit is a decoded COMMIT: the epoch's SHA-256 of every rank's state.
type Commit struct {
	Job   string
	Epoch uint64
	Size  uint32
	Sums  [][32]byte
	Raw   []byte
}

func EncodeCommit(job string, epoch uint64, sums [][32]byte, key *pki.PrivateKey) ([]byte, error) {
	b := make([]byte, 0, 56+32*len(sums)+pki.SignatureSize)
	b = append(b, CommitMagic...)
	b = append(b, Version, 0, 0, 0)
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

// DecodeCommit checks a COMMIT's structure and signature.
func DecodeCommit(b []byte, pub *pki.PublicKey) (*Commit, error) {
	c, body, err := ParseCommit(b)
	if err != nil {
		return nil, err
	}
	if !pub.Verify(pki.DomainCommit, b[:body], b[body:]) {
		return nil, errors.New("COMMIT signature does not verify")
	}
	return c, nil
}

// ParseCommit checks a COMMIT's structure (length first, then magic,
// version, reserved bytes) and returns it and the length of its signed
// body; it does not check the signature.
func ParseCommit(b []byte) (*Commit, int, error) {
	if len(b) < 56+pki.SignatureSize || string(b[:4]) != CommitMagic {
		return nil, 0, errors.New("not a COMMIT")
	}
	if b[4] != Version {
		return nil, 0, fmt.Errorf("COMMIT version %d, want %d", b[4], Version)
	}
	if b[5] != 0 || b[6] != 0 || b[7] != 0 || binary.BigEndian.Uint32(b[52:]) != 0 {
		return nil, 0, errors.New("COMMIT reserved bytes are not zero")
	}
	size := binary.BigEndian.Uint32(b[48:])
	body := 56 + 32*int(size)
	if size == 0 || size > job.MaxSize || len(b) != body+pki.SignatureSize {
		return nil, 0, fmt.Errorf("COMMIT of %d bytes does not hold %d hashes and a signature", len(b), size)
	}
	c := &Commit{Job: string(b[8:40]), Epoch: binary.BigEndian.Uint64(b[40:]), Size: size, Raw: b}
	for i := 0; i < int(size); i++ {
		var s [32]byte
		copy(s[:], b[56+32*i:])
		c.Sums = append(c.Sums, s)
	}
	return c, body, nil
}

func OwnName(rank int) string { return fmt.Sprintf("rank-%d.ckpt", rank) }

func BuddyName(rank int) string { return fmt.Sprintf("rank-%d.ckpt.buddy", rank) }

// CheckBuddyHeader checks the header of a buddy copy being received at
// checkpoint: the file of rank of this job and epoch, as long as its
// transfer.
func CheckBuddyHeader(b []byte, job string, e uint64, rank, size int, n uint64) error {
	h, err := DecodeFileHeader(b)
	if err != nil {
		return err
	}
	switch {
	case h.Version != Version:
		return fmt.Errorf("header version %d, want %d", h.Version, Version)
	case h.Job != job || h.Epoch != e || h.Rank != uint32(rank) || h.Size != uint32(size):
		return fmt.Errorf("header names job %q epoch %d rank %d size %d, want %s, %d, %d, %d", h.Job, h.Epoch, h.Rank, h.Size, job, e, rank, size)
	case h.Length != n-HeaderLen:
		return fmt.Errorf("header says %d bytes of state, the transfer %d", h.Length, n-HeaderLen)
	}
	return nil
}

// RanksWith lists the ranks whose byte in table (one per rank) is x.
func RanksWith(table []byte, x byte) []string {
	var out []string
	for r, v := range table {
		if v == x {
			out = append(out, strconv.Itoa(r))
		}
	}
	return out
}

// BeginOutcome is the outcome of the begin round on every rank: nil to
// go on, else the same code everywhere; a rank that is itself the cause
// of H1625 returns its own error (it names the directory and the system's
// error), the others name it.
func BeginOutcome(table []byte, e uint64, rank int, ownErr error) error {
	if rs := RanksWith(table, BeginStorage); len(rs) > 0 {
		if table[rank] == BeginStorage && ownErr != nil {
			return ownErr
		}
		return &codes.Error{Code: codes.CheckpointStorage, Rank: -1, Msg: fmt.Sprintf("checkpoint of epoch %d: rank %s cannot use its checkpoint directory", e, strings.Join(rs, ", "))}
	}
	if rs := RanksWith(table, BeginTooBig); len(rs) > 0 {
		return &codes.Error{Code: codes.OutOfRange, Op: "checkpoint", Rank: -1, Msg: fmt.Sprintf("checkpoint of epoch %d: the state of rank %s is over the limit of %d bytes", e, strings.Join(rs, ", "), uint64(MaxState))}
	}
	if rs := RanksWith(table, BeginOpen); len(rs) > 0 {
		return &codes.Error{Code: codes.CheckpointOpen, Rank: -1, Msg: fmt.Sprintf("checkpoint of epoch %d: rank %s still has an open send or receive", e, strings.Join(rs, ", "))}
	}
	return nil
}

// CutText cuts s to at most n bytes on a rune boundary.
func CutText(s string, n int) string {
	for len(s) > n {
		_, k := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-k]
	}
	return s
}

// file status at resume, as one byte in the status table.
const (
	FileOK        = 0
	FileAbsent    = 1
	FileDamaged   = 2
	FileBadHeader = 3
)

// VerifyFile checks a checkpoint file (read from disk or fetched from a
// buddy) against the COMMIT's hash of rank and against the job: damaged
// when it is short, its magic or reserved bytes are wrong, or its state's
// length or SHA-256 is not its header's or not the COMMIT's; header when
// intact but its version, job, epoch, rank or size is not the COMMIT's.
func VerifyFile(b []byte, cm *Commit, rank int, job string) byte {
	h, err := DecodeFileHeader(b)
	if err != nil {
		return FileDamaged
	}
	state := b[HeaderLen:]
	sum := sha256.Sum256(state)
	if uint64(len(state)) != h.Length || sum != h.Sum || rank < 0 || rank >= len(cm.Sums) || sum != cm.Sums[rank] {
		return FileDamaged
	}
	if h.Version != Version || h.Job != job || h.Epoch != cm.Epoch || h.Rank != uint32(rank) || h.Size != cm.Size {
		return FileBadHeader
	}
	return FileOK
}

// StatusOutcome is the verdict of the resume status table on every rank:
// nil when every rank has a good copy of its state, else the code of the
// lowest rank without one.
func StatusOutcome(table []byte, epoch uint64, size int) error {
	for r := 0; r < size; r++ {
		o := table[2*r]
		b := byte(FileAbsent)
		if size > 1 {
			b = table[2*((r+1)%size)+1] // rank r's copy is kept by r+1
		}
		if o == FileOK || b == FileOK {
			continue
		}
		switch {
		case o == FileAbsent && b == FileAbsent:
			return &codes.Error{Code: codes.NoEpoch, Rank: r, Msg: fmt.Sprintf("resume: epoch %d: rank %d's file and its buddy copy are both missing", epoch, r)}
		case o == FileBadHeader || b == FileBadHeader:
			return &codes.Error{Code: codes.CheckpointHeader, Rank: r, Msg: fmt.Sprintf("resume: epoch %d: rank %d's file has a header that does not match the COMMIT or the job", epoch, r)}
		default:
			return &codes.Error{Code: codes.CheckpointDamaged, Rank: r, Msg: fmt.Sprintf("resume: epoch %d: rank %d's state is damaged and no buddy copy is good", epoch, r)}
		}
	}
	return nil
}

// RestoreOutcome is the verdict of the restore round on every rank: the
// code of the lowest rank whose copy from its buddy was bad or could not
// be written back; a rank whose own write-back failed returns its own
// error when the code is H1625.
func RestoreOutcome(table []byte, epoch uint64, rank int, ownErr error) error {
	for r, x := range table {
		switch x {
		case RestoreDamaged:
			return &codes.Error{Code: codes.CheckpointDamaged, Rank: r, Msg: fmt.Sprintf("resume: epoch %d: rank %d's copy from its buddy is damaged", epoch, r)}
		case RestoreHeader:
			return &codes.Error{Code: codes.CheckpointHeader, Rank: r, Msg: fmt.Sprintf("resume: epoch %d: rank %d's copy from its buddy has a header that does not match the COMMIT or the job", epoch, r)}
		case RestoreStorage:
			if table[rank] == RestoreStorage && ownErr != nil {
				return ownErr
			}
			return &codes.Error{Code: codes.CheckpointStorage, Rank: r, Msg: fmt.Sprintf("resume: epoch %d: rank %d could not write back its file", epoch, r)}
		}
	}
	return nil
}
