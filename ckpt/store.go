// Package ckpt is the storage of Sperli's checkpoints (SPEC §9,
// docs/protocol.md §11): a rank's checkpoint directory as an os.Root no
// name leaves, and files written durably under a temporary name, then
// renamed. The runtime's checkpoints and the work queue's logs (package
// workq) are written through it.
package ckpt

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// Store is a rank's checkpoint directory DIR/<job>, opened as an
// os.Root below DIR: no name it resolves leaves DIR, so a symbolic link
// planted in the directory (an epoch directory, a file, the job directory
// itself pointing elsewhere) never receives data. Files are written to a
// fresh temporary name made with O_EXCL (a link already there is never
// followed: the create fails and another name is taken), then renamed
// over the final name (which replaces a link, never writes through it).
type Store struct {
	Path string // DIR/<job>, for messages
	Root *os.Root
}

// OpenStore opens (making them as needed) dir and dir/job.
func OpenStore(dir, job string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	top, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer top.Close()
	path := filepath.Join(dir, job)
	if err := top.Mkdir(job, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fixPath(err, dir)
	}
	if err := realDir(top, job); err != nil {
		return nil, fixPath(err, dir)
	}
	root, err := top.OpenRoot(job)
	if err != nil {
		return nil, fixPath(err, dir)
	}
	return &Store{Path: path, Root: root}, nil
}

// Close closes the store; a nil store is closed already.
func (s *Store) Close() {
	if s != nil {
		s.Root.Close()
	}
}

// realDir fails unless name in r is a directory (not a link to one).
func realDir(r *os.Root, name string) error {
	fi, err := r.Lstat(name)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		what := "a file"
		if fi.Mode()&fs.ModeSymlink != 0 {
			what = "a symbolic link"
		}
		return &os.PathError{Op: "mkdir", Path: name, Err: errors.New("is " + what + ", not a directory")}
	}
	return nil
}

// fixPath makes the path of an error of r full (r's names are relative).
func fixPath(err error, base string) error {
	var pe *os.PathError
	if errors.As(err, &pe) && !filepath.IsAbs(pe.Path) {
		return &os.PathError{Op: pe.Op, Path: filepath.Join(base, pe.Path), Err: pe.Err}
	}
	var le *os.LinkError
	if errors.As(err, &le) && !filepath.IsAbs(le.New) {
		return &os.PathError{Op: le.Op, Path: filepath.Join(base, le.New), Err: le.Err}
	}
	return err
}

// EpochName is the name of epoch e's directory: its decimal number.
func EpochName(e uint64) string { return strconv.FormatUint(e, 10) }

// MkEpoch makes the directory of epoch e (or finds it), a real directory.
func (s *Store) MkEpoch(e uint64) error {
	d := EpochName(e)
	if err := s.Root.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fixPath(err, s.Path)
	}
	return fixPath(realDir(s.Root, d), s.Path)
}

// Temp is a file being written under a fresh temporary name.
type Temp struct {
	s          *Store
	f          *os.File
	tmp, final string
	err        error // the first write error
}

// Create starts writing epoch e's file name.
func (s *Store) Create(e uint64, name string) (*Temp, error) {
	return s.CreateIn(EpochName(e), name)
}

// CreateIn starts writing the file name of directory dir (made by
// mkEpoch, or mkDir).
func (s *Store) CreateIn(dir, name string) (*Temp, error) {
	final := filepath.Join(dir, name)
	var b [8]byte
	for try := 0; ; try++ {
		rand.Read(b[:])
		tmp := final + ".tmp." + hex.EncodeToString(b[:])
		f, err := s.Root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			return &Temp{s: s, f: f, tmp: tmp, final: final}, nil
		}
		if !errors.Is(err, fs.ErrExist) || try == 3 {
			return nil, fixPath(err, s.Path)
		}
	}
}

// Write appends b; after a failure it drops the rest (commit reports it).
func (t *Temp) Write(b []byte) {
	if t.err == nil {
		_, t.err = t.f.Write(b)
	}
}

// Commit syncs, closes and renames the file and syncs its directory; on
// any failure it leaves no file.
func (t *Temp) Commit() error {
	err := t.err
	if err == nil {
		err = t.f.Sync()
	}
	if cerr := t.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = t.s.Root.Rename(t.tmp, t.final)
	}
	if err != nil {
		t.s.Root.Remove(t.tmp)
		return fixPath(err, t.s.Path)
	}
	return t.s.SyncDir(filepath.Dir(t.final))
}

// Abort drops the file.
func (t *Temp) Abort() {
	t.f.Close()
	t.s.Root.Remove(t.tmp)
}

// Write stores parts as epoch e's file name, durably (§11.1).
func (s *Store) Write(e uint64, name string, parts ...[]byte) error {
	t, err := s.Create(e, name)
	if err != nil {
		return err
	}
	for _, p := range parts {
		t.Write(p)
	}
	return t.Commit()
}

// SyncDir syncs the directory name of the store.
func (s *Store) SyncDir(name string) error {
	d, err := s.Root.Open(name)
	if err != nil {
		return fixPath(err, s.Path)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return fixPath(err, s.Path)
}

// Read returns epoch e's file name; a link out of the directory, or
// anything but a regular file, reads as an error.
func (s *Store) Read(e uint64, name string) ([]byte, error) {
	return s.ReadIn(EpochName(e), name)
}

// MkDir makes the directory dir of the store (or finds it), a real one.
func (s *Store) MkDir(dir string) error {
	if err := s.Root.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fixPath(err, s.Path)
	}
	return fixPath(realDir(s.Root, dir), s.Path)
}

// ReadIn returns the file name of directory dir, as read does.
func (s *Store) ReadIn(dir, name string) ([]byte, error) {
	p := filepath.Join(dir, name)
	fi, err := s.Root.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &os.PathError{Op: "read", Path: p, Err: errors.New("not a regular file")}
	}
	return s.Root.ReadFile(p)
}

// OpenAppend opens the file name of directory dir to append to.
func (s *Store) OpenAppend(dir, name string) (*os.File, error) {
	f, err := s.Root.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_APPEND, 0)
	return f, fixPath(err, s.Path)
}

// Remove removes epoch e's file name, if there is one.
func (s *Store) Remove(e uint64, name string) {
	s.Root.Remove(filepath.Join(EpochName(e), name))
}

// RemoveDir removes epoch e's directory if it is empty.
func (s *Store) RemoveDir(e uint64) { s.Root.Remove(EpochName(e)) }

// RemoveAll removes epoch e's directory and everything in it.
func (s *Store) RemoveAll(e uint64) { s.Root.RemoveAll(EpochName(e)) }

// Epochs lists the epoch directories (real directories, epoch > 0).
func (s *Store) Epochs() []uint64 {
	d, err := s.Root.Open(".")
	if err != nil {
		return nil
	}
	defer d.Close()
	entries, _ := d.ReadDir(-1)
	var out []uint64
	for _, x := range entries {
		if n, err := strconv.ParseUint(x.Name(), 10, 64); err == nil && x.IsDir() && n > 0 && x.Name() == EpochName(n) {
			out = append(out, n)
		}
	}
	return out
}
