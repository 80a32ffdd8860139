//go:build hosts

package hosts

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// golden is the sum example's line (SPEC §16), as the launcher shows it.
const golden = "[rank 0] rows=3000000 total=4500001500000 expected=4500001500000 ok"

// wantSessions checks how many ssh sessions each test host's sshd started
// since before (from sessionCounts): want[i] for host i+1.
func wantSessions(t *testing.T, c *cluster, before []int, want ...int) {
	t.Helper()
	for i, n := range c.nodes {
		s, _ := n.sessions()
		if got := s - before[i]; got != want[i] {
			t.Errorf("%s (%s) started %d ssh sessions, want %d", n.ns, n.addr, got, want[i])
		}
	}
}

func sessionCounts(c *cluster) []int {
	var out []int
	for _, n := range c.nodes {
		s, _ := n.sessions()
		out = append(out, s)
	}
	return out
}

// TestSumThreeHosts: the sum example with 3 ranks on 3 test hosts, two
// given by address and one by name (both certificate forms of SPEC §4.1),
// prints the golden line; each host ran one rank, over ssh; nothing
// secret is left in the ranks' working directory.
func TestSumThreeHosts(t *testing.T) {
	c := newCluster(t, options{})
	j := c.newJob(t, c.host(1), c.host(2), c.host(3))
	before := sessionCounts(c)
	r := j.run("run", "-n", "3", "--hosts", j.hosts, sum)
	if r.Code != 0 || r.Stdout != golden+"\n" || r.Stderr != "" {
		t.Errorf("%v\nwant exit status 0, stdout %q and no launcher line", r, golden)
	}
	wantSessions(t, c, before, 1, 1, 1, 0)
	wantAgents(t, c.sshStarts(), c.host(1), c.host(2), c.host(3))
	j.checkClean(false)
}

// TestGoRanksThreeHosts: an executable PROGRAM given by a relative path is
// started on the remote hosts by its absolute path (a relative one would
// resolve in the remote home), and gosum on 3 hosts prints the golden line.
// Rank 1's line gives a port: it listens there, not at 21401.
func TestGoRanksThreeHosts(t *testing.T) {
	c := newCluster(t, options{})
	j := c.newJob(t, c.host(1), c.host(2)+" 47100", c.host(3))
	rel, err := filepath.Rel(j.work, gosum)
	if err != nil || filepath.IsAbs(rel) {
		t.Fatalf("no relative path from %s to %s: %v", j.work, gosum, err)
	}
	r := j.run("run", "-n", "3", "--hosts", j.hosts, rel)
	if r.Code != 0 || r.Stdout != golden+"\n" || r.Stderr != "" {
		t.Errorf("%v\nwant exit status 0, stdout %q and no launcher line", r, golden)
	}
	wantAgents(t, c.sshStarts(), c.host(1), c.host(2), c.host(3))
	j.checkClean(false)
}

// TestRelativeWdir: a relative --wdir is the directory below the
// launcher's working directory on every host, not below the remote home.
func TestRelativeWdir(t *testing.T) {
	c := newCluster(t, options{})
	j := c.newJob(t, c.host(1), c.host(2), c.host(3))
	ranks := filepath.Join(filepath.Dir(j.work), "ranks")
	mkdirAll(t, ranks)
	r := j.run("run", "-n", "3", "--hosts", j.hosts, "--wdir", "../ranks", sum, "1000")
	if want := "[rank 0] rows=1000 total=500500 expected=500500 ok\n"; r.Code != 0 || r.Stdout != want || r.Stderr != "" {
		t.Errorf("%v\nwant exit status 0, stdout %q and no launcher line", r, want)
	}
	wantAgents(t, c.sshStarts(), c.host(1), c.host(2), c.host(3))
	if ents, _ := os.ReadDir(ranks); len(ents) != 0 {
		t.Errorf("the ranks' working directory holds %v", ents)
	}
	j.checkClean(false)
}

