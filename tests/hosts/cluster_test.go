//go:build hosts

package hosts

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"sperli/tests/internal/testbin"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The test hosts: network namespaces sperli-node1 … sperli-node4, each with
// a veth pair whose other end is a port of the bridge sperli-br0 in the hub
// namespace sperli-node-hub, where the launcher and the test's own ssh
// clients run. The bridge holds NET.1, host i holds NET.(10+i), where NET
// is the first of the three documentation networks (RFC 5737) that this
// machine does not use. Nothing of the test network is in the machine's
// own (root) namespace: no address, no route, no link (its package mirrors
// may resolve to a documentation network, and a route there would cut the
// machine off); testMain and every cluster check that. Host 3 is also
// node3.sperli.test, through the hosts file that every test host and the
// launcher see as /etc/hosts.
const (
	nHosts    = 4
	nsPrefix  = "sperli-node" // + 1 … 4
	hubNS     = nsPrefix + "-hub"
	bridge    = "sperli-br0"
	vethRoot  = "sperli-v" // + 1 … 4: the hub's end
	sshPort   = 62222
	dnsHost   = 3 // the host that is also reached by name
	dnsDomain = "sperli.test"
)

// docNets are the documentation networks; the first one that no address
// or route of this machine overlaps is taken.
var docNets = []string{"198.51.100", "203.0.113", "192.0.2"}

func nsName(i int) string   { return nsPrefix + strconv.Itoa(i) }
func vethName(i int) string { return vethRoot + strconv.Itoa(i) }

// node is one test host.
type node struct {
	i      int    // 1 … 4
	ns     string // the network namespace
	addr   string // its address
	name   string // its DNS name (every host has one; tests use host 3's)
	dir    string // its sshd's files
	tmp    string // TMPDIR of the sessions (and so of the ranks) on it
	config string // sshd_config
	log    string // sshd's log
	refuse bool   // authorized_keys holds a stranger's key, not the client's
	sshd   *exec.Cmd
	done   chan struct{}
}

// cluster is the four test hosts of one test and the client side of ssh.
type cluster struct {
	t         testing.TB
	dir       string
	net       string // e.g. "198.51.100"
	nodes     []*node
	hostsFile string // /etc/hosts of the test hosts and of the launcher
	sshConfig string // the client configuration (ssh -F)
	sshLog    string // the ssh wrapper's log: one line per ssh started
	pathDir   string // holds the ssh wrapper; first on the launcher's PATH
	bashrc    string // the passwd home's .bashrc, hidden on the test hosts
}

// options of a cluster.
type options struct {
	refuseKey []int // hosts (1 … 4) whose sshd does not know the client's key
}

var (
	netOnce sync.Once
	netBase string
	netErr  error
)

// pickNet returns the documentation network the test hosts use.
func pickNet() (string, error) {
	netOnce.Do(func() {
		out, err := exec.Command("ip", "-4", "-o", "route", "show", "table", "all").Output()
		if err != nil {
			netErr = fmt.Errorf("ip route show: %v", err)
			return
		}
		addrs, err := exec.Command("ip", "-4", "-o", "addr", "show").Output()
		if err != nil {
			netErr = fmt.Errorf("ip addr show: %v", err)
			return
		}
		var used []netip.Prefix
		for _, l := range strings.Split(string(out)+string(addrs), "\n") {
			for _, f := range strings.Fields(l) {
				if p, err := netip.ParsePrefix(f); err == nil && p.Bits() > 0 {
					used = append(used, p.Masked())
				} else if a, err := netip.ParseAddr(f); err == nil && a.Is4() {
					used = append(used, netip.PrefixFrom(a, 32))
				}
			}
		}
	next:
		for _, n := range docNets {
			p := netip.MustParsePrefix(n + ".0/24")
			for _, u := range used {
				if u.Overlaps(p) {
					continue next
				}
			}
			netBase = n
			return
		}
		netErr = fmt.Errorf("every documentation network (%s) is in use on this machine", strings.Join(docNets, ".0/24, ")+".0/24")
	})
	return netBase, netErr
}

