package golden

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGoModule builds the rank of docs/go.md as that page says: its go.mod
// and main.go in a module of their own outside this tree, beside a
// checkout named by a replace directive, with sperli's go.sum copied in,
// offline (GOPROXY=off, from the module cache the build of this tree
// filled); then runs it as a job of 4 ranks and wants the output the page
// shows.
func TestGoModule(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "docs", "go.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := fencedAfter(string(b))
	gomod, main, shown := blocks["`go.mod`:"], blocks["`main.go`:"], blocks["Build it and run it:+1"]
	if !strings.Contains(gomod, "replace sperli => ../sperli") || !strings.Contains(main, "package main") || shown == "" {
		t.Fatalf("docs/go.md: want a go.mod block with replace sperli => ../sperli, a main.go block and the output of the run; got %q, %q, %q", gomod, main, shown)
	}
	dir := t.TempDir()
	if err := os.Symlink(root, filepath.Join(dir, "sperli")); err != nil {
		t.Fatal(err)
	}
	mod := filepath.Join(dir, "myrank")
	if err := os.Mkdir(mod, 0o755); err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"go.mod": gomod, "main.go": main, "go.sum": string(sum)} {
		if err := os.WriteFile(filepath.Join(mod, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The go command with this machine's caches (the children's
	// XDG_CACHE_HOME is the tests' own) and no network.
	caches, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	c := strings.Fields(string(caches))
	if len(c) != 2 {
		t.Fatalf("go env GOCACHE GOMODCACHE = %q", caches)
	}
	goEnv := append(append([]string(nil), env...), "GOPROXY=off", "GOFLAGS=", "GOWORK=off", "GOCACHE="+c[0], "GOMODCACHE="+c[1])
	for _, args := range [][]string{{"mod", "tidy"}, {"build", "-o", "myrank", "."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = mod, goEnv
		if r := run2(t, cmd); r.Code != 0 {
			t.Fatalf("go %s offline in a module outside the tree: %v", strings.Join(args, " "), r)
		}
	}
	cmd := exec.Command(sperli, "run", "-n", "4", "./myrank")
	cmd.Dir, cmd.Env = mod, env
	r := run2(t, cmd)
	if r.Code != 0 || r.Stdout != shown {
		t.Errorf("sperli run -n 4 ./myrank: exit status %d, stdout %q, want 0 and %q (docs/go.md)\n%v", r.Code, r.Stdout, shown, r)
	}
}

// fencedAfter returns the fenced blocks of a Markdown text by the line
// before them: the block after the line "`go.mod`:" under "`go.mod`:",
// and the n-th block after a line under "LINE+n" for the later ones.
func fencedAfter(text string) map[string]string {
	out := map[string]string{}
	lines := strings.Split(text, "\n")
	label, n := "", 0
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if !strings.HasPrefix(l, "```") {
			if strings.TrimSpace(l) != "" {
				label, n = l, 0
			}
			continue
		}
		var body []string
		for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
			body = append(body, lines[i])
		}
		key := label
		if n > 0 {
			key = label + "+" + string(rune('0'+n))
		}
		out[key] = strings.Join(body, "\n") + "\n"
		n++
	}
	return out
}
