package ckpt

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func openT(t *testing.T) (*Store, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := OpenStore(dir, "job1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, dir
}

// TestWriteIsDurableAndWhole: a file written is read back whole, and no
// temporary name is left beside it.
func TestWriteIsDurableAndWhole(t *testing.T) {
	s, dir := openT(t)
	if err := s.MkEpoch(3); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(3, "rank-0.ckpt", []byte("head"), []byte("state")); err != nil {
		t.Fatal(err)
	}
	b, err := s.Read(3, "rank-0.ckpt")
	if err != nil || string(b) != "headstate" {
		t.Fatalf("Read = %q, %v; want headstate", b, err)
	}
	names, _ := os.ReadDir(filepath.Join(dir, "job1", "3"))
	if len(names) != 1 || names[0].Name() != "rank-0.ckpt" {
		t.Fatalf("epoch directory holds %v, want only rank-0.ckpt", names)
	}
}

// TestAbortLeavesNothing: a file aborted, or one whose write failed,
// leaves no file, final or temporary.
func TestAbortLeavesNothing(t *testing.T) {
	s, dir := openT(t)
	if err := s.MkEpoch(1); err != nil {
		t.Fatal(err)
	}
	tf, err := s.Create(1, "x")
	if err != nil {
		t.Fatal(err)
	}
	tf.Write([]byte("half"))
	tf.Abort()
	tf, err = s.Create(1, "y")
	if err != nil {
		t.Fatal(err)
	}
	tf.f.Close() // the next write fails
	tf.Write([]byte("lost"))
	if err := tf.Commit(); err == nil {
		t.Fatal("Commit after a failed write = nil, want its error")
	}
	if names, _ := os.ReadDir(filepath.Join(dir, "job1", "1")); len(names) != 0 {
		t.Fatalf("epoch directory holds %v after an abort and a failed commit, want nothing", names)
	}
}

// TestLinksReceiveNothing: a symbolic link planted as the job directory,
// an epoch directory or a file never receives data: the open, the epoch
// and the read refuse it, and a write replaces the link.
func TestLinksReceiveNothing(t *testing.T) {
	dir, away := t.TempDir(), t.TempDir()
	if err := os.Symlink(away, filepath.Join(dir, "job1")); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenStore(dir, "job1"); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("OpenStore on a linked job directory = %v, want a refusal naming the link", err)
	}
	s, dir := openT(t)
	if err := os.Symlink(away, filepath.Join(dir, "job1", "2")); err != nil {
		t.Fatal(err)
	}
	if err := s.MkEpoch(2); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "job1", "2")) {
		t.Fatalf("MkEpoch on a linked epoch = %v, want a refusal naming its full path", err)
	}
	if err := s.MkEpoch(4); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(away, "secret")
	os.WriteFile(target, []byte("keep"), 0o600)
	if err := os.Symlink(target, filepath.Join(dir, "job1", "4", "f")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(4, "f"); err == nil {
		t.Fatal("Read of a link = nil error, want a refusal")
	}
	if err := s.Write(4, "f", []byte("new")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Fatalf("the link's target holds %q after a write, want it untouched", b)
	}
	if b, err := s.Read(4, "f"); err != nil || string(b) != "new" {
		t.Fatalf("Read after the write = %q, %v; want new", b, err)
	}
}

// TestEpochsListsRealEpochs: only real directories named by a positive
// epoch in its canonical form count.
func TestEpochsListsRealEpochs(t *testing.T) {
	s, dir := openT(t)
	for _, e := range []uint64{1, 7, 12} {
		if err := s.MkEpoch(e); err != nil {
			t.Fatal(err)
		}
	}
	root := filepath.Join(dir, "job1")
	os.Mkdir(filepath.Join(root, "0"), 0o700)
	os.Mkdir(filepath.Join(root, "007"), 0o700)
	os.Mkdir(filepath.Join(root, "queues"), 0o700)
	os.WriteFile(filepath.Join(root, "9"), nil, 0o600)
	os.Symlink(filepath.Join(root, "7"), filepath.Join(root, "8"))
	got := s.Epochs()
	slices.Sort(got)
	if !slices.Equal(got, []uint64{1, 7, 12}) {
		t.Fatalf("Epochs = %v, want [1 7 12]", got)
	}
	s.RemoveAll(7)
	if got := s.Epochs(); slices.Contains(got, 7) {
		t.Fatalf("Epochs after RemoveAll(7) = %v", got)
	}
}
