//go:build slurm

package slurm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sperli/tests/internal/testbin"
)

// golden is the sum example's line (SPEC §16), as rank 0 prints it.
const golden = "rows=3000000 total=4500001500000 expected=4500001500000 ok"

// timeout bounds every srun of the suite.
const timeout = 90 * time.Second

// place is one test's directories: the ranks' working directory (it must
// hold nothing afterwards) and their TMPDIR.
type place struct {
	t    *testing.T
	work string
	tmp  string
	env  []string
}

func newPlace(t *testing.T, kv ...string) *place {
	d := t.TempDir()
	os.Chmod(d, 0o755)
	p := &place{t: t, work: filepath.Join(d, "work"), tmp: filepath.Join(d, "tmp")}
	for _, dir := range []string{p.work, p.tmp} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p.env = testbin.WithEnv(baseEnv, append([]string{"TMPDIR=" + p.tmp}, kv...)...)
	// The next test's srun must not queue behind this test's jobs: wait
	// for slurmctld to settle, also when this test ends early (t.Fatal
	// with a job running). Cleanups run last registered first, so this
	// one runs after those that stop this test's processes.
	t.Cleanup(func() {
		if err := cl.settled(30*time.Second, "after "+t.Name()); err != nil {
			t.Error(err)
		}
	})
	return p
}

// start starts srun ARGS in the hub.
func (p *place) start(args ...string) *testbin.Process {
	p.t.Helper()
	cmd := cl.command(context.Background(), p.work, p.env, append([]string{"srun"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return testbin.Start(p.t, cmd)
}

func (p *place) srun(args ...string) testbin.Result {
	p.t.Helper()
	return p.start(args...).Wait(p.t, timeout)
}

// checkClean checks that the working directory and TMPDIR hold nothing
// (no job description, no key), and that nothing but slurmd runs on the
// nodes.
func (p *place) checkClean() {
	t := p.t
	t.Helper()
	for _, d := range []string{p.work, p.tmp} {
		if ents, err := os.ReadDir(d); err != nil || len(ents) != 0 {
			t.Errorf("%s holds %v (%v), want nothing", d, ents, err)
		}
	}
	idle(t)
	if left := procsRunning(sperli, gosum, hold, csum); len(left) > 0 {
		t.Errorf("ranks left running:\n  %s", strings.Join(left, "\n  "))
	}
}

// six are srun's flags of a job of 6 ranks, 2 on each of the 3 nodes,
// over PMI, ending every task when one fails (-K).
var six = []string{"--mpi=pmi2", "-K", "-N", "3", "--ntasks-per-node=2", "-n", "6"}

func args(extra ...string) []string { return append(append([]string{}, six...), extra...) }

// TestSumStarlark: srun --mpi=pmi2 starts 6 Starlark ranks on 3 nodes with
// nothing on their standard input; they bootstrap through PMI and rank 0
// prints the golden line.
func TestSumStarlark(t *testing.T) {
	p := newPlace(t)
	r := p.srun(args(sperli, "rank", sum)...)
	if r.Code != 0 || r.Stdout != golden+"\n" || r.Stderr != "" {
		t.Errorf("%v\nwant exit status 0, stdout %q and nothing on stderr", r, golden)
	}
	p.checkClean()
}

// TestSumGo: Go ranks (runtime.ReadJob falls back to PMI) on ports of
// the kernel's choosing (--resv-ports=0: srun reserves none).
func TestSumGo(t *testing.T) {
	p := newPlace(t)
	r := p.srun(args("--resv-ports=0", gosum)...)
	if r.Code != 0 || r.Stdout != golden+"\n" || r.Stderr != "" {
		t.Errorf("%v\nwant exit status 0, stdout %q and nothing on stderr", r, golden)
	}
	p.checkClean()
}

// TestMixedJob: Starlark ranks 0 and 3, Go ranks 1 and 4 and C ranks
// (libsperli) 2 and 5 in one step (srun --multi-prog).
func TestMixedJob(t *testing.T) {
	p := newPlace(t)
	conf := testbin.WriteFile(t, filepath.Join(filepath.Dir(p.work), "multi.conf"),
		fmt.Sprintf("0,3 %s rank %s\n1,4 %s\n2,5 %s\n", sperli, sum, gosum, csum), 0o644)
	r := p.srun(args("--multi-prog", conf)...)
	if r.Code != 0 || r.Stdout != golden+"\n" || r.Stderr != "" {
		t.Errorf("%v\nwant exit status 0, stdout %q and nothing on stderr", r, golden)
	}
	p.checkClean()
}

// TestNoPMI: srun without --mpi=pmi2 gives no PMI_FD: the rank says so,
// H1615, and how to start it.
func TestNoPMI(t *testing.T) {
	p := newPlace(t)
	r := p.srun("--mpi=none", "-N", "1", "-n", "1", sperli, "rank", sum)
	if r.Code == 0 || !strings.Contains(r.Stderr, "H1615") || !strings.Contains(r.Stderr, "--mpi=pmi2") || r.Stdout != "" {
		t.Errorf("%v\nwant a failure saying H1615 and --mpi=pmi2", r)
	}
	p.checkClean()
}

// holdJob starts hold on 6 ranks under srun and waits until every rank
// joined and wrote its pid file; it returns srun and the ranks' pids.
func (p *place) holdJob(name, dir string, extra ...string) (*testbin.Process, []int) {
	p.t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		p.t.Fatal(err)
	}
	s := p.start(args(append(append([]string{"-J", name}, extra...), hold, dir)...)...)
	pids := make([]int, 6)
	ok := waitFor(timeout, func() bool {
		for r := range pids {
			if pids[r] != 0 {
				continue
			}
			b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("inc-0-rank-%d.pid", r)))
			if err != nil {
				return false
			}
			pids[r], _ = strconv.Atoi(string(b))
		}
		return true
	})
	if !ok {
		testbin.KillTree(s.Cmd.Process.Pid)
		<-s.Done()
		p.t.Fatalf("the ranks of %s did not all join within %v\nstdout:\n%s\nstderr:\n%s", name, timeout, &s.Stdout, &s.Stderr)
	}
	return s, pids
}

