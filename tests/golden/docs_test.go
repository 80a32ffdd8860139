package golden

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocsStandAlone: README.md and docs/*.md link only files inside the
// repository that exist, and name no file outside it; the README says
// what a fresh machine needs besides Go; there is a LICENSE.
func TestDocsStandAlone(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append(files, filepath.Join(root, "README.md"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		if strings.Contains(text, "../shared") || strings.Contains(text, "shared/SPEC") {
			t.Errorf("%s names a file outside the repository (../shared)", f)
		}
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			path := filepath.Join(filepath.Dir(f), target)
			rel, err := filepath.Rel(root, path)
			if err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("%s links %s, outside the repository", f, m[1])
				continue
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links %s, which does not exist", f, m[1])
			}
		}
	}
	readme, _ := os.ReadFile(filepath.Join(root, "README.md"))
	for _, want := range []string{"C compiler", "cgo", "LICENSE"} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("README.md does not say %q", want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, "LICENSE")); err != nil || !strings.HasPrefix(string(b), "MIT License") {
		t.Errorf("no MIT LICENSE: %v", err)
	}
}

// TestManPage: docs/sperli.1 is what `sperli man` makes from the commands'
// help (-update rewrites it), and it documents every flag of sperli run.
func TestManPage(t *testing.T) {
	r := run(t, sperli, "man")
	if r.Code != 0 || r.Stderr != "" {
		t.Fatalf("sperli man: %v", r)
	}
	path := filepath.Join(root, "docs", "sperli.1")
	if *update {
		if err := os.WriteFile(path, []byte(r.Stdout), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != r.Stdout {
		t.Errorf("docs/sperli.1 is not the output of \"sperli man\" (go test ./tests/golden -update rewrites it)")
	}
	for _, flag := range []string{"live", "output\\-dir", "timeout", "job", "np", "ssh\\-port", "export", "verbose"} {
		if !strings.Contains(r.Stdout, ".B \\-\\-"+flag) && !strings.Contains(r.Stdout, ", \\-\\-"+flag) {
			t.Errorf("sperli man does not document --%s", flag)
		}
	}
}

// TestDocsBinaries: every bin/NAME the docs tell a user to run is made by
// `make build` (bin/collbench by the collectives benchmark, which says so).
func TestDocsBinaries(t *testing.T) {
	cmd := exec.Command("make", "-n", "build")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("make -n build: %v", err)
	}
	built := string(out)
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append(files, filepath.Join(root, "README.md"))
	named := regexp.MustCompile(`(^|[^/\w.])bin/([a-z][a-z0-9_-]*)`)
	seen := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range named.FindAllStringSubmatch(string(b), -1) {
			name := m[2]
			if seen[name] {
				continue
			}
			seen[name] = true
			if name == "collbench" {
				if s, err := os.ReadFile(filepath.Join(root, "scripts", "bench", "collectives.sh")); err != nil || !strings.Contains(string(s), "bin/collbench") {
					t.Errorf("%s names bin/collbench, which scripts/bench/collectives.sh does not build", f)
				}
				continue
			}
			if !strings.Contains(built, "-o bin/"+name+" ") {
				t.Errorf("%s names bin/%s, which make build does not make:\n%s", f, name, built)
			}
		}
	}
	for _, want := range []string{"sperli", "gosum", "csum"} {
		if !seen[want] {
			t.Errorf("no doc names bin/%s", want)
		}
	}
}
