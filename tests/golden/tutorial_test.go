package golden

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestTutorial runs docs/tutorial.md: every program it shows (a ```python
// block after a line naming `NAME.star`) is written to a directory, every
// command it shows (a "$ " line in a ``` block) is run there, and the lines
// the block shows after the command must be the lines the command prints,
// stdout and stderr together, in any order between the two streams (the
// page shows them as a terminal interleaves them); "$ cat FILE" shows a
// file the command before wrote. Paths show as /home/me, durations as N,
// the launcher's notes are left out.
func TestTutorial(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "docs", "tutorial.md"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	name := regexp.MustCompile("`([a-z]+\\.star)`")
	lines := strings.Split(string(b), "\n")
	var last string // the program named last
	type example struct {
		cmd  string
		want []string
	}
	var examples []example
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if m := name.FindStringSubmatch(l); m != nil && !strings.HasPrefix(l, "$ ") {
			last = m[1]
		}
		switch {
		case l == "```python" && last != "":
			var src []string
			for i++; i < len(lines) && lines[i] != "```"; i++ {
				src = append(src, lines[i])
			}
			if err := os.WriteFile(filepath.Join(dir, last), []byte(strings.Join(src, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			last = ""
		case l == "```" && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "$ "):
			i++
			ex := example{cmd: strings.TrimPrefix(lines[i], "$ ")}
			for i++; i < len(lines) && lines[i] != "```"; i++ {
				ex.want = append(ex.want, lines[i])
			}
			examples = append(examples, ex)
		}
	}
	if len(examples) < 6 {
		t.Fatalf("found %d examples in docs/tutorial.md, want at least 6", len(examples))
	}
	dur := regexp.MustCompile(`\d+\.\d s\b`)
	back := regexp.MustCompile(`back in (its program )?\d+ ms`)
	// A loss's cause is compared too: it is the same in every run.
	norm := func(s string) string {
		s = strings.ReplaceAll(s, dir, "/home/me")
		s = back.ReplaceAllString(s, "back in ${1}N ms")
		return dur.ReplaceAllString(s, "N s")
	}
	for _, ex := range examples {
		t.Run(ex.cmd, func(t *testing.T) {
			words := strings.Fields(ex.cmd)
			if len(words) == 2 && words[0] == "cat" {
				b, err := os.ReadFile(filepath.Join(dir, words[1]))
				if err != nil {
					t.Fatal(err)
				}
				if got, want := strings.TrimSuffix(string(b), "\n"), strings.Join(ex.want, "\n"); got != want {
					t.Errorf("%s:\n%s\nthe tutorial shows:\n%s", ex.cmd, got, want)
				}
				return
			}
			envs := slices.Clone(env)
			for len(words) > 0 && strings.Contains(words[0], "=") {
				envs = append(envs, words[0])
				words = words[1:]
			}
			if len(words) == 0 || words[0] != "sperli" {
				t.Fatalf("command %q does not run sperli", ex.cmd)
			}
			os.RemoveAll(filepath.Join(dir, "ckpt"))
			os.RemoveAll(filepath.Join(dir, "out"))
			cmd := exec.Command(sperli, words[1:]...)
			cmd.Dir, cmd.Env = dir, envs
			r := run2(t, cmd)
			var got []string
			for _, l := range strings.Split(strings.TrimSuffix(r.Stdout, "\n")+"\n"+strings.TrimSuffix(r.Stderr, "\n"), "\n") {
				if l != "" && !strings.HasPrefix(l, "sperli: note: ") {
					got = append(got, norm(l))
				}
			}
			var want []string
			for _, l := range ex.want {
				want = append(want, norm(l))
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("%s printed (sorted):\n%s\nthe tutorial shows (sorted):\n%s", ex.cmd, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}
