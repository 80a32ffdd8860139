package starlib_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sperli/starlib"
)

// runIn runs src as a program in dir (the rank's working directory) and
// returns what it printed and its error.
func runIn(t *testing.T, dir, src string) (string, error) {
	t.Helper()
	t.Chdir(dir)
	file := filepath.Join(t.TempDir(), "p.star")
	writeFile(t, file, src)
	var out bytes.Buffer
	err := starlib.Run(&starlib.Program{File: file, Stdout: &out})
	return out.String(), err
}

// TestFiles: read_file and write_file below the working directory.
func TestFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	abs := filepath.Join(dir, "sub", "abs.txt")
	out, err := runIn(t, dir, `
sperli.write_file("a.txt", "hello\nworld\n")
sperli.write_file("a.txt", "more\n", append=True)
print(sperli.read_file("a.txt").splitlines())
sperli.write_file("sub/b.bin", b"\x00\x01")
print(repr(sperli.read_file("./sub/b.bin", binary=True)))
sperli.write_file(`+"\""+abs+"\""+`, "abs")
print(sperli.read_file("sub/abs.txt"))
`)
	if err != nil {
		t.Fatal(err)
	}
	if want := "[\"hello\", \"world\", \"more\"]\nb\"\\x00\\x01\"\nabs\n"; out != want {
		t.Errorf("printed %q, want %q", out, want)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "hello\nworld\nmore\n" {
		t.Errorf("a.txt holds %q", b)
	}
}

// TestFileEscapesRefused: no "..", no absolute path elsewhere, no symbolic
// link that leads out of the working directory, for reading or writing;
// each refusal is H1616 and nothing outside is read or written.
func TestFileEscapesRefused(t *testing.T) {
	base := t.TempDir()
	dir, outside := filepath.Join(base, "wd"), filepath.Join(base, "outside")
	for _, d := range []string{dir, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(outside, "secret")
	writeFile(t, secret, "secret")
	for name, target := range map[string]string{
		"updir":     "..",
		"outdir":    outside,
		"outfile":   secret,
		"planted":   filepath.Join(outside, "new"),
		"rel-out":   "../outside/secret",
		"chain-dir": "updir",
	} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, call := range []string{
		`sperli.read_file("../outside/secret")`,
		`sperli.read_file("a/../../outside/secret")`,
		`sperli.read_file("..")`,
		`sperli.read_file("` + secret + `")`,
		`sperli.read_file("/etc/passwd")`,
		`sperli.read_file("updir/outside/secret")`,
		`sperli.read_file("outdir/secret")`,
		`sperli.read_file("outfile")`,
		`sperli.read_file("rel-out")`,
		`sperli.read_file("chain-dir/outside/secret")`,
		`sperli.write_file("../outside/secret", "x")`,
		`sperli.write_file("` + secret + `", "x")`,
		`sperli.write_file("outfile", "x")`,
		`sperli.write_file("outfile", "x", append=True)`,
		`sperli.write_file("outdir/secret", "x")`,
		`sperli.write_file("planted", "x")`,
		`sperli.write_file("updir/outside/new", "x")`,
	} {
		out, err := runIn(t, dir, "print("+call+")\n")
		if err == nil || !strings.Contains(err.Error(), "H1616") {
			t.Errorf("%s: printed %q, error %v; want H1616", call, out, err)
		}
	}
	if b, _ := os.ReadFile(secret); string(b) != "secret" {
		t.Errorf("the file outside was changed: %q", b)
	}
	if _, err := os.Lstat(filepath.Join(outside, "new")); err == nil {
		t.Errorf("a file was created outside the working directory")
	}
	// A link that stays inside is followed.
	writeFile(t, filepath.Join(dir, "real.txt"), "inside")
	if err := os.Symlink("real.txt", filepath.Join(dir, "alias")); err != nil {
		t.Fatal(err)
	}
	if out, err := runIn(t, dir, `print(sperli.read_file("alias"))`); err != nil || out != "inside\n" {
		t.Errorf("a link inside: %q, %v", out, err)
	}
}

func TestGetenvWtimeFormat(t *testing.T) {
	t.Setenv("SPERLI_TEST_GETENV", "v a l")
	out, err := runIn(t, t.TempDir(), `
print(sperli.getenv("SPERLI_TEST_GETENV"))
print(sperli.getenv("SPERLI_TEST_SURELY_UNSET"))
print(sperli.getenv("SPERLI_TEST_SURELY_UNSET", "dflt"))
t0 = sperli.wtime()
t1 = sperli.wtime()
print(type(t0), t0 >= 0, t1 >= t0)
print(sperli.format(3.14159, 2), sperli.format(2, 3), sperli.format(-0.5, 0), sperli.format(1e21, 1))
r = sperli.attempt(sperli.format, 1.0, 2)
print(r.ok, r.value)
`)
	if err != nil {
		t.Fatal(err)
	}
	want := "v a l\nNone\ndflt\nfloat True True\n3.14 2.000 -0 1000000000000000000000.0\nTrue 1.00\n"
	if out != want {
		t.Errorf("printed\n%s\nwant\n%s", out, want)
	}
	for _, bad := range []string{`sperli.format(1.5, -1)`, `sperli.format(1.5, 101)`, `sperli.format("1.5", 2)`, `sperli.wtime(1)`, `sperli.getenv()`} {
		if _, err := runIn(t, t.TempDir(), bad+"\n"); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
