//go:build hosts

// Package hosts tests the ssh path of SPEC §3 the way it is used: four test
// hosts, each a network namespace with Debian's sshd on port 62222, joined
// by a bridge in a fifth, the hub; the real `sperli run --hosts` in the hub
// starts its remote ranks as `ssh -p 62222 -o BatchMode=yes HOST WORD…`.
// The machine's own network namespace gets no test address, route or link. The tests
// need root, openssh-server and iproute2; they run as `make test-hosts`
// (the build tag "hosts") and never as part of `make test`. Without root
// or without network namespaces the suite fails with a message saying so:
// it never passes without having run.
package hosts

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sperli/tests/internal/testbin"
	"strings"
	"syscall"
	"testing"
	"time"
)

// timeout bounds every wait for a launcher.
const timeout = 60 * time.Second

var (
	root    string // the module root
	binDir  string // the binaries built for these tests
	sperli  string
	gosum   string
	hold    string
	sum     string // scripts/examples/sum.star
	stencil string // scripts/examples/stencil.star
	baseEnv []string
)

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	if os.Geteuid() != 0 {
		fmt.Fprintf(os.Stderr, "make test-hosts: not root (euid %d): these tests make network namespaces and run sshd. Nothing was tested.\n", os.Geteuid())
		return 1
	}
	// One suite at a time on a machine: the test hosts' names and
	// addresses are fixed.
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "sperli-test-hosts.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err == nil {
		err = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "make test-hosts: another run holds the test hosts (%v). Nothing was tested.\n", err)
		return 1
	}
	defer lock.Close()
	if err := prerequisites(); err != nil {
		fmt.Fprintf(os.Stderr, "make test-hosts: %v\n"+
			"These tests need root, Debian's openssh-server and iproute2 (apt-get install -y openssh-server iproute2),\n"+
			"and a kernel that lets root make network namespaces. Nothing was tested.\n", err)
		return 1
	}
	if root, err = testbin.Root(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "sperli-hosts-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Every host sees this directory: the namespaces share the file
	// system, as the hosts of a cluster share the binary's path.
	binDir = filepath.Join(dir, "bin")
	sperli, gosum, hold = filepath.Join(binDir, "sperli"), filepath.Join(binDir, "gosum"), filepath.Join(binDir, "hold")
	if err := testbin.Build(root, [][2]string{
		{sperli, "./cmd/sperli"},
		{gosum, "./scripts/examples/gosum"},
		{hold, "./tests/hosts/testdata/hold"},
	}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sum = filepath.Join(root, "scripts", "examples", "sum.star")
	stencil = filepath.Join(root, "scripts", "examples", "stencil.star")
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "SPERLI_REFUSED_HOSTS", "SPERLI_TEST_FAILURE_SCHEDULE", "NO_COLOR", "XDG_CACHE_HOME", "TMPDIR":
			continue
		}
		baseEnv = append(baseEnv, kv)
	}
	baseEnv = append(baseEnv, "XDG_CACHE_HOME="+filepath.Join(dir, "cache"))

	rootBefore, err := rootNet()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	code := m.Run()

	// Nothing of the suite may be left: no namespace, bridge, veth, sshd
	// or rank.
	if err := removeLeftovers(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: the test hosts were not all torn down: %v\n", err)
		code = 1
	}
	if nss, links := ours(); len(nss)+len(links) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: left after the suite: namespaces %q, links %q\n", nss, links)
		code = 1
	}
	if err := rootNetSame(rootBefore); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: the suite changed the root network namespace: %v\n", err)
		code = 1
	}
	if left := leftSSHD(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: sshd processes %v left after the suite\n", left)
		code = 1
	}
	if left := procsRunning(sperli, gosum, hold); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: ranks left after the suite:\n  %s\n", strings.Join(left, "\n  "))
		code = 1
	}
	return code
}

