//go:build slurm

// Package slurm tests SPEC §17 under a real Slurm cluster: Debian's
// slurmctld, three slurmd and munged, each node a network namespace,
// built and torn down by the suite (make test-slurm; root, slurm-wlm,
// munge, iproute2, util-linux). Ranks are started by srun --mpi=pmi2 and
// bootstrap through PMI-1 (runtime/pmi.go).
//
// The cluster: a hub namespace sperli-slurm-hub holds the bridge
// (NET.1, the controller "ctl", where slurmctld, munged and srun run) and
// the nodes sperli-slurm1 … 3 hold NET.11 … NET.13 ("node1" … "node3"),
// NET being a documentation network. Nothing is put in the machine's own
// network namespace (no address, route or link; the suite checks that),
// nothing is written under /etc (SLURM_CONF and every file of the daemons
// are in a temporary directory; the suite checks /etc's modification
// times), every daemon is started and stopped by its PID, and no
// namespace is left. Without root or the packages the suite fails and
// says why: it never passes without having run.
package slurm

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sperli/tests/internal/testbin"
)

const (
	nsPrefix = "sperli-slurm"
	hubNS    = nsPrefix + "-hub"
	bridge   = "sperli-sbr0"
	nNodes   = 3
	net      = "203.0.113" // inside the test's namespaces only
	cpus     = 4           // per node: two jobs of two ranks a node fit at once
)

func nodeNS(i int) string   { return nsPrefix + strconv.Itoa(i) }
func nodeName(i int) string { return "node" + strconv.Itoa(i) }
func nodeAddr(i int) string { return fmt.Sprintf("%s.%d", net, 10+i) }

// daemon is one daemon the suite started, known by its PID.
type daemon struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// cluster is the Slurm cluster of the suite.
type cluster struct {
	dir     string
	conf    string // SLURM_CONF
	daemons []*daemon
}

// ip runs ip with args, or ip -batch - with the lines of batch.
func ip(batch string, args ...string) error {
	cmd := exec.Command("ip", args...)
	if batch != "" {
		cmd = exec.Command("ip", append(args, "-batch", "-")...)
		cmd.Stdin = strings.NewReader(batch)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %v\n%s%s", strings.Join(cmd.Args[1:], " "), err, batch, out)
	}
	return nil
}

// makeNet makes the hub with its bridge and the three node namespaces.
func makeNet() error {
	if err := ip("", "netns", "add", hubNS); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "link set lo up\nlink add %s type bridge\naddr add %s.1/24 dev %s\nlink set %s up\n", bridge, net, bridge, bridge)
	for i := 1; i <= nNodes; i++ {
		if err := ip("", "netns", "add", nodeNS(i)); err != nil {
			return err
		}
		fmt.Fprintf(&b, "link add sperli-sv%d type veth peer name eth0 netns %s\nlink set sperli-sv%d master %s up\n", i, nodeNS(i), i, bridge)
	}
	if err := ip(b.String(), "-n", hubNS); err != nil {
		return err
	}
	for i := 1; i <= nNodes; i++ {
		if err := ip(fmt.Sprintf("link set lo up\naddr add %s/24 dev eth0\nlink set eth0 up\n", nodeAddr(i)), "-n", nodeNS(i)); err != nil {
			return err
		}
	}
	return nil
}

// ours returns the suite's namespaces that exist.
func ours() []string {
	out, _ := exec.Command("ip", "netns", "list").Output()
	var nss []string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], nsPrefix) {
			nss = append(nss, f[0])
		}
	}
	return nss
}

func nsPIDs(ns string) []int {
	out, _ := exec.Command("ip", "netns", "pids", ns).Output()
	var ps []int
	for _, f := range strings.Fields(string(out)) {
		if p, err := strconv.Atoi(f); err == nil {
			ps = append(ps, p)
		}
	}
	return ps
}

