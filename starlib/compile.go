package starlib

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"sync"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// FileOptions are the Starlark dialect of rank programs (SPEC §14): while
// loops, recursion, sets, top-level if/for/while and reassignment of global
// names are allowed, because rank programs are programs, not configuration.
var FileOptions = &syntax.FileOptions{
	Set:             true,
	While:           true,
	TopLevelControl: true,
	GlobalReassign:  true,
	Recursion:       true,
}

// cacheMagic begins every cache file. It is followed by the SHA-256 of the
// rest of the file, which is a program in starlark-go's compiled form.
// The checksum keeps a damaged file from being decoded: starlark-go decodes
// some damaged programs without complaint and prints a stack trace for others.
const cacheMagic = "sperli-prog/1\n"

// Compile parses, resolves and compiles the Starlark source src of the file
// filename in the dialect FileOptions. isPredeclared reports the names the
// program will be given besides starlark.Universe, as for
// starlark.SourceProgramOptions; nil means none.
//
// When cacheDir is not empty, Compile first looks in cacheDir for a program
// compiled earlier from the same source under the same key and returns it
// with hit true. The key is a SHA-256 of the starlark-go version and compiled
// form version, FileOptions, the names of starlark.Universe, filename, src and
// salt. Because Compile cannot enumerate isPredeclared, the caller must put
// into salt everything else that changes how the program compiles, at least
// the sorted names of the predeclared values. On a miss, Compile compiles src
// and stores the program as cacheDir/<key>.prog (directory mode 0700, file
// mode 0600, written to a temporary file and renamed, so concurrent ranks on
// one host are safe). The cache is best effort: a cache file that cannot be
// read or is damaged is ignored and rewritten, and a failure to write the
// cache is not reported.
//
// A syntax or resolve error is returned unchanged, as the error of
// starlark.SourceProgramOptions (a syntax.Error or resolve.ErrorList whose
// text begins file:line:col), and nothing is cached for it. Compile is safe
// for concurrent use.
func Compile(filename string, src []byte, isPredeclared func(string) bool, cacheDir, salt string) (prog *starlark.Program, hit bool, err error) {
	if isPredeclared == nil {
		// starlark-go's resolver calls it unchecked.
		isPredeclared = func(string) bool { return false }
	}
	var path string
	if cacheDir != "" {
		path = filepath.Join(cacheDir, cacheKey(filename, src, salt)+".prog")
		if prog := readCached(path, filename); prog != nil {
			return prog, true, nil
		}
	}
	_, prog, err = starlark.SourceProgramOptions(FileOptions, filename, src, isPredeclared)
	if err != nil {
		return nil, false, err
	}
	if path != "" {
		writeCached(cacheDir, path, prog)
	}
	return prog, false, nil
}

// DefaultCacheDir returns the directory of compiled modules under the user's
// cache directory (os.UserCacheDir()/sperli/compiled), or "" when the user
// has none.
func DefaultCacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil || dir == "" {
		return ""
	}
	return filepath.Join(dir, "sperli", "compiled")
}

// cacheKey returns the hex SHA-256 naming the cache file of a compilation.
func cacheKey(filename string, src []byte, salt string) string {
	h := sha256.New()
	field := func(b []byte) {
		// Length-prefixed, so no two different field lists hash alike.
		var n [binary.MaxVarintLen64]byte
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))])
		h.Write(b)
	}
	field([]byte(formatTag()))
	field([]byte(filename))
	field(src)
	field([]byte(salt))
	return hex.EncodeToString(h.Sum(nil))
}

// formatTag describes everything of this binary that shapes a compiled
// program: the version of starlark-go and of its compiled form, the
// dialect and the universal names.
var formatTag = sync.OnceValue(func() string {
	module := "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "go.starlark.net" {
				if dep.Replace != nil {
					dep = dep.Replace
				}
				module = dep.Version + " " + dep.Sum
			}
		}
	}
	universe := make([]string, 0, len(starlark.Universe))
	for name := range starlark.Universe {
		universe = append(universe, name)
	}
	sort.Strings(universe)
	return fmt.Sprintf("%s starlark-go %s compiled %d options %+v universe %q",
		cacheMagic, module, starlark.CompilerVersion, *FileOptions, universe)
})

// readCached returns the program stored at path, or nil when there is none
// or it is unreadable, damaged or not for filename.
func readCached(path, filename string) *starlark.Program {
	data, err := os.ReadFile(path)
	if err != nil || len(data) < len(cacheMagic)+sha256.Size || string(data[:len(cacheMagic)]) != cacheMagic {
		return nil
	}
	sum, body := data[len(cacheMagic):len(cacheMagic)+sha256.Size], data[len(cacheMagic)+sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil
	}
	prog, err := starlark.CompiledProgram(bytes.NewReader(body))
	if err != nil || prog.Filename() != filename {
		return nil
	}
	return prog
}

// writeCached stores prog at path, ignoring failure.
func writeCached(dir, path string, prog *starlark.Program) {
	var body bytes.Buffer
	if err := prog.Write(&body); err != nil {
		return
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return
	}
	f, err := os.CreateTemp(dir, ".tmp-*.prog") // mode 0600
	if err != nil {
		return
	}
	sum := sha256.Sum256(body.Bytes())
	_, err = f.WriteString(cacheMagic)
	if err == nil {
		_, err = f.Write(sum[:])
	}
	if err == nil {
		_, err = f.Write(body.Bytes())
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
}