// prerequisites checks that this process can make the test hosts: root,
// the tools, and a network namespace made and removed for the trial.
func prerequisites() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("not root (euid %d)", os.Geteuid())
	}
	for _, tool := range []string{"ip", "ssh", "ssh-keygen", "unshare", "mount", "bash", "timeout"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found: %v", tool, err)
		}
	}
	if _, err := os.Stat("/usr/sbin/sshd"); err != nil {
		return fmt.Errorf("no sshd: %v", err)
	}
	if err := removeLeftovers(); err != nil {
		return fmt.Errorf("leftovers of an earlier run cannot be removed: %v", err)
	}
	const trial = nsPrefix + "-trial"
	if out, err := exec.Command("ip", "netns", "add", trial).CombinedOutput(); err != nil {
		return fmt.Errorf("cannot make a network namespace: ip netns add: %v: %s", err, bytes.TrimSpace(out))
	}
	if out, err := exec.Command("ip", "netns", "del", trial).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns del %s: %v: %s", trial, err, bytes.TrimSpace(out))
	}
	if _, err := pickNet(); err != nil {
		return err
	}
	return nil
}

// job is the place of one launch: an empty working directory (the ranks'
// too, on every host) that must hold nothing secret afterwards, and beside
// it the host list, the launcher's TMPDIR and room for the test's files.
type job struct {
	t     *testing.T
	c     *cluster
	work  string
	aux   string
	tmp   string
	hosts string
	env   []string
}

// newJob writes a host list of the given lines (a comment first) in a new
// job place.
func (c *cluster) newJob(t *testing.T, hostLines ...string) *job {
	t.Helper()
	d := t.TempDir()
	j := &job{t: t, c: c, work: filepath.Join(d, "work"), aux: filepath.Join(d, "aux"), tmp: filepath.Join(d, "tmp")}
	for _, p := range []string{j.work, j.aux, j.tmp} {
		mkdirAll(t, p)
	}
	j.hosts = writeFile(t, filepath.Join(j.aux, "hosts.txt"), "# test hosts\n"+strings.Join(hostLines, "\n")+"\n", 0o644)
	j.env = withEnv(baseEnv, "TMPDIR="+j.tmp, "PATH="+c.pathDir+":"+os.Getenv("PATH"))
	return j
}

// hostLine is the launcher's name of host line i (from 1) of the list.
func (j *job) hostLine(i int) string { return fmt.Sprintf("%s:%d", j.hosts, i+1) }

var withEnv = testbin.WithEnv

// proc is one started process: the launcher, or ssh started by the test.
type proc = testbin.Process

// inHostsNS returns argv run in the hub network namespace, in a mount
// namespace of its own where /etc/hosts is the cluster's, so that
// node3.sperli.test resolves as on the test hosts. ip, the shell and
// unshare exec: the process is argv[0] itself.
func (c *cluster) inHostsNS(argv ...string) []string {
	return append([]string{"ip", "netns", "exec", hubNS, "unshare", "-m", "--propagation", "private", "/bin/sh", "-c",
		`mount --bind "$1" /etc/hosts || exit 120; shift; exec "$@"`, "sh", c.hostsFile}, argv...)
}

// start starts argv in j.work with j.env (and stdin, when not nil). The
// process and its children are killed in t.Cleanup if still running.
func (j *job) start(stdin *os.File, argv ...string) *proc {
	j.t.Helper()
	full := j.c.inHostsNS(argv...)
	cmd := exec.Command(full[0], full[1:]...)
	cmd.Dir, cmd.Env = j.work, j.env
	if stdin != nil {
		cmd.Stdin = stdin
	}
	return testbin.Start(j.t, cmd)
}

// sperli starts the launcher: sperli ARGS in j.work.
func (j *job) sperli(args ...string) *proc {
	j.t.Helper()
	return j.start(nil, append([]string{sperli}, args...)...)
}

var killTree = testbin.KillTree

// result is how a process ended.
type result = testbin.Result

// run runs the launcher to its end.
func (j *job) run(args ...string) result {
	j.t.Helper()
	return j.sperli(args...).Wait(j.t, timeout)
}

// secretMarks are what a job description, a key or a token looks like on
// disk or in a command line.
var secretMarks = []string{"BEGIN", "PRIVATE", `"jobsecret"`, `"token"`, `"key"`, `"cert"`, `"ca"`}

