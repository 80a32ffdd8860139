package launcher

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sperli/tests/internal/testbin"
)

// mixedJob writes two programs that differ in one byte, a.star and
// b.star, each printing which it is, and a wrapper PROGRAM that runs
// `sperli rank` in every slot: b.star (or a.star with more arguments,
// args) in slot odd, a.star in the others. The launcher starts one
// PROGRAM everywhere; what runs is not one program.
func mixedJob(t *testing.T, odd int, oddProg string, oddArgs string) (dir, wrapper string) {
	t.Helper()
	dir = t.TempDir()
	writeFile(t, filepath.Join(dir, "a.star"), "print('ran a')\n", 0o644)
	writeFile(t, filepath.Join(dir, "b.star"), "print('ran b')\n", 0o644)
	script := fmt.Sprintf(`#!/bin/sh
if [ "$SPERLI_RANK" = %d ]; then exec '%s' rank '%s/%s' %s; fi
exec '%s' rank '%s/a.star'
`, odd, sperli, dir, oddProg, oddArgs, sperli, dir)
	wrapper = writeFile(t, filepath.Join(dir, "wrapper.sh"), script, 0o755)
	return dir, wrapper
}

// wantRefused checks a job that ended for a difference of programs or
// policies: exit 1, an H1628 line naming it, and no output of the
// program at all.
func wantRefused(t *testing.T, r result, about string) {
	t.Helper()
	if r.Code != 1 {
		t.Fatalf("exit %d, want 1\n%v", r.Code, r)
	}
	if !regexp.MustCompile(`H1628: .*` + regexp.QuoteMeta(about) + `: slot \d+'s digest [0-9a-f]{64}, slot \d+'s [0-9a-f]{64}`).MatchString(r.Stderr) {
		t.Fatalf("no H1628 line saying %q with both digests\n%v", about, r)
	}
	if strings.Contains(r.Stdout, "ran ") {
		t.Fatalf("the program ran (output %q) in a job whose slots differ\n%v", r.Stdout, r)
	}
}

// TestProgramMismatch: three ranks of one PROGRAM, a wrapper whose slot
// 1 runs another .star file, or the same file with another argument: the
// join refuses it (H1628) before any rank runs its program; the same
// wrapper with one program everywhere runs.
func TestProgramMismatch(t *testing.T) {
	for _, tc := range []struct{ name, prog, args string }{
		{"another file", "b.star", ""},
		{"another argument", "a.star", "extra"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, wrapper := mixedJob(t, 1, tc.prog, tc.args)
			r := sperliRun(t, withEnv(), dir, "run", "-n", "3", wrapper)
			wantRefused(t, r, "run different programs or arguments")
		})
	}
	dir, wrapper := mixedJob(t, 1, "a.star", "")
	r := sperliRun(t, withEnv(), dir, "run", "-n", "3", wrapper)
	if r.Code != 0 || strings.Count(r.Stdout, "ran a") != 3 {
		t.Fatalf("one program in every slot: exit %d, want 0 and three lines\n%v", r.Code, r)
	}
}

// TestSpareProgramMismatch: a spare is checked as a rank is: with two
// ranks and one spare whose program differs, the job ends in the join
// with H1628 and no output.
func TestSpareProgramMismatch(t *testing.T) {
	dir, wrapper := mixedJob(t, 2, "b.star", "")
	r := sperliRun(t, withEnv(), dir, "run", "-n", "2", "--spares", "1", wrapper)
	wantRefused(t, r, "run different programs or arguments")
}

// TestPolicyMismatch: rank 1's description is given another silence
// limit on its way (a wrapper edits the line): the loss policies differ,
// and the join refuses the job with H1628 before any output.
func TestPolicyMismatch(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.star"), "print('ran a')\n", 0o644)
	script := fmt.Sprintf(`#!/bin/sh
if [ "$SPERLI_RANK" = 1 ]; then
	{ IFS= read -r line; printf '%%s\n' "$line" | sed 's/"silence_ms":1000/"silence_ms":1500/'; exec cat; } | '%s' rank '%s/a.star'
	exit $?
fi
exec '%s' rank '%s/a.star'
`, sperli, dir, sperli, dir)
	wrapper := writeFile(t, filepath.Join(dir, "wrapper.sh"), script, 0o755)
	r := sperliRun(t, withEnv(), dir, "run", "-n", "2", "--silence", "1000", wrapper)
	wantRefused(t, r, "have different loss policies (size, spares, silence limit, checkpoints, one program)")
}

// TestLauncherProgramChecked: a Starlark rank whose description carries
// the launcher's program digest and whose file gives another ends with
// H1628 before it joins: alone, without any other rank started, it ends
// at once (a join would wait for rank 0, then fail with H1610) and
// prints nothing.
func TestLauncherProgramChecked(t *testing.T) {
	dir := t.TempDir()
	prog := writeFile(t, filepath.Join(dir, "a.star"), "print('ran a')\n", 0o644)
	if r := sperliRun(t, withEnv(), dir, "job", "make", "-n", "2", "--out", "job"); r.Code != 0 {
		t.Fatalf("job make: %v", r)
	}
	b, err := os.ReadFile(filepath.Join(dir, "job", "rank-1.job"))
	if err != nil {
		t.Fatal(err)
	}
	var desc map[string]any
	if err := json.Unmarshal(b, &desc); err != nil {
		t.Fatal(err)
	}
	desc["one_program"], desc["program"] = true, strings.Repeat("ab", 32)
	line, err := json.Marshal(desc)
	if err != nil {
		t.Fatal(err)
	}
	edited := writeFile(t, filepath.Join(dir, "rank-1-edited.job"), string(line)+"\n", 0o600)
	cmd := fmt.Sprintf("exec '%s' rank '%s' < '%s'", sperli, prog, edited)
	r := sperliRunSh(t, dir, cmd)
	if r.Code != 1 || !regexp.MustCompile(`H1628: slot 1 runs another program or arguments than the launcher started: .*a\.star and its arguments give the digest [0-9a-f]{64}, the launcher's is (ab){32}`).MatchString(r.Stderr) || r.Stdout != "" {
		t.Fatalf("exit %d, want 1, the H1628 line and no output\n%v", r.Code, r)
	}
}

// sperliRunSh runs the shell command cmd in dir to its end.
func sperliRunSh(t *testing.T, dir, cmd string) result {
	t.Helper()
	c := exec.Command("sh", "-c", cmd)
	c.Dir, c.Env = dir, withEnv()
	return testbin.Start(t, c).Wait(t, timeout)
}