// newCluster makes the four test hosts, each with its sshd listening, and
// tears them down in t.Cleanup, after checking that no process but the
// host's sshd is left on any of them.
func newCluster(t *testing.T, o options) *cluster {
	t.Helper()
	if err := removeLeftovers(); err != nil {
		t.Fatalf("leftovers of an earlier run: %v", err)
	}
	base, err := pickNet()
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, dir: t.TempDir(), net: base}
	t.Cleanup(func() {
		c.checkIdle(t)
		if t.Failed() {
			c.dumpLogs(t)
		}
		if err := c.teardown(); err != nil {
			t.Errorf("tearing the test hosts down: %v", err)
		}
	})
	for i := 1; i <= nHosts; i++ {
		n := &node{
			i: i, ns: nsName(i), addr: fmt.Sprintf("%s.%d", base, 10+i),
			name: fmt.Sprintf("node%d.%s", i, dnsDomain), dir: filepath.Join(c.dir, nsName(i)),
			refuse: slices.Contains(o.refuseKey, i),
		}
		n.tmp = filepath.Join(n.dir, "tmp")
		n.config, n.log = filepath.Join(n.dir, "sshd_config"), filepath.Join(n.dir, "sshd.log")
		mkdirAll(t, n.tmp)
		c.nodes = append(c.nodes, n)
	}
	c.writeFiles(t)
	before, err := rootNet()
	if err != nil {
		t.Fatal(err)
	}
	c.makeNet(t)
	if err := rootNetSame(before); err != nil {
		t.Fatalf("making the test hosts changed the root namespace: %v", err)
	}
	for _, n := range c.nodes {
		c.startSSHD(t, n)
	}
	c.probe(t)
	return c
}

// node returns host i (1 … 4).
func (c *cluster) node(i int) *node { return c.nodes[i-1] }

// host returns how host lists name host i: its address, or its DNS name
// for host 3.
func (c *cluster) host(i int) string {
	if i == dnsHost {
		return c.node(i).name
	}
	return c.node(i).addr
}

func mkdirAll(t testing.TB, d string) {
	t.Helper()
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
}

func keygen(t testing.TB, path string) string {
	t.Helper()
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "sperli-test", "-f", path).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -f %s: %v\n%s", path, err, out)
	}
	pub, err := os.ReadFile(path + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(pub))
	return f[0] + " " + f[1]
}

