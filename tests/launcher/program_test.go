package launcher

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// lastLine is the launcher's last line on standard error, its notes aside.
func lastLine(r result) string {
	l := lines(withoutNotes(r.Stderr))
	if len(l) == 0 {
		return ""
	}
	return l[len(l)-1]
}

// TestNeverMatches: a receive that can never match ends the job at once
// with H1617 naming it — from the rank itself with no send to itself
// pending, and from a rank that has finished — and the launcher's last
// line says so. (Were it to wait, the job would hang: nothing else ends
// it.)
func TestNeverMatches(t *testing.T) {
	for _, tc := range []struct {
		name, prog string
		last       string
	}{
		{"from itself", `def main():
    if comm.rank == 1:
        comm.recv(1, 5)
    comm.barrier()
`, `^sperli: rank 1 failed: p\.star:3:\d+: H1617: recv\(source 1, tag 5\) can never match: it is from this rank itself and no send to itself is pending \(send before you receive\); rank 0 ended by it \(H1612\)$`},
		{"from a finished rank", `def main():
    if comm.rank == 1:
        comm.recv(0, 3)
`, `^sperli: rank 1 failed: p\.star:3:\d+: H1617: recv: rank 0 has finished: recv\(0, 3\) can never be matched$`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "p.star"), tc.prog, 0o644)
			r := sperliRun(t, baseEnv, dir, "run", "-n", "2", "p.star")
			if r.Code != 1 {
				t.Errorf("exit status %d, want 1\n%v", r.Code, r)
			}
			if l := lastLine(r); !regexp.MustCompile(tc.last).MatchString(l) {
				t.Errorf("the launcher's last line %q, want %s\n%v", l, tc.last, r)
			}
		})
	}
}

// TestFilesConfined: in a job, sperli.read_file and write_file work below
// the ranks' working directory (--wdir) and refuse with H1616 a path with
// "..", an absolute path elsewhere and a symbolic link out of it; nothing
// outside is read or written. A refusal not caught by sperli.attempt ends
// the job, the launcher's last line naming it.
func TestFilesConfined(t *testing.T) {
	dir := t.TempDir()
	wd, outside := filepath.Join(dir, "wd"), filepath.Join(dir, "outside")
	for _, d := range []string{wd, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	secret := writeFile(t, filepath.Join(outside, "secret"), "secret", 0o644)
	if err := os.Symlink(secret, filepath.Join(wd, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(wd, "linkdir")); err != nil {
		t.Fatal(err)
	}
	prog := writeFile(t, filepath.Join(dir, "files.star"), `def main():
    sperli.write_file("out-%d.txt" % comm.rank, "rank %d\n" % comm.rank)
    print("read", sperli.read_file("out-%d.txt" % comm.rank).strip())
    for p in ["../outside/secret", "`+secret+`", "link", "linkdir/secret"]:
        print("read", p, sperli.attempt(sperli.read_file, p).code)
    for p in ["../outside/new", "`+filepath.Join(outside, "new")+`", "link", "linkdir/new"]:
        print("write", p, sperli.attempt(sperli.write_file, p, "x").code)
`, 0o644)
	r := sperliRun(t, baseEnv, dir, "run", "-n", "2", "--wdir", wd, prog)
	if r.Code != 0 {
		t.Fatalf("%v", r)
	}
	for rank := 0; rank < 2; rank++ {
		got := rankLines(r.Stdout, rank)
		if len(got) != 9 || got[0] != "read rank "+string(rune('0'+rank)) {
			t.Errorf("rank %d printed %q", rank, got)
			continue
		}
		for _, l := range got[1:] {
			if !strings.HasSuffix(l, " H1616") {
				t.Errorf("rank %d: %q, want H1616", rank, l)
			}
		}
	}
	if b, _ := os.ReadFile(secret); string(b) != "secret" {
		t.Errorf("the file outside the working directory holds %q", b)
	}
	if exists(filepath.Join(outside, "new")) {
		t.Errorf("a file was created outside the working directory")
	}

	esc := writeFile(t, filepath.Join(dir, "esc.star"), `def main():
    if comm.rank == 0:
        sperli.read_file("../outside/secret")
    comm.barrier()
`, 0o644)
	r = sperliRun(t, baseEnv, dir, "run", "-n", "2", "--wdir", wd, esc)
	last := regexp.MustCompile(`^sperli: rank 0 failed: .*esc\.star:3:\d+: H1616: .*\.\./outside/secret.*; rank 1 ended by it \(H1612\)$`)
	if r.Code != 1 || !last.MatchString(lastLine(r)) {
		t.Errorf("exit status %d and last line %q, want 1 and %v\n%v", r.Code, lastLine(r), last, r)
	}
	if strings.Contains(r.Stdout+r.Stderr, "secret\n") {
		t.Errorf("the secret was shown:\n%v", r)
	}
}

// TestLiveAbandonedMarked: with --live, the lines of a generation that a
// restart abandons were shown as they came; a mark follows them, and the
// next generation's lines come after it.
func TestLiveAbandonedMarked(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "gens.star"), `def main():
    comm.use_checkpoints()
    state = comm.resume()
    print("out gen %d rank %d" % (comm.incarnation, comm.rank))
    comm.checkpoint("one")
    comm.barrier()
    print("done gen %d rank %d" % (comm.incarnation, comm.rank))
`, 0o644)
	hostsFile := writeFile(t, filepath.Join(dir, "hosts"), "127.0.0.1\n127.0.0.2\n127.0.0.3\n", 0o644)
	r := sperliRun(t, withEnv("SPERLI_TEST_FAILURE_SCHEDULE=0:1"), dir, "run", "--live", "-n", "2", "--hosts", hostsFile, "--silence", "1000", "--checkpoint-dir", "ck", "gens.star")
	if r.Code != 0 {
		t.Fatalf("exit status %d, want 0 (one restart)\n%v", r.Code, r)
	}
	const mark = "--- generation 0 abandoned ---"
	out := lines(r.Stdout)
	at := -1
	for i, l := range out {
		if l == mark {
			if at >= 0 {
				t.Errorf("the mark shows twice:\n%s", r.Stdout)
			}
			at = i
		}
	}
	if at < 0 {
		t.Fatalf("no %q on stdout:\n%s", mark, r.Stdout)
	}
	if !slices.Contains(out[:at], "[rank 0] out gen 0 rank 0") {
		t.Errorf("rank 0's generation 0 line is not before the mark:\n%s", r.Stdout)
	}
	for i, l := range out {
		if strings.Contains(l, " gen 0 ") && i > at || strings.Contains(l, " gen 1 ") && i < at {
			t.Errorf("line %q on the wrong side of the mark:\n%s", l, r.Stdout)
		}
	}
	for _, w := range []string{"[rank 0] out gen 1 rank 0", "[rank 1] out gen 1 rank 1", "[rank 0] done gen 1 rank 0", "[rank 1] done gen 1 rank 1"} {
		if !slices.Contains(out[at+1:], w) {
			t.Errorf("no %q after the mark:\n%s", w, r.Stdout)
		}
	}
}