// nodeOf returns the node (1 … 3) whose namespace pid runs in, or 0.
func nodeOf(pid int) int {
	for i := 1; i <= nNodes; i++ {
		for _, p := range nsPIDs(nodeNS(i)) {
			if p == pid {
				return i
			}
		}
	}
	return 0
}

var holdLine = regexp.MustCompile(`^rank (\d) inc 0 host (\S+) resumed 0$`)

// wantPlacement checks that rank r ran on node r/2+1 and named that
// node's address as its host.
func wantPlacement(t *testing.T, out string, pids []int) {
	t.Helper()
	seen := 0
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		m := holdLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		r, _ := strconv.Atoi(m[1])
		if want := nodeAddr(r/2 + 1); m[2] != want {
			t.Errorf("rank %d's host is %s, want %s", r, m[2], want)
		}
		seen++
	}
	if seen != 6 {
		t.Errorf("%d ranks said where they run, want 6:\n%s", seen, out)
	}
}

// TestKilledRank: a rank killed on its node (SIGKILL from outside) → the
// other five end with exit status 75 (H1611 / H1612: the rank was lost),
// srun -K ends the step, and nothing is left on any node.
func TestKilledRank(t *testing.T) {
	p := newPlace(t)
	s, pids := p.holdJob("sperli-killed", filepath.Join(filepath.Dir(p.work), "pids"))
	for r, pid := range pids {
		if got := nodeOf(pid); got != r/2+1 {
			t.Errorf("rank %d (pid %d) runs on node %d, want %d", r, pid, got, r/2+1)
		}
	}
	if err := syscall.Kill(pids[1], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := s.Wait(t, timeout)
	wantPlacement(t, r.Stdout, pids)
	if r.Code == 0 {
		t.Errorf("%v\nwant a failure's exit status", r)
	}
	if !regexp.MustCompile(`(?m)task 1: Killed$`).MatchString(r.Stderr) {
		t.Errorf("srun does not say task 1 was killed:\n%s", r.Stderr)
	}
	// The others: "tasks 0,2-3: Exited with exit code 75", … covering 5.
	tasks := 0
	for _, m := range regexp.MustCompile(`(?m)tasks? ([0-9,-]+): Exited with exit code (\d+)$`).FindAllStringSubmatch(r.Stderr, -1) {
		if m[2] != "75" {
			t.Errorf("tasks %s exited with %s, want 75", m[1], m[2])
		}
		tasks += countTasks(m[1])
	}
	if tasks != 5 {
		t.Errorf("%d tasks said they exited, want 5 with exit status 75:\n%s", tasks, r.Stderr)
	}
	if n := strings.Count(r.Stderr, "rank 1 lost"); n < 5 {
		t.Errorf("%d ranks said rank 1 was lost, want 5:\n%s", n, r.Stderr)
	}
	p.checkClean()
}

// countTasks counts the tasks of srun's list "0,2-3".
func countTasks(list string) int {
	n := 0
	for _, part := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, _ := strconv.Atoi(lo)
		b := a
		if isRange {
			b, _ = strconv.Atoi(hi)
		}
		n += b - a + 1
	}
	return n
}