// checkClean checks what a launch left: the working directory holds
// nothing but files under ckpt/ (allowCkpt), none secret and no job
// description; the launcher's and every host's TMPDIR is empty; no command
// line ssh was given holds anything secret; and no rank runs anywhere.
func (j *job) checkClean(allowCkpt bool) {
	t := j.t
	t.Helper()
	filepath.WalkDir(j.work, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			t.Errorf("walking %s: %v", p, err)
			return nil
		}
		rel, _ := filepath.Rel(j.work, p)
		if rel == "." {
			return nil
		}
		if !allowCkpt || (rel != "ckpt" && !strings.HasPrefix(rel, "ckpt"+string(filepath.Separator))) {
			t.Errorf("the working directory holds %s", rel)
		}
		if strings.HasSuffix(d.Name(), ".job") || strings.Contains(d.Name(), ".tmp") {
			t.Errorf("%s left in the working directory", rel)
		}
		if d.Type().IsRegular() {
			b, _ := os.ReadFile(p)
			for _, m := range secretMarks {
				if bytes.Contains(b, []byte(m)) {
					t.Errorf("%s holds %q: key material on disk?", rel, m)
				}
			}
		}
		return nil
	})
	dirs := []string{j.tmp}
	for _, n := range j.c.nodes {
		dirs = append(dirs, n.tmp)
	}
	for _, d := range dirs {
		if ents, err := os.ReadDir(d); err != nil || len(ents) != 0 {
			t.Errorf("TMPDIR %s holds %v (%v), want nothing", d, ents, err)
		}
	}
	for _, l := range j.c.sshStarts() {
		for _, m := range secretMarks {
			if strings.Contains(l, m) {
				t.Errorf("ssh was started with %q: it holds %q", l, m)
			}
		}
	}
	if left := j.c.idle(10 * time.Second); len(left) > 0 {
		t.Errorf("left running on the test hosts:\n  %s", strings.Join(left, "\n  "))
	}
	if left := procsRunning(sperli, gosum, hold); len(left) > 0 {
		t.Errorf("ranks left running:\n  %s", strings.Join(left, "\n  "))
	}
}

// launcherLines checks that every line of the launcher's stderr begins
// "sperli: " and returns them without the prefix; the ranks' own stderr
// lines ("[rank i] "), the marks of abandoned generations, the notes and
// the report of where each rank waits (after an interrupt) aside.
func launcherLines(t testing.TB, r result) []string {
	t.Helper()
	var out []string
	for _, l := range lines(r.Stderr) {
		if strings.HasPrefix(l, "[rank ") || strings.HasPrefix(l, "--- generation ") || strings.HasPrefix(l, "sperli: note: ") ||
			l == "sperli: where each rank waits:" || strings.HasPrefix(l, "sperli:   rank ") {
			continue
		}
		rest, ok := strings.CutPrefix(l, "sperli: ")
		if !ok {
			t.Errorf("launcher line %q does not begin with \"sperli: \"", l)
		}
		out = append(out, rest)
	}
	return out
}

// rankLines returns the lines the launcher showed for rank r, without
// their prefix.
func rankLines(out string, r int) []string {
	var got []string
	prefix := fmt.Sprintf("[rank %d] ", r)
	for _, l := range lines(out) {
		if rest, ok := strings.CutPrefix(l, prefix); ok {
			got = append(got, rest)
		}
	}
	return got
}

// waitFiles waits for the files of names in dir and returns their contents.
func waitFiles(t testing.TB, p *proc, dir string, names ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	got := make([]string, len(names))
	ok := poll(ctx, 20*time.Millisecond, func() bool {
		for i, n := range names {
			if got[i] != "" {
				continue
			}
			b, err := os.ReadFile(filepath.Join(dir, n))
			if err != nil {
				return false
			}
			got[i] = string(b)
		}
		return true
	})
	if !ok {
		killTree(p.Cmd.Process.Pid)
		<-p.Done()
		t.Fatalf("no %v in %s within %v\nstdout:\n%s\nstderr:\n%s", names, dir, timeout, &p.Stdout, &p.Stderr)
	}
	return got
}

// netnsOf returns the name of the network namespace pid runs in.
func netnsOf(pid int) string {
	out, _ := exec.Command("ip", "netns", "identify", fmt.Sprint(pid)).Output()
	return strings.TrimSpace(string(out))
}
