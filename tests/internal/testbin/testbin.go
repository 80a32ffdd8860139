// Package testbin builds the binaries that the process-level test suites
// under tests/ run: it finds the module root and builds packages into a
// temporary directory, once per test binary (from TestMain).
package testbin

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Root returns the module root: the first directory holding go.mod at or
// above the working directory.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// TempDir makes a temporary directory named after prefix and returns its
// real path (symbolic links resolved, as /proc/PID/exe shows it).
func TempDir(prefix string) (string, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return real, nil
}

// Build runs `go build -o OUT PKG` in root for every {OUT, PKG} pair,
// static (CGO_ENABLED=0) as `make build-go` builds them.
func Build(root string, targets [][2]string) error {
	for _, b := range targets {
		cmd := exec.Command("go", "build", "-o", b[0], b[1])
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build -o %s %s: %v\n%s", b[0], b[1], err, out)
		}
	}
	return nil
}