// TestProgramRefused: a .star program with a syntax or resolve error, in
// itself or in a module it loads, or loading a module that is not there,
// is refused by the launcher before any rank starts: one line naming
// file:line:col, exit status 2, no rank output. So is a --modules
// directory that is not there.
func TestProgramRefused(t *testing.T) {
	for _, tc := range []struct {
		name, prog string
		args       []string // between run and PROGRAM
		want       string   // the one line on stderr
	}{
		{"syntax", "def main():\n    x = = 1\n", nil, "sperli: p.star:2:9: got '=', want primary expression"},
		{"resolve", "def main():\n    print(total)\n", nil, "sperli: p.star:2:11: undefined: total"},
		{"in a module", "load(\"lib.star\", \"f\")\n", []string{"--modules", "mods"}, "sperli: mods/lib.star:2:12: undefined: y"},
		{"module missing", "load(\"gone.star\", \"f\")\n", []string{"--modules", "mods"}, `sperli: p.star:1:6: load: module "gone.star" not found in ., mods`},
		{"--modules missing", "print(1)\n", []string{"--modules", "mods:nodir"}, "sperli: --modules nodir: no such directory"},
		{"--modules a file", "print(1)\n", []string{"--modules", "p.star"}, "sperli: --modules p.star: not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "p.star"), tc.prog, 0o644)
			if err := os.Mkdir(filepath.Join(dir, "mods"), 0o755); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, "mods", "lib.star"), "def f(x):\n    return y\n", 0o644)
			args := append(append([]string{"run", "-n", "3"}, tc.args...), "p.star")
			r := sperliRun(t, baseEnv, dir, args...)
			if r.Code != 2 || r.Stderr != tc.want+"\n" || r.Stdout != "" {
				t.Errorf("sperli %q: exit status %d, stderr %q, stdout %q; want 2, %q and nothing", args, r.Code, r.Stderr, r.Stdout, tc.want)
			}
		})
	}
}
