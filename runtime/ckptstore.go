package runtime

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
)

// ckptStore is a rank's checkpoint directory DIR/<job>, opened as an
// os.Root below DIR: no name it resolves leaves DIR, so a symbolic link
// planted in the directory (an epoch directory, a file, the job directory
// itself pointing elsewhere) never receives data. Files are written to a
// fresh temporary name made with O_EXCL (a link already there is never
// followed: the create fails and another name is taken), then renamed
// over the final name (which replaces a link, never writes through it).
type ckptStore struct {
	path string // DIR/<job>, for messages
	root *os.Root
}

// openStore opens (making them as needed) dir and dir/job.
func openStore(dir, job string) (*ckptStore, error) {
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
	return &ckptStore{path: path, root: root}, nil
}

func (s *ckptStore) close() {
	if s != nil {
		s.root.Close()
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

func epochName(e uint64) string { return strconv.FormatUint(e, 10) }

// mkEpoch makes the directory of epoch e (or finds it), a real directory.
func (s *ckptStore) mkEpoch(e uint64) error {
	d := epochName(e)
	if err := s.root.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fixPath(err, s.path)
	}
	return fixPath(realDir(s.root, d), s.path)
}

// tmpFile is a file being written under a fresh temporary name.
type tmpFile struct {
	s          *ckptStore
	f          *os.File
	tmp, final string
	err        error // the first write error
}

// create starts writing epoch e's file name.
func (s *ckptStore) create(e uint64, name string) (*tmpFile, error) {
	return s.createIn(epochName(e), name)
}

// createIn starts writing the file name of directory dir (made by
// mkEpoch, or mkDir).
func (s *ckptStore) createIn(dir, name string) (*tmpFile, error) {
	final := filepath.Join(dir, name)
	var b [8]byte
	for try := 0; ; try++ {
		rand.Read(b[:])
		tmp := final + ".tmp." + hex.EncodeToString(b[:])
		f, err := s.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			return &tmpFile{s: s, f: f, tmp: tmp, final: final}, nil
		}
		if !errors.Is(err, fs.ErrExist) || try == 3 {
			return nil, fixPath(err, s.path)
		}
	}
}

// write appends b; after a failure it drops the rest (commit reports it).
func (t *tmpFile) write(b []byte) {
	if t.err == nil {
		_, t.err = t.f.Write(b)
	}
}

// commit syncs, closes and renames the file and syncs its directory; on
// any failure it leaves no file.
func (t *tmpFile) commit() error {
	err := t.err
	if err == nil {
		err = t.f.Sync()
	}
	if cerr := t.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = t.s.root.Rename(t.tmp, t.final)
	}
	if err != nil {
		t.s.root.Remove(t.tmp)
		return fixPath(err, t.s.path)
	}
	return t.s.syncDir(filepath.Dir(t.final))
}

// abort drops the file.
func (t *tmpFile) abort() {
	t.f.Close()
	t.s.root.Remove(t.tmp)
}

// write stores parts as epoch e's file name, durably (§11.1).
func (s *ckptStore) write(e uint64, name string, parts ...[]byte) error {
	t, err := s.create(e, name)
	if err != nil {
		return err
	}
	for _, p := range parts {
		t.write(p)
	}
	return t.commit()
}

func (s *ckptStore) syncDir(name string) error {
	d, err := s.root.Open(name)
	if err != nil {
		return fixPath(err, s.path)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return fixPath(err, s.path)
}

// read returns epoch e's file name; a link out of the directory, or
// anything but a regular file, reads as an error.
func (s *ckptStore) read(e uint64, name string) ([]byte, error) {
	return s.readIn(epochName(e), name)
}

// mkDir makes the directory dir of the store (or finds it), a real one.
func (s *ckptStore) mkDir(dir string) error {
	if err := s.root.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fixPath(err, s.path)
	}
	return fixPath(realDir(s.root, dir), s.path)
}

// readIn returns the file name of directory dir, as read does.
func (s *ckptStore) readIn(dir, name string) ([]byte, error) {
	p := filepath.Join(dir, name)
	fi, err := s.root.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &os.PathError{Op: "read", Path: p, Err: errors.New("not a regular file")}
	}
	return s.root.ReadFile(p)
}

func (s *ckptStore) remove(e uint64, name string) {
	s.root.Remove(filepath.Join(epochName(e), name))
}

// removeDir removes epoch e's directory if it is empty.
func (s *ckptStore) removeDir(e uint64) { s.root.Remove(epochName(e)) }

func (s *ckptStore) removeAll(e uint64) { s.root.RemoveAll(epochName(e)) }

// epochs lists the epoch directories (real directories, epoch > 0).
func (s *ckptStore) epochs() []uint64 {
	d, err := s.root.Open(".")
	if err != nil {
		return nil
	}
	defer d.Close()
	entries, _ := d.ReadDir(-1)
	var out []uint64
	for _, x := range entries {
		if n, err := strconv.ParseUint(x.Name(), 10, 64); err == nil && x.IsDir() && n > 0 && x.Name() == epochName(n) {
			out = append(out, n)
		}
	}
	return out
}