// TestMixedJob: a job made by `sperli job make` for three test hosts, its
// ranks started by hand over ssh as another launcher would: Starlark ranks
// on hosts 1 and 3, a Go rank on host 2. Rank 0 prints the golden line.
func TestMixedJob(t *testing.T) {
	c := newCluster(t, options{})
	j := c.newJob(t, c.host(1), c.host(2), c.host(3))
	out := filepath.Join(j.aux, "job")
	mk := j.run("job", "make", "-n", "3", "--hosts", j.hosts, "--out", out)
	if mk.Code != 0 {
		t.Fatalf("sperli job make: %v", mk)
	}
	for _, m := range secretMarks {
		if strings.Contains(mk.Stdout+mk.Stderr, m) {
			t.Errorf("sperli job make printed %q", m)
		}
	}
	commands := [][]string{
		{sperli, "rank", "--wdir", j.work, sum},
		{gosum},
		{sperli, "rank", "--wdir", j.work, sum},
	}
	procs := make([]*proc, 3)
	for r, cmd := range commands {
		f, err := os.Open(filepath.Join(out, fmt.Sprintf("rank-%d.job", r)))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		argv := append([]string{"ssh", "-p", "62222", "-o", "BatchMode=yes", c.host(r + 1)}, cmd...)
		procs[r] = j.start(f, argv...)
	}
	for r, p := range procs {
		res := p.Wait(t, timeout)
		want := ""
		if r == 0 {
			want = strings.TrimPrefix(golden, "[rank 0] ") + "\n"
		}
		if res.Code != 0 || res.Stdout != want {
			t.Errorf("rank %d (%s on %s): %v\nwant exit status 0 and stdout %q", r, commands[r][0], c.host(r+1), res, want)
		}
	}
	// The descriptions are where they were told to go, and only there.
	j.checkClean(false)
}

// TestRefusedHost: a host list that names a refused host, on a used or an
// unused line, by the reserved names, SPERLI_REFUSED_HOSTS or
// --deny-hosts, is refused (exit status 2, one line naming the host and
// line) before any ssh is started: no ssh ran, no sshd saw a connection.
func TestRefusedHost(t *testing.T) {
	c := newCluster(t, options{})
	for _, tc := range []struct {
		name  string
		lines []string
		env   []string
		deny  string
		host  string
		line  int
	}{
		{"reserved name on an unused line", []string{c.host(1), c.host(2), c.host(3), "x.host-a.invalid"}, nil, "", "x.host-a.invalid", 4},
		{"SPERLI_REFUSED_HOSTS names a test host", []string{c.host(1), c.host(2), c.host(3)}, []string{"SPERLI_REFUSED_HOSTS=" + c.host(2)}, "", c.host(2), 2},
		{"--deny-hosts names the host given by name", []string{c.host(1), c.host(2), c.host(3), c.host(4)}, nil, strings.ToUpper(c.host(3)) + ".", c.host(3), 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := c.newJob(t, tc.lines...)
			j.env = withEnv(j.env, tc.env...)
			args := []string{"run", "-n", "3", "--hosts", j.hosts}
			if tc.deny != "" {
				args = append(args, "--deny-hosts", writeFile(t, filepath.Join(j.aux, "deny.txt"), tc.deny+"\n", 0o644))
			}
			var conns []int
			for _, n := range c.nodes {
				_, k := n.sessions()
				conns = append(conns, k)
			}
			starts := len(c.sshStarts())
			r := j.run(append(args, sum)...)
			if r.Code != 2 || r.Stdout != "" {
				t.Errorf("%v\nwant exit status 2 and no output", r)
			}
			got := launcherLines(t, r)
			if len(got) != 1 || !strings.Contains(got[0], "H1614") || !strings.Contains(strings.ToLower(got[0]), tc.host) ||
				!strings.Contains(got[0], fmt.Sprintf("%s:%d", j.hosts, tc.line+1)) {
				t.Errorf("launcher lines %q, want one with H1614 naming %s and %s:%d", got, tc.host, j.hosts, tc.line+1)
			}
			if n := len(c.sshStarts()) - starts; n != 0 {
				t.Errorf("ssh was started %d times, want 0: %q", n, c.sshStarts()[starts:])
			}
			for i, n := range c.nodes {
				if _, k := n.sessions(); k != conns[i] {
					t.Errorf("%s saw %d connections, want 0", n.ns, k-conns[i])
				}
			}
			j.checkClean(false)
		})
	}
}