// writeFiles makes the keys, the sshd configurations, the client
// configuration with its known hosts, the hosts file and the ssh wrapper.
func (c *cluster) writeFiles(t *testing.T) {
	client := filepath.Join(c.dir, "client", "id_ed25519")
	mkdirAll(t, filepath.Dir(client))
	clientPub := keygen(t, client)
	strangerPub := keygen(t, filepath.Join(c.dir, "client", "stranger"))

	var known, hostsFile strings.Builder
	hostsFile.WriteString("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
	for _, n := range c.nodes {
		hostPub := keygen(t, filepath.Join(n.dir, "host_ed25519_key"))
		fmt.Fprintf(&known, "[%s]:%d %s\n", n.addr, sshPort, hostPub)
		fmt.Fprintf(&known, "[%s]:%d %s\n", n.name, sshPort, hostPub)
		fmt.Fprintf(&hostsFile, "%s\t%s node%d\n", n.addr, n.name, n.i)
		auth := clientPub
		if n.refuse {
			auth = strangerPub
		}
		writeFile(t, filepath.Join(n.dir, "authorized_keys"), auth+"\n", 0o600)
		writeFile(t, n.config, fmt.Sprintf(`# sshd of test host %[1]d (%[2]s), made by tests/hosts
Port %[3]d
ListenAddress %[4]s
HostKey %[5]s/host_ed25519_key
AuthorizedKeysFile %[5]s/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
# the test's files live under /tmp, which is writable by all
StrictModes no
PidFile %[5]s/sshd.pid
LogLevel VERBOSE
PrintMotd no
X11Forwarding no
AllowTcpForwarding no
Subsystem sftp none
MaxStartups 64
# where the ranks' compiled-module cache and temporary files go
SetEnv XDG_CACHE_HOME=%[5]s/cache TMPDIR=%[6]s
`, n.i, n.ns, sshPort, n.addr, n.dir, n.tmp), 0o644)
	}
	c.hostsFile = writeFile(t, filepath.Join(c.dir, "hosts"), hostsFile.String(), 0o644)
	knownHosts := writeFile(t, filepath.Join(c.dir, "client", "known_hosts"), known.String(), 0o600)
	c.sshConfig = writeFile(t, filepath.Join(c.dir, "client", "ssh_config"), fmt.Sprintf(`# The client side of the test hosts (ssh -F): this key, these host keys.
Host *
  User root
  IdentityFile %s
  IdentitiesOnly yes
  UserKnownHostsFile %s
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  UpdateHostKeys no
  ConnectTimeout 5
  ServerAliveInterval 2
  ServerAliveCountMax 3
  LogLevel ERROR
`, client, knownHosts), 0o600)

	// ssh reads ~/.ssh of the passwd entry's home, not of $HOME, so the
	// launcher finds this wrapper first on its PATH: it logs the start and
	// runs the real ssh with the words it was given, after -F CONFIG.
	realSSH, err := exec.LookPath("ssh")
	if err != nil {
		t.Fatalf("no ssh client: %v", err)
	}
	c.pathDir = filepath.Join(c.dir, "path")
	mkdirAll(t, c.pathDir)
	c.sshLog = writeFile(t, filepath.Join(c.dir, "ssh.log"), "", 0o600)
	writeFile(t, filepath.Join(c.pathDir, "ssh"), fmt.Sprintf(`#!/bin/sh
# Test-only (tests/hosts): the real ssh with the test hosts' client config.
printf '%%s\n' "$*" >> %s
exec %s -F %s "$@"
`, shq(c.sshLog), shq(realSSH), shq(c.sshConfig)), 0o755)

	if u, err := user.Current(); err == nil {
		if _, err := os.Stat(filepath.Join(u.HomeDir, ".bashrc")); err == nil {
			c.bashrc = filepath.Join(u.HomeDir, ".bashrc")
		}
	}
	// sshd's privilege separation directory, as the Debian package's
	// service makes it.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		t.Fatal(err)
	}
}

func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

var writeFile = testbin.WriteFile

// ip runs ip with args, or ip -batch - with the lines of batch on stdin.
func ip(batch string, args ...string) error {
	cmd := exec.Command("ip", args...)
	if batch != "" {
		cmd = exec.Command("ip", append(args, "-batch", "-")...)
		cmd.Stdin = strings.NewReader(batch)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v\n%s%s", strings.Join(cmd.Args[1:], " "), err, batch, out)
	}
	return nil
}