// jobID returns the id of the running job called name.
func jobID(t *testing.T, p *place, name string) string {
	t.Helper()
	out, err := cl.command(context.Background(), p.work, p.env, "squeue", "-h", "-n", name, "-o", "%i").Output()
	id := strings.TrimSpace(string(out))
	if err != nil || id == "" || strings.ContainsAny(id, " \n") {
		t.Fatalf("squeue -n %s: %q %v", name, out, err)
	}
	return id
}

func scancel(t *testing.T, p *place, id string) {
	t.Helper()
	if out, err := cl.command(context.Background(), p.work, p.env, "scancel", id).CombinedOutput(); err != nil {
		t.Fatalf("scancel %s: %v\n%s", id, err, out)
	}
}

func alive(pid int) bool { return processAlive(pid) }

// TestTwoJobsThenScancel: two jobs of 6 ranks share the three nodes at
// once (each node runs 4 ranks: no port collides, on free ports and on
// the ports srun reserved); scancel of one ends its ranks on every node and
// leaves the other's running; scancel of the other ends it too. With
// MpiParams=ports=… srun reserves ports for a pmi2 step unless told
// --resv-ports=0.
func TestTwoJobsThenScancel(t *testing.T) {
	p := newPlace(t)
	base := filepath.Dir(p.work)
	sa, pa := p.holdJob("sperli-a", filepath.Join(base, "a"), "--resv-ports=0")
	sb, pb := p.holdJob("sperli-b", filepath.Join(base, "b"))
	for r := range pa {
		if nodeOf(pa[r]) != nodeOf(pb[r]) || nodeOf(pa[r]) == 0 {
			t.Errorf("rank %d of the two jobs runs on nodes %d and %d, want one node", r, nodeOf(pa[r]), nodeOf(pb[r]))
		}
	}
	// Job b listens at the ports srun reserved (MpiParams=ports=20000-20999),
	// job a at ports of the kernel's choosing (its ephemeral range). A
	// rank closes its listener once joined, so the port is seen on the
	// connections it accepted: every rank but 0 accepted from rank 0.
	for r := 1; r < len(pa); r++ {
		if n := inRange(localPorts(pb[r]), 20000, 20999); n == 0 {
			t.Errorf("rank %d of job b has no connection at a reserved port (local ports %v)", r, localPorts(pb[r]))
		}
		if n := inRange(localPorts(pa[r]), 20000, 20999); n != 0 {
			t.Errorf("rank %d of job a has connections at reserved ports (local ports %v)", r, localPorts(pa[r]))
		}
	}
	scancel(t, p, jobID(t, p, "sperli-a"))
	ra := sa.Wait(t, timeout)
	if ra.Code == 0 {
		t.Errorf("job a after scancel: %v\nwant a failure's exit status", ra)
	}
	wantPlacement(t, ra.Stdout, pa)
	if !waitFor(15*time.Second, func() bool {
		for _, pid := range pa {
			if alive(pid) {
				return false
			}
		}
		return true
	}) {
		t.Errorf("ranks of job a still run after scancel")
	}
	for r, pid := range pb {
		if !alive(pid) {
			t.Errorf("rank %d of job b (pid %d) ended with job a", r, pid)
		}
	}
	scancel(t, p, jobID(t, p, "sperli-b"))
	rb := sb.Wait(t, timeout)
	if rb.Code == 0 {
		t.Errorf("job b after scancel: %v\nwant a failure's exit status", rb)
	}
	wantPlacement(t, rb.Stdout, pb)
	p.checkClean()
}