// TestHostUnreachable: a host whose sshd is down, or whose sshd refuses
// the client's key → a clear error naming the host, a non-zero exit status
// within a bounded time, and nothing left running on any host.
func TestHostUnreachable(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    options
		down int
		why  string // what ssh says, in the rank's output
	}{
		{"sshd down", options{}, 2, `connect to host %s port 62222: Connection refused`},
		{"key refused", options{refuseKey: []int{2}}, 0, `root@%s: Permission denied \(publickey\)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, tc.o)
			if tc.down != 0 {
				c.stopSSHD(t, c.node(tc.down))
			}
			j := c.newJob(t, c.host(1), c.host(2), c.host(3))
			r := j.run("run", "-n", "3", "--hosts", j.hosts, "--silence", "1000", sum)
			if r.Code == 0 || r.Code == 2 {
				t.Errorf("%v\nwant a failure's exit status", r)
			}
			if r.Took > 20*time.Second {
				t.Errorf("the launcher took %v, want well under 20 s", r.Took)
			}
			host := regexp.QuoteMeta(c.host(2))
			says := strings.Join(launcherLines(t, r), "\n")
			if !regexp.MustCompile(`(?m)^rank 1 .*` + host + `.*` + fmt.Sprintf(tc.why, host)).MatchString(says) {
				t.Errorf("launcher lines:\n%s\nwant one naming rank 1, %s and why (%s)\n%v", says, c.host(2), fmt.Sprintf(tc.why, host), r)
			}
			j.checkClean(false)
		})
	}
}

// TestInterrupt: SIGINT to the launcher → it ends at once, and no rank
// is left on any test host: once while every rank runs its program, once
// while the ranks still wait in the join for a rank whose host does not
// answer (its sshd is stopped).
func TestInterrupt(t *testing.T) {
	t.Run("ranks running", func(t *testing.T) {
		c := newCluster(t, options{})
		j := c.newJob(t, c.host(1), c.host(2), c.host(3))
		l := j.sperli("run", "-n", "3", "--hosts", j.hosts, hold, j.aux)
		pids := waitFiles(t, l, j.aux, "inc-0-rank-0.pid", "inc-0-rank-1.pid", "inc-0-rank-2.pid")
		var ranks []procInfo
		for r, s := range pids {
			pid, _ := strconv.Atoi(s)
			if ns := netnsOf(pid); ns != c.node(r+1).ns {
				t.Errorf("rank %d (pid %d) runs in namespace %q, want %s", r, pid, ns, c.node(r+1).ns)
			}
			pi, _ := readStat(pid)
			ranks = append(ranks, pi)
		}
		if ssh := sshChildren(l); len(ssh) != 3 {
			t.Errorf("the launcher runs %d ssh processes %v, want 3: one per remote host", len(ssh), ssh)
		}
		interrupt(t, j, l)
		for r, pi := range ranks {
			if alive(pi) {
				t.Errorf("rank %d (pid %d) still runs", r, pi.PID)
			}
		}
	})
	t.Run("ranks joining", func(t *testing.T) {
		c := newCluster(t, options{})
		stopped := c.node(3).sshd.Process
		if err := stopped.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		defer stopped.Signal(syscall.SIGCONT)
		j := c.newJob(t, c.host(1), c.host(2), c.host(3))
		l := j.sperli("run", "-n", "3", "--hosts", j.hosts, sum, "1000")
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		joining := func() bool {
			for _, n := range []*node{c.node(1), c.node(2)} {
				found := false
				for _, p := range n.pids() {
					if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", p)); exe == sperli {
						found = true
					}
				}
				if !found {
					return false
				}
			}
			return true
		}
		if !poll(ctx, 20*time.Millisecond, joining) {
			t.Fatalf("ranks 0 and 1 did not start on %s and %s", c.node(1).ns, c.node(2).ns)
		}
		interrupt(t, j, l)
		stopped.Signal(syscall.SIGCONT)
	})
}

// TestOneSessionPerHost: twelve ranks, three on each test host, run over
// four ssh sessions (SPEC §18): the launcher runs one ssh per host, each
// host's sshd started one session and runs one agent, which runs that
// host's three ranks; an interrupt leaves nothing on any host.
func TestOneSessionPerHost(t *testing.T) {
	c := newCluster(t, options{})
	var lines []string
	for i := 1; i <= nHosts; i++ {
		lines = append(lines, c.host(i)+" slots=3")
	}
	j := c.newJob(t, lines...)
	before := sessionCounts(c)
	l := j.sperli("run", "-n", "12", "--hosts", j.hosts, hold, j.aux)
	var names []string
	for r := 0; r < 12; r++ {
		names = append(names, fmt.Sprintf("inc-0-rank-%d.pid", r))
	}
	pids := waitFiles(t, l, j.aux, names...)
	for r, s := range pids {
		pid, _ := strconv.Atoi(s)
		if ns, want := netnsOf(pid), c.node(r/3+1).ns; ns != want {
			t.Errorf("rank %d (pid %d) runs in namespace %q, want %s", r, pid, ns, want)
		}
	}
	if ssh := sshChildren(l); len(ssh) != nHosts {
		t.Errorf("the launcher runs %d ssh processes %v, want %d: one per remote host", len(ssh), ssh, nHosts)
	}
	for _, n := range c.nodes {
		if agentOn(n) == 0 {
			t.Errorf("no agent runs on %s", n.ns)
		}
	}
	wantSessions(t, c, before, 1, 1, 1, 1)
	wantAgents(t, c.sshStarts(), c.host(1), c.host(2), c.host(3), c.host(4))
	interrupt(t, j, l)
}

// interrupt sends SIGINT to the launcher l and checks that it ends at once
// with exit status 130 (128 + SIGINT), saying so, and that nothing is left
// running.
func interrupt(t *testing.T, j *job, l *proc) {
	t.Helper()
	if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", l.Cmd.Process.Pid)); exe != sperli {
		t.Fatalf("the launcher's pid %d runs %q, want %s", l.Cmd.Process.Pid, exe, sperli)
	}
	sent := time.Now()
	if err := l.Cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	r := l.Wait(t, timeout)
	if r.Code != 130 {
		t.Errorf("%v\nwant exit status 130", r)
	}
	if d := time.Since(sent); d > 5*time.Second {
		t.Errorf("the launcher ended %v after SIGINT, want at once", d)
	}
	if got := launcherLines(t, r); len(got) != 1 || got[0] != "interrupt: ending every rank" {
		t.Errorf("launcher lines %q, want [\"interrupt: ending every rank\"]", got)
	}
	j.checkClean(false)
}

// Stencil sizes: 300 cells, 60 steps, a checkpoint every 10 steps.
var stencilArgs = []string{"300", "60", "10"}

// stencilLine is the checksum line of stencil.star on 3 ranks on this
// machine, without failure.
func stencilLine(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	cmd := exec.Command(sperli, append([]string{"run", "-n", "3", "--checkpoint-dir", filepath.Join(d, "ckpt"), stencil}, stencilArgs...)...)
	cmd.Dir, cmd.Env = d, withEnv(baseEnv, "TMPDIR="+d)
	out, err := cmd.Output()
	if got := checksums(string(out)); err != nil || len(got) != 1 || len(lines(string(out))) != 1 {
		t.Fatalf("stencil.star on this machine: %v\n%s", err, out)
	}
	return checksums(string(out))[0]
}

var checksumRE = regexp.MustCompile(`^\[rank 0\] cells=\d+ steps=\d+ checksum=\d+$`)

var backRE = regexp.MustCompile(`^incarnation \d+: every rank back in its program \d+ ms after the loss$`)

// TestInPlaceAcrossHosts: 3 ranks and a spare on four test hosts; rank 1
// (host 2) is killed after its first checkpoint and the spare on host 4
// takes its place in place: one generation line, the result of a run
// without failure, and one ssh session per host — nobody relaunched.
func TestInPlaceAcrossHosts(t *testing.T) {
	want := strings.Replace(stencilLine(t), "[rank 0]", "[rank 0 · slot 0]", 1)
	c := newCluster(t, options{})
	j := c.newJob(t, c.host(1), c.host(2), c.host(3), c.host(4))
	j.env = withEnv(j.env, "SPERLI_TEST_FAILURE_SCHEDULE=0:1")
	before := sessionCounts(c)
	r := j.run(append([]string{"run", "-n", "3", "--spares", "1", "--hosts", j.hosts, "--checkpoint-dir", "ckpt", "--silence", "1000", stencil}, stencilArgs...)...)
	var got []string
	for _, l := range lines(r.Stdout) {
		if strings.Contains(l, "checksum=") {
			got = append(got, l)
		}
	}
	if r.Code != 0 || len(got) != 1 || got[0] != want {
		t.Errorf("%v\nwant exit status 0 and one checksum line %q", r, want)
	}
	line := regexp.QuoteMeta(fmt.Sprintf("generation 1: rank 1 (slot 1 on %s) lost: ", c.host(2))) + ".+" +
		regexp.QuoteMeta(fmt.Sprintf("; slot 3 on %s takes rank 1; back in ", c.host(4))) + `\d+ ms`
	wantSays(t, r, line)
	wantSessions(t, c, before, 1, 1, 1, 1)
	j.checkClean(true)
}

// checksums returns the checksum lines of the launcher's output.
func checksums(out string) []string {
	var got []string
	for _, l := range lines(out) {
		if checksumRE.MatchString(l) {
			got = append(got, l)
		}
	}
	return got
}

// TestRankKilled: a rank killed on its host → the launcher says so,
// restarts the job with that rank on the spare (fourth) host, and the job
// ends with the result of a run without failure. Once by the test failure
// schedule (the rank SIGKILLs itself after its first checkpoint, on its
// host), once by a SIGKILL from outside to the rank's process in its
// namespace.
func TestRankKilled(t *testing.T) {
	want := stencilLine(t)
	lost := `rank 1 lost: .+`
	restart := regexp.QuoteMeta("restart 1 of 3: incarnation 1")
	t.Run("schedule", func(t *testing.T) {
		c := newCluster(t, options{})
		j := c.newJob(t, c.host(1), c.host(2), c.host(3), c.host(4))
		j.env = withEnv(j.env, "SPERLI_TEST_FAILURE_SCHEDULE=0:1")
		before := sessionCounts(c)
		r := j.run(append([]string{"run", "-n", "3", "--hosts", j.hosts, "--checkpoint-dir", "ckpt", "--silence", "1000", stencil}, stencilArgs...)...)
		if got := checksums(r.Stdout); r.Code != 0 || len(got) != 1 || got[0] != want {
			t.Errorf("%v\nwant exit status 0 and one checksum line %q", r, want)
		}
		moves := regexp.QuoteMeta(fmt.Sprintf("rank 1 restarts on %s (%s)", c.host(4), j.hostLine(4)))
		wantSays(t, r, lost, moves, restart)
		// Incarnation 0 on hosts 1-3, incarnation 1 on 1, 4, 3.
		wantSessions(t, c, before, 2, 1, 2, 1)
		j.checkClean(true)
	})
	t.Run("SIGKILL from outside", func(t *testing.T) {
		c := newCluster(t, options{})
		j := c.newJob(t, c.host(1), c.host(2), c.host(3), c.host(4))
		l := j.sperli("run", "-n", "3", "--hosts", j.hosts, "--checkpoint-dir", "ckpt", "--silence", "1000", hold, j.aux)
		pids := waitFiles(t, l, j.aux, "inc-0-rank-0.pid", "inc-0-rank-1.pid", "inc-0-rank-2.pid")
		pid, _ := strconv.Atoi(pids[1])
		if ns := netnsOf(pid); ns != c.node(2).ns {
			t.Fatalf("rank 1 (pid %d) runs in %q, want %s", pid, ns, c.node(2).ns)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		r := l.Wait(t, timeout)
		if r.Code != 0 {
			t.Errorf("%v\nwant exit status 0", r)
		}
		moves := regexp.QuoteMeta(fmt.Sprintf("rank 1 restarts on %s (%s)", c.host(4), j.hostLine(4)))
		wantSays(t, r, lost, moves, restart)
		for rank, host := range []int{1, 4, 3} {
			w := fmt.Sprintf("rank %d inc 1 host %s resumed 1", rank, c.host(host))
			if !slices.Contains(rankLines(r.Stdout+r.Stderr, rank), w) {
				t.Errorf("rank %d's output lacks %q\n%v", rank, w, r)
			}
		}
		j.checkClean(true)
	})
}

// TestAgentKilled: the agent of a host that runs two ranks is killed
// from outside: its ssh session ends, and both ranks are lost, each said
// once with ssh's words (the ranks die with their agent); the job
// restarts them on the unused hosts and ends with the result of a run
// without failure.
func TestAgentKilled(t *testing.T) {
	c := newCluster(t, options{})
	j := c.newJob(t, c.host(1), c.host(2)+" slots=2", c.host(3), c.host(4))
	l := j.sperli("run", "-n", "3", "--hosts", j.hosts, "--checkpoint-dir", "ckpt", "--silence", "1000", hold, j.aux)
	pids := waitFiles(t, l, j.aux, "inc-0-rank-0.pid", "inc-0-rank-1.pid", "inc-0-rank-2.pid")
	agent := agentOn(c.node(2))
	if agent == 0 {
		t.Fatalf("no agent on %s", c.node(2).ns)
	}
	if err := syscall.Kill(agent, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r := l.Wait(t, timeout)
	if r.Code != 0 {
		t.Errorf("%v\nwant exit status 0", r)
	}
	for _, rank := range []int{1, 2} {
		pid, _ := strconv.Atoi(pids[rank])
		if pi, ok := readStat(pid); ok && pi.State != "Z" {
			t.Errorf("rank %d (pid %d) outlived its agent", rank, pid)
		}
	}
	why := regexp.QuoteMeta(fmt.Sprintf("ssh to %s ended with exit status 255 before the rank's status record", c.host(2))) + ".*"
	got := launcherLines(t, r)
	lost := slices.DeleteFunc(slices.Clone(got), func(l string) bool { return !strings.Contains(l, " lost: ") })
	slices.Sort(lost)
	if len(lost) != 2 || !regexp.MustCompile("^rank 1 lost: "+why+"$").MatchString(lost[0]) || !regexp.MustCompile("^rank 2 lost: "+why+"$").MatchString(lost[1]) {
		t.Errorf("loss lines %q, want ranks 1 and 2 lost once each with ssh's words\n%v", lost, r)
	}
	for _, w := range []string{
		fmt.Sprintf("rank 1 restarts on %s (%s)", c.host(3), j.hostLine(3)),
		fmt.Sprintf("rank 2 restarts on %s (%s)", c.host(4), j.hostLine(4)),
		"restart 1 of 3: incarnation 1",
	} {
		if !slices.Contains(got, w) {
			t.Errorf("no launcher line %q\n%v", w, r)
		}
	}
	for rank, host := range []int{1, 3, 4} {
		w := fmt.Sprintf("rank %d inc 1 host %s resumed 1", rank, c.host(host))
		if !slices.Contains(rankLines(r.Stdout+r.Stderr, rank), w) {
			t.Errorf("rank %d's output lacks %q\n%v", rank, w, r)
		}
	}
	j.checkClean(true)
}

// wantSays checks the launcher's lines against want, in order: want[i] is
// a regular expression matched whole against line i, and there are no
// other lines.
func wantSays(t testing.TB, r result, want ...string) {
	t.Helper()
	// The time of a restart comes when the restarted ranks report, before
	// or after later lines: not among the ordered ones.
	got := slices.DeleteFunc(launcherLines(t, r), func(l string) bool { return backRE.MatchString(l) })
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = regexp.MustCompile("^(?:" + want[i] + ")$").MatchString(got[i])
	}
	if !ok {
		t.Errorf("launcher lines:\n  %s\nwant lines matching:\n  %s\n%v", strings.Join(got, "\n  "), strings.Join(want, "\n  "), r)
	}
}

// wantAgents checks that ssh was started once per host of hosts, as the
// launcher starts a host's agent (SPEC §18): `ssh -p 62222 -o
// BatchMode=yes HOST SPERLI spawn`, whatever the number of its ranks (the
// ranks' commands and environment travel in the session).
func wantAgents(t testing.TB, starts []string, hosts ...string) {
	t.Helper()
	var want []string
	for _, h := range hosts {
		want = append(want, fmt.Sprintf("-p 62222 -o BatchMode=yes %s %s spawn", h, sperli))
	}
	got := slices.Clone(starts)
	slices.Sort(got) // the order the ssh processes came to the log
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("ssh started as\n  %s\nwant one session per host:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// sshChildren returns the ssh processes the launcher l runs now.
func sshChildren(l *proc) []int {
	var out []int
	for _, ch := range children(l.Cmd.Process.Pid) {
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", ch.PID)); filepath.Base(exe) == "ssh" && ch.State != "Z" {
			out = append(out, ch.PID)
		}
	}
	return out
}

// agentOn returns the pid of the host agent (sperli spawn) on n, 0 when
// none runs there.
func agentOn(n *node) int {
	for _, p := range n.pids() {
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", p)); exe == sperli && strings.HasSuffix(cmdline(p), " spawn") {
			return p
		}
	}
	return 0
}