// makeNet makes the hub namespace with the bridge, the namespaces of the
// test hosts and the veth pairs between them, and checks that every test
// host is reached from the hub through the bridge and nothing else.
func (c *cluster) makeNet(t *testing.T) {
	if err := ip("", "netns", "add", hubNS); err != nil {
		t.Fatalf("making the hub namespace (are you root?): %v", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "link set lo up\nlink add %s type bridge\naddr add %s.1/24 dev %s\nlink set %s up\n", bridge, c.net, bridge, bridge)
	for _, n := range c.nodes {
		if err := ip("", "netns", "add", n.ns); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "link add %s type veth peer name eth0 netns %s\n", vethName(n.i), n.ns)
		fmt.Fprintf(&b, "link set %s master %s up\n", vethName(n.i), bridge)
	}
	if err := ip(b.String(), "-n", hubNS); err != nil {
		t.Fatalf("making the test network: %v", err)
	}
	for _, n := range c.nodes {
		batch := fmt.Sprintf("link set lo up\naddr add %s/24 dev eth0\nlink set eth0 up\n", n.addr)
		if err := ip(batch, "-n", n.ns); err != nil {
			t.Fatal(err)
		}
	}
	// Nothing for a test host may leave through another interface.
	for _, n := range c.nodes {
		out, err := exec.Command("ip", "-n", hubNS, "-o", "route", "get", n.addr).Output()
		if err != nil || !strings.Contains(string(out), " dev "+bridge+" ") {
			t.Fatalf("%s is not routed through %s in %s: %s %v", n.addr, bridge, hubNS, out, err)
		}
		out, err = exec.Command("ip", "-n", n.ns, "route", "show", "default").Output()
		if err != nil || len(bytes.TrimSpace(out)) != 0 {
			t.Fatalf("%s has a default route %q (%v): want none", n.ns, out, err)
		}
	}
}

// rootNet returns the addresses, routes and links of the root network
// namespace (the machine's own), each a line.
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
		for _, l := range lines(string(out)) {
			if args[len(args)-2] == "link" {
				// Only the name: counters and states change by themselves.
				if f := strings.Fields(l); len(f) > 1 {
					l = f[1]
				}
			}
			all = append(all, strings.TrimSpace(l))
		}
	}
	return all, nil
}

// rootNetSame returns an error naming every address, route or link of
// the root namespace that is there now and was not in before.
func rootNetSame(before []string) error {
	now, err := rootNet()
	if err != nil {
		return err
	}
	var added []string
	for _, l := range now {
		if !slices.Contains(before, l) {
			added = append(added, l)
		}
	}
	if len(added) > 0 {
		return fmt.Errorf("new in the root namespace:\n  %s", strings.Join(added, "\n  "))
	}
	return nil
}

// startSSHD starts n's sshd in its namespace, in a mount namespace of its
// own where /etc/hosts is the cluster's (and the passwd home's .bashrc is
// empty: a fresh host's shell prints nothing and starts fast), and waits
// until it listens.
func (c *cluster) startSSHD(t testing.TB, n *node) {
	t.Helper()
	script := `mount --bind "$1" /etc/hosts || exit 120
if [ -n "$2" ]; then mount --bind /dev/null "$2" || exit 120; fi
exec /usr/sbin/sshd -D -f "$3" -E "$4"`
	cmd := exec.Command("ip", "netns", "exec", n.ns,
		"unshare", "-m", "--propagation", "private", "/bin/sh", "-c", script, "sh", c.hostsFile, c.bashrc, n.config, n.log)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting sshd on %s: %v", n.ns, err)
	}
	n.sshd, n.done = cmd, make(chan struct{})
	go func() { cmd.Wait(); close(n.done) }()
	rememberSSHD(cmd.Process.Pid)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Listening is seen in the namespace's socket table, not by a
	// connection: the sshd logs count only the tests' connections.
	ok := poll(ctx, 20*time.Millisecond, func() bool {
		select {
		case <-n.done:
			return true
		default:
		}
		return listens(cmd.Process.Pid, n.addr, sshPort)
	})
	select {
	case <-n.done:
		log, _ := os.ReadFile(n.log)
		t.Fatalf("sshd on %s ended: %v\n%s%s", n.ns, cmd.ProcessState, &stderr, log)
	default:
	}
	if !ok {
		t.Fatalf("sshd on %s does not listen at %s:%d within 10 s", n.ns, n.addr, sshPort)
	}
	if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", cmd.Process.Pid)); exe != "/usr/sbin/sshd" {
		t.Fatalf("sshd on %s: pid %d runs %q, want /usr/sbin/sshd", n.ns, cmd.Process.Pid, exe)
	}
}

