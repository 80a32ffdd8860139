package starlib

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.starlark.net/resolve"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

var testPredeclared = starlark.StringDict{"array": Array}

// run initialises prog and returns the value of its global "result".
func run(t *testing.T, prog *starlark.Program) starlark.Value {
	t.Helper()
	globals, err := prog.Init(&starlark.Thread{Name: "test"}, testPredeclared)
	if err != nil {
		t.Fatalf("Init(%s): %v", prog.Filename(), err)
	}
	return globals["result"]
}

func progFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestCompileCache(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "compiled")
	src := []byte("result = array.size('int64') * 5\n")

	prog, hit, err := Compile("p.star", src, testPredeclared.Has, dir, "salt")
	if err != nil || hit {
		t.Fatalf("first Compile = hit %v, err %v, want a miss", hit, err)
	}
	if got := run(t, prog); got != starlark.MakeInt(40) {
		t.Errorf("result = %v, want 40", got)
	}
	files := progFiles(t, dir)
	if len(files) != 1 || !strings.HasSuffix(files[0], ".prog") {
		t.Fatalf("cache holds %v, want one .prog file", files)
	}
	if fi, err := os.Stat(files[0]); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("cache file mode = %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("cache directory mode = %v (%v), want 0700", fi.Mode().Perm(), err)
	}

	prog, hit, err = Compile("p.star", src, testPredeclared.Has, dir, "salt")
	if err != nil || !hit {
		t.Fatalf("second Compile = hit %v, err %v, want a hit", hit, err)
	}
	if got := run(t, prog); got != starlark.MakeInt(40) {
		t.Errorf("cached result = %v, want 40", got)
	}
	if prog.Filename() != "p.star" {
		t.Errorf("cached Filename() = %q, want p.star", prog.Filename())
	}

	// Anything in the key that changes is a miss.
	for _, tt := range []struct {
		name, filename, src, salt string
	}{
		{"source", "p.star", "result = 41\n", "salt"},
		{"filename", "q.star", string(src), "salt"},
		{"salt", "p.star", string(src), "other salt"},
	} {
		_, hit, err := Compile(tt.filename, []byte(tt.src), testPredeclared.Has, dir, tt.salt)
		if err != nil || hit {
			t.Errorf("Compile with a changed %s = hit %v, err %v, want a miss", tt.name, hit, err)
		}
	}
	prog, hit, err = Compile("p.star", []byte("result = 41\n"), testPredeclared.Has, dir, "salt")
	if err != nil || !hit {
		t.Fatalf("Compile of the changed source again = hit %v, err %v, want a hit", hit, err)
	}
	if got := run(t, prog); got != starlark.MakeInt(41) {
		t.Errorf("result = %v, want 41", got)
	}
	if n := len(progFiles(t, dir)); n != 4 {
		t.Errorf("cache holds %d files, want 4 (no temporary files left)", n)
	}
}

func TestCompileNoCache(t *testing.T) {
	for range 2 {
		prog, hit, err := Compile("p.star", []byte("result = 1\n"), nil, "", "")
		if err != nil || hit {
			t.Fatalf("Compile without a cache = hit %v, err %v, want a miss", hit, err)
		}
		if got := run(t, prog); got != starlark.MakeInt(1) {
			t.Errorf("result = %v, want 1", got)
		}
	}
}

func TestCompileCorruptCache(t *testing.T) {
	src := []byte("def f(n):\n    return n * 2\nresult = f(21)\n")
	corruptions := []struct {
		name   string
		change func([]byte) []byte
	}{
		{"empty", func([]byte) []byte { return nil }},
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }},
		{"flipped bit", func(b []byte) []byte { b[len(b)-3] ^= 0x10; return b }},
		{"garbage", func([]byte) []byte { return []byte("not a program at all, but long enough to pass for a header") }},
		{"bare starlark form", func(b []byte) []byte { return b[len(cacheMagic)+32:] }},
	}
	for _, tt := range corruptions {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if _, _, err := Compile("p.star", src, nil, dir, ""); err != nil {
				t.Fatal(err)
			}
			path := progFiles(t, dir)[0]
			good, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, tt.change(append([]byte(nil), good...)), 0o600); err != nil {
				t.Fatal(err)
			}
			prog, hit, err := Compile("p.star", src, nil, dir, "")
			if err != nil || hit {
				t.Fatalf("Compile over a damaged cache file = hit %v, err %v, want a miss", hit, err)
			}
			if got := run(t, prog); got != starlark.MakeInt(42) {
				t.Errorf("result = %v, want 42", got)
			}
			if again, _ := os.ReadFile(path); string(again) != string(good) {
				t.Errorf("damaged cache file was not rewritten")
			}
			if _, hit, err := Compile("p.star", src, nil, dir, ""); err != nil || !hit {
				t.Errorf("Compile after the rewrite = hit %v, err %v, want a hit", hit, err)
			}
		})
	}
}