// TestTwoSumsAtOnce: two sum jobs started together on the same nodes both
// print the golden line.
func TestTwoSumsAtOnce(t *testing.T) {
	p := newPlace(t)
	a := p.start(args(sperli, "rank", sum)...)
	b := p.start(args("--resv-ports=0", gosum)...)
	for name, s := range map[string]*testbin.Process{"a": a, "b": b} {
		if r := s.Wait(t, timeout); r.Code != 0 || r.Stdout != golden+"\n" {
			t.Errorf("job %s: %v\nwant exit status 0 and stdout %q", name, r, golden)
		}
	}
	p.checkClean()
}

// TestRefusedHost: SPERLI_REFUSED_HOSTS naming node 2's address (srun
// passes the environment to every task) → every rank refuses the job with
// H1614 naming the host; slot 0 certifies nothing, no rank joins.
func TestRefusedHost(t *testing.T) {
	p := newPlace(t, "SPERLI_REFUSED_HOSTS="+nodeAddr(2))
	r := p.srun(args(sperli, "rank", sum)...)
	if r.Code == 0 || r.Stdout != "" {
		t.Errorf("%v\nwant a failure and no output", r)
	}
	refusal := regexp.MustCompile(`(?m)^H1614: host ` + regexp.QuoteMeta(nodeAddr(2)) + ` of rank [23] refused`)
	if n := len(refusal.FindAllString(r.Stderr, -1)); n != 6 {
		t.Errorf("%d ranks refused the job naming %s, want 6:\n%s", n, nodeAddr(2), r.Stderr)
	}
	p.checkClean()
}

// localPorts returns the local ports of pid's established TCP
// connections: its socket descriptors matched against its network
// namespace's table.
func localPorts(pid int) []int {
	inodes := map[string]bool{}
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, e := range ents {
		l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name()))
		if ino, ok := strings.CutPrefix(l, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(ino, "]")] = true
		}
	}
	var ports []int
	for _, table := range []string{"tcp", "tcp6"} {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) < 10 || f[3] != "01" || !inodes[f[9]] {
				continue
			}
			_, hexPort, _ := strings.Cut(f[1], ":")
			if p, err := strconv.ParseInt(hexPort, 16, 32); err == nil {
				ports = append(ports, int(p))
			}
		}
	}
	return ports
}

func inRange(ports []int, lo, hi int) int {
	n := 0
	for _, p := range ports {
		if p >= lo && p <= hi {
			n++
		}
	}
	return n
}