// stopSSHD ends n's sshd: its host is up, its port refuses connections.
func (c *cluster) stopSSHD(t testing.TB, n *node) {
	t.Helper()
	if n.sshd == nil {
		return
	}
	syscall.Kill(-n.sshd.Process.Pid, syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(5 * time.Second):
		syscall.Kill(-n.sshd.Process.Pid, syscall.SIGKILL)
		<-n.done
	}
	n.sshd = nil
}

// listens reports whether the network namespace of pid has a TCP socket
// listening at addr:port (/proc/PID/net/tcp is that namespace's table).
func listens(pid int, addr string, port int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/tcp", pid))
	if err != nil {
		return false
	}
	a := netip.MustParseAddr(addr).As4()
	// The address in host byte order (little-endian here), then the port.
	local := fmt.Sprintf("%02X%02X%02X%02X:%04X", a[3], a[2], a[1], a[0], port)
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 3 && f[1] == local && f[3] == "0A" {
			return true
		}
	}
	return false
}

// probe checks that the hub and the test hosts reach one another through
// the bridge: a connection to a port where nothing listens is refused at
// once (dropped packets would time out instead).
func (c *cluster) probe(t *testing.T) {
	const closed = 1
	for _, from := range []string{hubNS, c.node(1).ns, c.node(nHosts).ns} {
		for _, to := range c.nodes {
			if to.ns == from {
				continue
			}
			script := fmt.Sprintf("exec 3<>/dev/tcp/%s/%d", to.addr, closed)
			out, _ := exec.Command("ip", "netns", "exec", from, "timeout", "5", "bash", "-c", script).CombinedOutput()
			if !strings.Contains(string(out), "Connection refused") {
				t.Fatalf("%s does not reach %s through the bridge: %s", from, to.addr, out)
			}
		}
	}
}

// pids returns the processes in n's network namespace.
func (n *node) pids() []int {
	out, _ := exec.Command("ip", "netns", "pids", n.ns).Output()
	var ps []int
	for _, f := range strings.Fields(string(out)) {
		if p, err := strconv.Atoi(f); err == nil {
			ps = append(ps, p)
		}
	}
	return ps
}

// others returns the processes in n's namespace other than its sshd
// listener, as "pid cmdline".
func (n *node) others() []string {
	var out []string
	for _, p := range n.pids() {
		if n.sshd != nil && p == n.sshd.Process.Pid {
			continue
		}
		if pi, ok := readStat(p); !ok || pi.State == "Z" {
			continue
		}
		out = append(out, fmt.Sprintf("%d %s", p, cmdline(p)))
	}
	return out
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// idle waits at most d for every test host to run nothing but its sshd,
// and returns what is left.
func (c *cluster) idle(d time.Duration) []string {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var left []string
	poll(ctx, 50*time.Millisecond, func() bool {
		left = nil
		for _, n := range c.nodes {
			for _, o := range n.others() {
				left = append(left, n.ns+": "+o)
			}
		}
		return len(left) == 0
	})
	return left
}

// checkIdle fails the test if a test host still runs anything but its
// sshd 10 s after the test (a session's sshd ends a moment after its
// client).
func (c *cluster) checkIdle(t testing.TB) {
	t.Helper()
	if left := c.idle(10 * time.Second); len(left) > 0 {
		t.Errorf("left running on the test hosts:\n  %s", strings.Join(left, "\n  "))
	}
}

func (c *cluster) dumpLogs(t testing.TB) {
	for _, n := range c.nodes {
		if b, err := os.ReadFile(n.log); err == nil {
			t.Logf("%s sshd log:\n%s", n.ns, tail(string(b), 40))
		}
	}
	if b, err := os.ReadFile(c.sshLog); err == nil {
		t.Logf("ssh started:\n%s", b)
	}
}

func tail(s string, n int) string {
	l := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// teardown ends every sshd and every process on the test hosts, deletes the
// namespaces (which deletes the veth pairs) and the bridge, and checks that
// none is left.
func (c *cluster) teardown() error {
	for _, n := range c.nodes {
		c.stopSSHD(c.t, n)
	}
	return removeLeftovers()
}

// removeLeftovers removes every test namespace, veth and the bridge that
// exist, after killing what runs in the namespaces, and checks that none
// is left. It is teardown, and the clean-up of a run that was killed
// before its own teardown.
func removeLeftovers() error {
	nss, links := ours()
	for _, ns := range nss {
		n := &node{ns: ns}
		for try := 0; try < 100; try++ {
			ps := n.pids()
			if len(ps) == 0 {
				break
			}
			for _, p := range ps {
				syscall.Kill(p, syscall.SIGKILL)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if ps := n.pids(); len(ps) > 0 {
			return fmt.Errorf("%s: processes %v do not end", ns, ps)
		}
		if err := ip("", "netns", "del", ns); err != nil {
			return err
		}
	}
	for _, l := range links {
		// A veth whose peer went with its namespace is gone already.
		if err := ip("", "link", "del", l); err != nil && linkExists(l) {
			return err
		}
	}
	if nss, links := ours(); len(nss)+len(links) > 0 {
		return fmt.Errorf("left after teardown: namespaces %q, links %q", nss, links)
	}
	return nil
}

func linkExists(name string) bool {
	return exec.Command("ip", "link", "show", "dev", name).Run() == nil
}

// ours returns the test namespaces and links that exist.
func ours() (nss, links []string) {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], nsPrefix) {
			nss = append(nss, f[0])
		}
	}
	out, _ = exec.Command("ip", "-o", "link", "show").Output()
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if name == bridge || strings.HasPrefix(name, vethRoot) {
			links = append(links, name)
		}
	}
	return nss, links
}

