//go:build slurm

package slurm

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sperli/tests/internal/testbin"
)

var (
	root    string
	sperli  string
	gosum   string
	hold    string
	csum    string
	sum     string
	spares  string // testdata/spares.star
	baseEnv []string
	cl      *cluster
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "make test-slurm: "+format+"\n", args...)
		fmt.Fprintln(os.Stderr, "These tests need root, Debian's slurm-wlm and munge (apt-get install -y slurm-wlm munge), iproute2 and util-linux. Nothing was tested.")
		return 1
	}
	if os.Geteuid() != 0 {
		return fail("not root (euid %d)", os.Geteuid())
	}
	for _, tool := range []string{"ip", "unshare", "nsenter", "srun", "scancel", "squeue", "sinfo", "slurmctld", "slurmd", "munged", "cc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fail("%s not found: %v", tool, err)
		}
	}
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "sperli-test-slurm.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err == nil {
		err = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err != nil {
		return fail("another run holds the test cluster (%v)", err)
	}
	defer lock.Close()
	if err := removeLeftovers(); err != nil {
		return fail("leftovers of an earlier run: %v", err)
	}
	if root, err = testbin.Root(); err != nil {
		return fail("%v", err)
	}
	started := time.Now().Add(-time.Second)
	rootBefore, err := rootNet()
	if err != nil {
		return fail("%v", err)
	}
	dir, err := os.MkdirTemp("", "sperli-slurm-")
	if err != nil {
		return fail("%v", err)
	}
	defer os.RemoveAll(dir)
	// Every node sees this directory, as a cluster's nodes share the
	// binary's path; munged wants its directories searchable by all.
	if err := os.Chmod(dir, 0o755); err != nil {
		return fail("%v", err)
	}
	bin := filepath.Join(dir, "bin")
	sperli, gosum, hold = filepath.Join(bin, "sperli"), filepath.Join(bin, "gosum"), filepath.Join(bin, "hold")
	if err := testbin.Build(root, [][2]string{
		{sperli, "./cmd/sperli"},
		{gosum, "./scripts/examples/gosum"},
		{hold, "./tests/hosts/testdata/hold"},
	}); err != nil {
		return fail("%v", err)
	}
	// The C rank: libsperli (scripts/libsperli/build.sh) and csum.
	csum = filepath.Join(bin, "csum")
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	lib := filepath.Join("libsperli", "c", "linux")
	for _, step := range [][]string{
		{"sh", "scripts/libsperli/build.sh"},
		{cc, "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", lib, "-o", csum, "scripts/examples/csum.c", filepath.Join(lib, "libsperli.a"), "-lpthread"},
	} {
		cmd := exec.Command(step[0], step[1:]...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return fail("%s: %v\n%s", strings.Join(step, " "), err, out)
		}
	}
	sum = filepath.Join(root, "scripts", "examples", "sum.star")
	spares = filepath.Join(root, "tests", "slurm", "testdata", "spares.star")
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "SLURM_") || strings.HasPrefix(k, "PMI_") || strings.HasPrefix(k, "SPERLI_") || k == "TMPDIR" || k == "XDG_CACHE_HOME" {
			continue
		}
		baseEnv = append(baseEnv, kv)
	}
	baseEnv = append(baseEnv, "XDG_CACHE_HOME="+filepath.Join(dir, "cache"))

	code := 0
	cl, err = newCluster(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "make test-slurm: the test cluster: %v\nNothing was tested.\n", err)
		code = 1
	} else {
		code = m.Run()
	}

	// Nothing of the suite may be left.
	if cl != nil {
		if err := cl.teardown(); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: the test cluster was not torn down: %v\n", err)
			code = 1
		}
		for _, d := range cl.daemons {
			if d.alive() || processAlive(d.cmd.Process.Pid) {
				fmt.Fprintf(os.Stderr, "FAIL: %s (pid %d) still runs\n", d.name, d.cmd.Process.Pid)
				code = 1
			}
		}
	}
	if left := ours(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: namespaces left after the suite: %q\n", left)
		code = 1
	}
	if added := rootNetAdded(rootBefore); len(added) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: new in the root network namespace:\n  %s\n", strings.Join(added, "\n  "))
		code = 1
	}
	if changed := etcChanged(started); len(changed) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: written under /etc during the suite: %q\n", changed)
		code = 1
	}
	if left := procsRunning(sperli, gosum, hold, csum); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: processes left after the suite:\n  %s\n", strings.Join(left, "\n  "))
		code = 1
	}
	return code
}

func processAlive(pid int) bool {
	p, ok := testbin.ReadProc(pid)
	return ok && p.State != "Z"
}

// procsRunning returns the running processes whose executable is one of
// exes, as "pid cmdline".
func procsRunning(exes ...string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil || !slices.Contains(exes, exe) || !processAlive(pid) {
			continue
		}
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		out = append(out, fmt.Sprintf("%d %s", pid, strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")))
	}
	return out
}

// idle fails t if anything but slurmd still runs on a node 15 s after a
// test (slurmstepd ends a moment after its step).
func idle(t *testing.T) {
	t.Helper()
	var left []string
	if !waitFor(15*time.Second, func() bool { left = cl.others(); return len(left) == 0 }) {
		t.Errorf("left running on the nodes:\n  %s", strings.Join(left, "\n  "))
	}
}