func TestCompileUnwritableCache(t *testing.T) {
	// A cache directory that cannot be made is no error: the cache is best effort.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	prog, hit, err := Compile("p.star", []byte("result = 3\n"), nil, filepath.Join(file, "sub"), "")
	if err != nil || hit {
		t.Fatalf("Compile with an unusable cache = hit %v, err %v, want a miss", hit, err)
	}
	if got := run(t, prog); got != starlark.MakeInt(3) {
		t.Errorf("result = %v, want 3", got)
	}
}

func TestCompileConcurrent(t *testing.T) {
	dir := t.TempDir()
	src := []byte("result = 7\n")
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			_, _, err := Compile("p.star", src, nil, dir, "")
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if files := progFiles(t, dir); len(files) != 1 {
		t.Errorf("cache holds %v, want one file", files)
	}
}

func TestCompileErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		src, want string
		check     func(error) bool
	}{
		{"x = = 1\n", "bad.star:1:5: got '=', want primary expression", func(err error) bool {
			var e syntax.Error
			return errors.As(err, &e)
		}},
		{"x = 1\nprint(nope)\n", "bad.star:2:7: undefined: nope", func(err error) bool {
			var e resolve.ErrorList
			return errors.As(err, &e)
		}},
		{"x = 1\nreturn x\n", "bad.star:2:1: return statement not within a function", func(err error) bool {
			var e resolve.ErrorList
			return errors.As(err, &e)
		}},
	}
	for _, tt := range tests {
		prog, hit, err := Compile("bad.star", []byte(tt.src), nil, dir, "")
		if err == nil || prog != nil || hit {
			t.Errorf("Compile(%q) = %v, %v, %v, want an error", tt.src, prog, hit, err)
			continue
		}
		if err.Error() != tt.want || !tt.check(err) {
			t.Errorf("Compile(%q) error = %q (%T), want %q", tt.src, err, err, tt.want)
		}
	}
	if files := progFiles(t, dir); len(files) != 0 {
		t.Errorf("failed compilations left %v in the cache", files)
	}
}

func TestCompileDialect(t *testing.T) {
	tests := []struct {
		name, src string
		want      string
	}{
		{"while", "i = 0\nwhile i < 5:\n    i += 1\nresult = i\n", "5"},
		{"recursion", "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\nresult = fib(15)\n", "610"},
		{"set", "s = set([1, 2, 2, 3])\ns.add(4)\nresult = len(s)\n", "4"},
		{"top-level for", "result = 0\nfor i in range(4):\n    result += i\n", "6"},
		{"top-level if", "if 1 < 2:\n    result = 'yes'\nelse:\n    result = 'no'\n", `"yes"`},
		{"global reassignment", "result = 1\nresult = 2\nresult = result * 3\n", "6"},
		{"top-level while", "n = 10\nwhile n > 1:\n    n = n // 2\nresult = n\n", "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prog, _, err := Compile(tt.name+".star", []byte(tt.src), testPredeclared.Has, t.TempDir(), "")
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			if got := run(t, prog).String(); got != tt.want {
				t.Errorf("result = %s, want %s", got, tt.want)
			}
			// The same programs run by ExecFileOptions with the dialect.
			globals, err := starlark.ExecFileOptions(FileOptions, &starlark.Thread{}, tt.name+".star", tt.src, testPredeclared)
			if err != nil {
				t.Fatalf("ExecFileOptions: %v", err)
			}
			if got := globals["result"].String(); got != tt.want {
				t.Errorf("ExecFileOptions result = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestCacheKey(t *testing.T) {
	base := cacheKey("a.star", []byte("x"), "s")
	if len(base) != 64 {
		t.Errorf("cacheKey = %q, want 64 hex digits", base)
	}
	if cacheKey("a.star", []byte("x"), "s") != base {
		t.Errorf("cacheKey is not deterministic")
	}
	// Fields are delimited: moving bytes between them changes the key.
	for _, k := range []string{
		cacheKey("a.sta", []byte("rx"), "s"),
		cacheKey("a.star", []byte(""), "xs"),
		cacheKey("a.star", []byte("x"), ""),
	} {
		if k == base {
			t.Errorf("cacheKey collision for shifted fields")
		}
	}
	tag := formatTag()
	t.Logf("format tag: %q", tag)
	if !strings.Contains(tag, "compiled ") || !strings.Contains(tag, "Recursion:true") {
		t.Errorf("formatTag() = %q, want the compiled form version and the options", tag)
	}
}

func TestDefaultCacheDir(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/tmp/xdg-cache")
	t.Setenv("HOME", "/home/someone")
	if dir := DefaultCacheDir(); dir != filepath.Join("/tmp/xdg-cache", "sperli", "compiled") {
		t.Errorf("DefaultCacheDir() = %q, want /tmp/xdg-cache/sperli/compiled", dir)
	}
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "")
	if dir := DefaultCacheDir(); dir != "" {
		t.Errorf("DefaultCacheDir() without a home = %q, want \"\"", dir)
	}
}