// Every sshd started by the suite, to check at its end that none is left.
var (
	sshdMu   sync.Mutex
	sshdPids []procInfo
)

func rememberSSHD(pid int) {
	pi, ok := readStat(pid)
	if !ok {
		return
	}
	sshdMu.Lock()
	sshdPids = append(sshdPids, pi)
	sshdMu.Unlock()
}

// leftSSHD returns the sshd processes of the suite that still run.
func leftSSHD() []int {
	sshdMu.Lock()
	defer sshdMu.Unlock()
	var out []int
	for _, p := range sshdPids {
		if alive(p) {
			out = append(out, p.PID)
		}
	}
	return out
}

// procsRunning returns the processes on this machine whose executable is
// one of exes, as "pid cmdline".
func procsRunning(exes ...string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil || !slices.Contains(exes, exe) {
			continue
		}
		if pi, ok := readStat(pid); ok && pi.State != "Z" {
			out = append(out, fmt.Sprintf("%d %s", pid, cmdline(pid)))
		}
	}
	return out
}

// poll calls cond every tick until it is true or ctx ends.
func poll(ctx context.Context, tick time.Duration, cond func() bool) bool {
	tk := time.NewTicker(tick)
	defer tk.Stop()
	for {
		if cond() {
			return true
		}
		select {
		case <-ctx.Done():
			return cond()
		case <-tk.C:
		}
	}
}

// sessions returns how many ssh sessions n's sshd started (the "Starting
// session" lines of its log), and how many connections it accepted.
func (n *node) sessions() (sessions, conns int) {
	f, err := os.Open(n.log)
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		switch l := sc.Text(); {
		case strings.Contains(l, "Starting session: command for root"):
			sessions++
		case strings.HasPrefix(l, "Connection from "):
			conns++
		}
	}
	return sessions, conns
}

// sshStarts returns the command lines the ssh wrapper was started with.
func (c *cluster) sshStarts() []string {
	b, err := os.ReadFile(c.sshLog)
	if err != nil {
		return nil
	}
	return lines(string(b))
}

func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// The /proc helpers are testbin's.
type procInfo = testbin.Proc

var (
	readStat = testbin.ReadProc
	children = testbin.Children
)

func alive(p procInfo) bool { return p.Alive() }
