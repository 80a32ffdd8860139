package job

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
)

// DigestSize is the size of a program or policy digest (SHA-256).
const DigestSize = sha256.Size

// programTag opens the digested text of a program (docs/protocol.md
// §3.1.1).
const programTag = "sperli program 1\x00"

// ProgramDigest is the digest of a program whose bytes have the SHA-256
// digest sum, run with args: SHA-256 of "sperli program 1" 0x00, sum,
// the number of arguments (u32) and each argument as its length (u32)
// and bytes, big-endian (docs/protocol.md §3.1.1).
func ProgramDigest(sum [DigestSize]byte, args []string) [DigestSize]byte {
	h := sha256.New()
	io.WriteString(h, programTag)
	h.Write(sum[:])
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(args)))
	h.Write(n[:])
	for _, a := range args {
		binary.BigEndian.PutUint32(n[:], uint32(len(a)))
		h.Write(n[:])
		io.WriteString(h, a)
	}
	var out [DigestSize]byte
	h.Sum(out[:0])
	return out
}

// FileProgramDigest is ProgramDigest of the bytes of the file at path,
// read as a stream (an executable of many MB is not held in memory).
func FileProgramDigest(path string, args []string) ([DigestSize]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return [DigestSize]byte{}, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return [DigestSize]byte{}, fmt.Errorf("reading %s: %w", path, err)
	}
	var sum [DigestSize]byte
	h.Sum(sum[:0])
	return ProgramDigest(sum, args), nil
}

// PolicyDigest is the digest of the slot's loss policy: SHA-256 of the
// text of docs/protocol.md §3.1.1 — the job's size and spares, the
// silence limit it was given, whether it checkpoints, and whether every
// slot runs one program.
func (j *Job) PolicyDigest() [DigestSize]byte {
	return sha256.Sum256([]byte(j.PolicyText()))
}

// PolicyText is the text PolicyDigest digests.
func (j *Job) PolicyText() string {
	return fmt.Sprintf("sperli policy 1\nsize=%d\nspares=%d\nsilence_ms=%d\ncheckpoint=%t\none_program=%t\n",
		j.Size, j.Spares, j.SilenceMS, j.CheckpointDir != "", j.OneProgram)
}

// DigestHex is a digest in lower-case hex.
func DigestHex(d []byte) string { return hex.EncodeToString(d) }
