package job

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// TestProgramDigestLayout: the digest is SHA-256 of the bytes
// docs/protocol.md §3.1.1 lays out, built here by hand.
func TestProgramDigestLayout(t *testing.T) {
	sum := sha256.Sum256([]byte("print('hi')\n"))
	args := []string{"--steps", "", "5"}
	var b bytes.Buffer
	b.WriteString("sperli program 1")
	b.WriteByte(0)
	b.Write(sum[:])
	binary.Write(&b, binary.BigEndian, uint32(len(args)))
	for _, a := range args {
		binary.Write(&b, binary.BigEndian, uint32(len(a)))
		b.WriteString(a)
	}
	if got, want := ProgramDigest(sum, args), sha256.Sum256(b.Bytes()); got != want {
		t.Fatalf("ProgramDigest = %x, want %x", got, want)
	}
}

// TestProgramDigestDiffers: another byte of the program, another
// argument, the same characters cut otherwise between arguments, or one
// argument more each give another digest; the file's digest is the
// bytes'.
func TestProgramDigestDiffers(t *testing.T) {
	a, b := sha256.Sum256([]byte("x = 1\n")), sha256.Sum256([]byte("x = 2\n"))
	base := ProgramDigest(a, []string{"ab", "c"})
	for name, d := range map[string][32]byte{
		"another program":      ProgramDigest(b, []string{"ab", "c"}),
		"another argument":     ProgramDigest(a, []string{"ab", "d"}),
		"arguments cut anew":   ProgramDigest(a, []string{"a", "bc"}),
		"one argument more":    ProgramDigest(a, []string{"ab", "c", ""}),
		"the arguments joined": ProgramDigest(a, []string{"abc"}),
	} {
		if d == base {
			t.Errorf("%s: the same digest %x", name, d)
		}
	}
	path := filepath.Join(t.TempDir(), "p.star")
	if err := os.WriteFile(path, []byte("x = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := FileProgramDigest(path, []string{"ab", "c"})
	if err != nil || got != base {
		t.Fatalf("FileProgramDigest = %x, %v, want %x", got, err, base)
	}
	if _, err := FileProgramDigest(filepath.Join(t.TempDir(), "none"), nil); err == nil {
		t.Fatal("FileProgramDigest of no file: no error")
	}
}

// TestPolicyDigest: each field of the loss policy changes the digest;
// the others (the rank, the join window, the checkpoint directory's
// path) do not.
func TestPolicyDigest(t *testing.T) {
	fresh := func() *Job {
		return &Job{Size: 4, Spares: 1, SilenceMS: 1000, CheckpointDir: "ckpt", OneProgram: true}
	}
	base := fresh()
	want := "sperli policy 1\nsize=4\nspares=1\nsilence_ms=1000\ncheckpoint=true\none_program=true\n"
	if got := base.PolicyText(); got != want {
		t.Fatalf("PolicyText = %q, want %q", got, want)
	}
	d := base.PolicyDigest()
	for name, edit := range map[string]func(j *Job){
		"size":        func(j *Job) { j.Size = 5 },
		"spares":      func(j *Job) { j.Spares = 0 },
		"silence":     func(j *Job) { j.SilenceMS = 0 },
		"checkpoints": func(j *Job) { j.CheckpointDir = "" },
		"one program": func(j *Job) { j.OneProgram = false },
	} {
		j := fresh()
		edit(j)
		if j.PolicyDigest() == d {
			t.Errorf("%s changed, the policy digest did not", name)
		}
	}
	for name, edit := range map[string]func(j *Job){
		"rank":                func(j *Job) { j.Rank = 3 },
		"join window":         func(j *Job) { j.JoinMS = 9000 },
		"checkpoint dir path": func(j *Job) { j.CheckpointDir = "/elsewhere/ckpt" },
	} {
		j := fresh()
		edit(j)
		if j.PolicyDigest() != d {
			t.Errorf("%s changed the policy digest", name)
		}
	}
}

// BenchmarkFileProgramDigest digests this test's own executable, as a Go
// rank's Init does with its own (docs/benchmarks.md: what one_program
// costs a Go or C rank's start).
func BenchmarkFileProgramDigest(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	st, err := os.Stat(exe)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(st.Size())
	for b.Loop() {
		if _, err := FileProgramDigest(exe, []string{"a", "b"}); err != nil {
			b.Fatal(err)
		}
	}
}