// removeLeftovers removes the suite's namespaces (after killing what runs
// in them: the leftovers of a run killed before its teardown).
func removeLeftovers() error {
	for _, ns := range ours() {
		for try := 0; try < 100 && len(nsPIDs(ns)) > 0; try++ {
			for _, p := range nsPIDs(ns) {
				syscall.Kill(p, syscall.SIGKILL)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if ps := nsPIDs(ns); len(ps) > 0 {
			return fmt.Errorf("%s: processes %v do not end", ns, ps)
		}
		if err := ip("", "netns", "del", ns); err != nil {
			return err
		}
	}
	if left := ours(); len(left) > 0 {
		return fmt.Errorf("namespaces %q left", left)
	}
	return nil
}

// rootNet returns the addresses, routes and link names of the root
// network namespace, a line each.
func rootNet() ([]string, error) {
	var all []string
	for _, args := range [][]string{
		{"-o", "addr", "show"},
		{"-4", "-o", "route", "show", "table", "all"},
		{"-6", "-o", "route", "show", "table", "all"},
		{"-o", "link", "show"},
	} {
		out, err := exec.Command("ip", args...).Output()
		if err != nil {
			return nil, fmt.Errorf("ip %s: %v", strings.Join(args, " "), err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if args[len(args)-2] == "link" {
				if f := strings.Fields(l); len(f) > 1 {
					l = f[1]
				}
			}
			all = append(all, strings.TrimSpace(l))
		}
	}
	return all, nil
}

func rootNetAdded(before []string) []string {
	now, err := rootNet()
	if err != nil {
		return []string{err.Error()}
	}
	var added []string
	for _, l := range now {
		if !slices.Contains(before, l) {
			added = append(added, l)
		}
	}
	return added
}

// etcChanged returns the files under /etc modified since t.
func etcChanged(t time.Time) []string {
	var out []string
	filepath.WalkDir("/etc", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if fi, err := d.Info(); err == nil && fi.ModTime().After(t) {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// start starts a daemon, its output in dir/log/NAME.out, in a process
// group of its own; argv runs in a mount and UTS namespace of its own
// with host name host, in the network namespace ns (nsenter keeps /sys:
// slurmd reads it).
func (c *cluster) start(name, host, ns string, argv ...string) (*daemon, error) {
	script := `hostname "$1" || exit 120; ns=$2; shift 2; exec nsenter --net=/run/netns/"$ns" -- "$@"`
	cmd := exec.Command("unshare", append([]string{"-m", "--uts", "--propagation", "private", "/bin/sh", "-c", script, "sh", host, ns}, argv...)...)
	logPath := filepath.Join(c.dir, "log", name+".out")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), "SLURM_CONF="+c.conf)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %v", name, err)
	}
	d := &daemon{name: name, cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() { cmd.Wait(); close(d.done) }()
	c.daemons = append(c.daemons, d)
	return d, nil
}

// alive reports whether d still runs.
func (d *daemon) alive() bool {
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// stop ends d by its PID (SIGTERM, then SIGKILL after 10 s) and its
// process group, and waits for it.
func (d *daemon) stop() {
	if !d.alive() {
		return
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		d.cmd.Process.Kill()
		<-d.done
	}
	syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL) // what it left in its group
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	l := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// newCluster writes the configuration and starts munged, slurmctld and
// the slurmds, and waits until srun can run a step on every node.
func newCluster(dir string) (*cluster, error) {
	c := &cluster{dir: dir, conf: filepath.Join(dir, "slurm.conf")}
	for _, d := range []string{"ctld", "log", "munge"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return c, err
		}
	}
	for i := 1; i <= nNodes; i++ {
		for _, d := range []string{"spool", "tmpfs"} {
			if err := os.MkdirAll(filepath.Join(dir, d, nodeName(i)), 0o755); err != nil {
				return c, err
			}
		}
	}
	if err := makeNet(); err != nil {
		return c, err
	}
	key := make([]byte, 1024)
	if f, err := os.Open("/dev/urandom"); err != nil {
		return c, err
	} else {
		_, err = f.Read(key)
		f.Close()
		if err != nil {
			return c, err
		}
	}
	mungeKey := filepath.Join(dir, "munge", "munge.key")
	if err := os.WriteFile(mungeKey, key, 0o600); err != nil {
		return c, err
	}
	socket := filepath.Join(dir, "munge", "munge.socket")
	var nodes strings.Builder
	for i := 1; i <= nNodes; i++ {
		fmt.Fprintf(&nodes, "NodeName=%s NodeAddr=%s CPUs=%d State=UNKNOWN\n", nodeName(i), nodeAddr(i), cpus)
	}
	conf := fmt.Sprintf(`# made by tests/slurm: a cluster of network namespaces
ClusterName=sperlitest
SlurmctldHost=ctl(%[1]s.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=%[2]s
CredType=cred/munge
StateSaveLocation=%[3]s/ctld
SlurmdSpoolDir=%[3]s/spool/%%n
TmpFS=%[3]s/tmpfs/%%n
SlurmctldPidFile=%[3]s/ctld/slurmctld.pid
SlurmdPidFile=%[3]s/spool/%%n/slurmd.pid
SlurmctldLogFile=%[3]s/log/slurmctld.log
SlurmdLogFile=%[3]s/log/slurmd-%%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=none
MpiParams=ports=20000-20999
ReturnToService=2
MailProg=/bin/true
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
InactiveLimit=0
KillWait=2
%[4]sPartitionName=test Nodes=node[1-%[5]d] Default=YES MaxTime=INFINITE State=UP
`, net, socket, dir, nodes.String(), nNodes)
	if err := os.WriteFile(c.conf, []byte(conf), 0o644); err != nil {
		return c, err
	}
	if _, err := c.start("munged", "ctl", hubNS, "munged", "-F", "--socket="+socket, "--key-file="+mungeKey,
		"--pid-file="+filepath.Join(dir, "munge", "munged.pid"), "--log-file="+filepath.Join(dir, "log", "munged.log"),
		"--seed-file="+filepath.Join(dir, "munge", "seed")); err != nil {
		return c, err
	}
	if !waitFor(10*time.Second, func() bool { _, err := os.Stat(socket); return err == nil }) {
		return c, fmt.Errorf("munged made no socket within 10 s:\n%s", tail(filepath.Join(dir, "log", "munged.out"), 20))
	}
	if _, err := c.start("slurmctld", "ctl", hubNS, "slurmctld", "-D", "-i"); err != nil {
		return c, err
	}
	for i := 1; i <= nNodes; i++ {
		if _, err := c.start("slurmd-"+nodeName(i), nodeName(i), nodeNS(i), "slurmd", "-D", "-N", nodeName(i)); err != nil {
			return c, err
		}
	}
	// Up when a step runs on every node.
	var last string
	if !waitFor(60*time.Second, func() bool {
		for _, d := range c.daemons {
			if !d.alive() {
				last = d.name + " ended:\n" + tail(d.log, 20)
				return true
			}
		}
		cmd := c.command(context.Background(), dir, nil, "srun", "-N", strconv.Itoa(nNodes), "-n", strconv.Itoa(nNodes), "--immediate=5", "hostname")
		out, err := cmd.CombinedOutput()
		last = fmt.Sprintf("%v: %s", err, out)
		return err == nil && strings.Count(string(out), "\n") == nNodes
	}) || strings.Contains(last, "ended:") {
		return c, fmt.Errorf("the cluster did not come up: %s\nslurmctld:\n%s", last, tail(filepath.Join(dir, "log", "slurmctld.log"), 20))
	}
	// The first test's srun must not queue behind the probe's job.
	if err := c.settled(30*time.Second, "after the probe job"); err != nil {
		return c, err
	}
	return c, nil
}

// settled waits at most d until slurmctld has no job and calls every
// node idle (a job's nodes stay "completing" a moment after its last
// process ended, and an srun started then is queued and says so on its
// standard error); it says what it saw last if not. when names the
// moment, for the error.
func (c *cluster) settled(d time.Duration, when string) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var last string
	if testbin.Poll(ctx, 50*time.Millisecond, func() bool {
		jobs, err := c.command(ctx, "/", nil, "squeue", "-h", "-o", "%i %T").CombinedOutput()
		if err != nil || len(bytes.TrimSpace(jobs)) != 0 {
			last = fmt.Sprintf("squeue: %v: %q", err, jobs)
			return false
		}
		nodes, err := c.command(ctx, "/", nil, "sinfo", "-h", "-N", "-o", "%N %T").CombinedOutput()
		last = fmt.Sprintf("sinfo: %v: %q", err, nodes)
		lines := strings.Split(strings.TrimSpace(string(nodes)), "\n")
		return err == nil && len(lines) == nNodes && !slices.ContainsFunc(lines, func(l string) bool { return !strings.HasSuffix(l, " idle") })
	}) {
		return nil
	}
	return fmt.Errorf("slurmctld not settled (no job, every node idle) within %v %s: %s", d, when, last)
}

// command returns argv to run in the hub (where srun, squeue and scancel
// run) with SLURM_CONF, in dir, with env (the suite's base when nil).
func (c *cluster) command(ctx context.Context, dir string, env []string, argv ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", hubNS}, argv...)...)
	if env == nil {
		env = baseEnv
	}
	cmd.Env = testbin.WithEnv(env, "SLURM_CONF="+c.conf)
	cmd.Dir = dir
	return cmd
}

// teardown stops every daemon by its PID, last started first, and
// removes the namespaces.
func (c *cluster) teardown() error {
	for i := len(c.daemons) - 1; i >= 0; i-- {
		c.daemons[i].stop()
	}
	return removeLeftovers()
}

// stepsIdle reports what runs on the nodes besides slurmd: nothing once
// every step ended.
func (c *cluster) others() []string {
	var out []string
	for i := 1; i <= nNodes; i++ {
		for _, p := range nsPIDs(nodeNS(i)) {
			if slices.ContainsFunc(c.daemons, func(d *daemon) bool { return d.cmd.Process.Pid == p }) {
				continue
			}
			if pi, ok := testbin.ReadProc(p); !ok || pi.State == "Z" {
				continue
			}
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
			out = append(out, fmt.Sprintf("%s: %d %s", nodeName(i), p, bytes.ReplaceAll(bytes.TrimRight(b, "\x00"), []byte{0}, []byte{' '})))
		}
	}
	return out
}

// waitFor polls cond every 50 ms for at most d.
func waitFor(d time.Duration, cond func() bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return testbin.Poll(ctx, 50*time.Millisecond, cond)
}