// TestSbatch: docs/hosts.md's batch recipe — sbatch of a script whose
// srun starts the ranks from the first node of the allocation — writes
// the golden line to the job's output file.
func TestSbatch(t *testing.T) {
	p := newPlace(t)
	dir := filepath.Dir(p.work)
	out := filepath.Join(dir, "sum.out")
	script := testbin.WriteFile(t, filepath.Join(dir, "sum.sh"), fmt.Sprintf(`#!/bin/sh
#SBATCH --nodes=3 --ntasks-per-node=2
srun --mpi=pmi2 -K %s rank %s
`, sperli, sum), 0o755)
	r := testbin.Start(t, cl.command(context.Background(), p.work, p.env, "sbatch", "--wait", "-o", out, script)).Wait(t, timeout)
	if r.Code != 0 {
		t.Errorf("sbatch --wait: %v", r)
	}
	if b, err := os.ReadFile(out); err != nil || string(b) != golden+"\n" {
		t.Errorf("the job's output is %q (%v), want %q", b, err, golden)
	}
	p.checkClean()
}

// TestSparesReplaceANode: srun -n 6 with SPERLI_SPARES=2 is a job of 4
// ranks and 2 spares, the spares the last two tasks (node 3). Once every
// rank is in the program, the ranks of node 1 (ranks 0 and 1) are killed
// from outside: the spares take their places in place, in generation 1
// — slot 4 rank 0, slot 5 rank 1 — and the job ends with the four ranks'
// sum, without srun -K ending the step. The new rank 0 holds the job
// secret (sealed to it by slot 0 through PMI), so it could sign a
// checkpoint; TestPMISpares in package job checks that part.
func TestSparesReplaceANode(t *testing.T) {
	p := newPlace(t, "SPERLI_SPARES=2")
	base := filepath.Dir(p.work)
	ready := filepath.Join(base, "ready")
	if err := os.MkdirAll(ready, 0o755); err != nil {
		t.Fatal(err)
	}
	s := p.start("--mpi=pmi2", "-N", "3", "--ntasks-per-node=2", "-n", "6", "-D", base, sperli, "rank", spares)
	if !waitFor(timeout, func() bool {
		ents, _ := os.ReadDir(ready)
		return len(ents) == 4
	}) {
		testbin.KillTree(s.Cmd.Process.Pid)
		<-s.Done()
		t.Fatalf("the 4 ranks did not all reach their program within %v\nstdout:\n%s\nstderr:\n%s", timeout, &s.Stdout, &s.Stderr)
	}
	for _, slot := range []int{0, 1, 2, 3} {
		if _, err := os.Stat(filepath.Join(ready, fmt.Sprintf("slot-%d", slot))); err != nil {
			t.Errorf("slot %d: %v", slot, err)
		}
	}
	// The node's ranks: the sperli processes in node 1's namespace.
	var killed []int
	for _, pid := range nsPIDs(nodeNS(1)) {
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); exe == sperli {
			killed = append(killed, pid)
		}
	}
	if len(killed) != 2 {
		testbin.KillTree(s.Cmd.Process.Pid)
		<-s.Done()
		t.Fatalf("node 1 runs %d sperli processes (%v), want its 2 ranks", len(killed), killed)
	}
	for _, pid := range killed {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	r := s.Wait(t, timeout)
	want := []string{
		"rank 0 slot 4 generation 1 ranks [4, 5, 2, 3] spares [] sum 10",
		"rank 1 slot 5 generation 1 ranks [4, 5, 2, 3] spares [] sum 10",
		"rank 2 slot 2 generation 1 ranks [4, 5, 2, 3] spares [] sum 10",
		"rank 3 slot 3 generation 1 ranks [4, 5, 2, 3] spares [] sum 10",
	}
	got := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("the ranks of generation 1 said\n  %s\nwant\n  %s\n%v", strings.Join(got, "\n  "), strings.Join(want, "\n  "), r)
	}
	// srun: the two killed tasks, and no task that exited with a code.
	if !regexp.MustCompile(`(?m)tasks 0-1: Killed$`).MatchString(r.Stderr) {
		t.Errorf("srun does not say tasks 0-1 were killed:\n%s", r.Stderr)
	}
	if strings.Contains(r.Stderr, "Exited with exit code") {
		t.Errorf("a task that was not killed failed:\n%s", r.Stderr)
	}
	os.RemoveAll(ready)
	p.checkClean()
}
