package launch

import (
	"bytes"
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

	"sperli/hosts"
)

// The launcher's remote path without root or sshd: an ssh stand-in first
// on PATH runs the command it is given on this machine (as the remote
// shell would), and the command is this test binary, which TestMain turns
// into the host agent when its one argument is "spawn" — the real one, or
// a broken one that SPERLI_TEST_AGENT asks for.

func TestMain(m *testing.M) {
	if len(os.Args) == 2 && os.Args[1] == "spawn" {
		os.Exit(testAgent())
	}
	os.Exit(m.Run())
}

// testAgent is the host agent of these tests: SPERLI_TEST_AGENT says how
// it is broken on the host SPERLI_TEST_AGENT_HOST (every host when unset).
//
//	(unset)   the real agent
//	oversize  its hello, then a stdout frame over the bound
//	junk      a chatty login shell's greeting instead of the hello
//	die       the real agent, until SPERLI_TEST_AGENT_PIDS files
//	          pid-* are in SPERLI_TEST_AGENT_DIR: then, as a broken
//	          connection, ssh's message and exit status 255
func testAgent() int {
	mode := os.Getenv("SPERLI_TEST_AGENT")
	if h := os.Getenv("SPERLI_TEST_AGENT_HOST"); h != "" && h != os.Getenv("SSH_HOST") {
		mode = ""
	}
	switch mode {
	case "oversize":
		os.Stdout.Write(appendMuxFrame(nil, muxFrame{Type: muxHello, Payload: []byte(muxHelloText)}))
		os.Stdout.Write(header(muxStdout, 0, 1<<20))
		time.Sleep(time.Minute)
		return 0
	case "junk":
		os.Stdout.WriteString("Welcome to the cluster!\n")
		time.Sleep(time.Minute)
		return 0
	case "die":
		go Agent(os.Stdin, os.Stdout, os.Stderr)
		want, _ := strconv.Atoi(os.Getenv("SPERLI_TEST_AGENT_PIDS"))
		for {
			// pid-N only: a pid-N.part is a rank still writing its pid,
			// which the job's end may kill before it is renamed.
			pids, _ := filepath.Glob(filepath.Join(os.Getenv("SPERLI_TEST_AGENT_DIR"), "pid-*"))
			pids = slices.DeleteFunc(pids, func(p string) bool { return strings.HasSuffix(p, ".part") })
			if len(pids) >= want {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		fmt.Fprintf(os.Stderr, "Connection to %s closed by remote host.\n", os.Getenv("SSH_HOST"))
		return 255
	}
	return Agent(os.Stdin, os.Stdout, os.Stderr)
}

// remote is a launch on stand-in remote hosts.
type remote struct {
	t      *testing.T
	dir    string
	sshLog string
	hosts  string
}

// newRemote writes the ssh stand-in and a host list of lines, and puts
// the stand-in first on PATH.
func newRemote(t *testing.T, lines ...string) *remote {
	dir := t.TempDir()
	r := &remote{t: t, dir: dir, sshLog: filepath.Join(dir, "ssh.log")}
	bin := filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o755)
	// ssh -p PORT -o BatchMode=yes HOST WORD...: the words are one
	// command line for the remote shell.
	writeTestFile(t, filepath.Join(bin, "ssh"), fmt.Sprintf(`#!/bin/sh
printf '%%s\n' "$*" >> %s
h=$5
shift 5
SSH_HOST=$h exec sh -c "$*"
`, r.sshLog), 0o755)
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	r.hosts = writeTestFile(t, filepath.Join(dir, "hosts.txt"), strings.Join(lines, "\n")+"\n", 0o644)
	return r
}

func writeTestFile(t *testing.T, path, content string, mode os.FileMode) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	return path
}

// rank writes a rank program: a shell script that reads its description
// line, then runs body.
func (r *remote) rank(body string) string {
	return writeTestFile(r.t, filepath.Join(r.dir, "rank.sh"), `#!/bin/sh
IFS= read -r line
case "$line" in '{"v":1,'*) ;; *) echo "no description: $line" >&2; exit 9 ;; esac
`+body+"\n", 0o755)
}

type runResult struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

func (r runResult) String() string {
	return fmt.Sprintf("exit status %d after %v\nstdout:\n%s\nstderr:\n%s", r.code, r.took.Round(time.Millisecond), r.stdout, r.stderr)
}

// run runs the launcher for n ranks of prog, o's other options as given.
func (r *remote) run(ctx context.Context, n int, prog string, o Options) runResult {
	var out, errs bytes.Buffer
	o.N, o.HostsFile, o.Program, o.Self = n, r.hosts, prog, os.Args[0]
	o.Stdout, o.Stderr = &out, &errs
	t0 := time.Now()
	code := Run(ctx, o)
	return runResult{code, out.String(), errs.String(), time.Since(t0)}
}

// sshLines returns the command lines ssh was started with.
func (r *remote) sshLines() []string {
	b, _ := os.ReadFile(r.sshLog)
	if len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// TestRemoteOneSessionPerHost: six ranks on two remote hosts and this
// machine: one ssh per remote host, running this sperli's agent; every
// remote rank gets its description, its environment (SPERLI_LOCAL_RANK of
// its host) and the remote shell's (SSH_HOST), and its output shows in
// rank order.
func TestRemoteOneSessionPerHost(t *testing.T) {
	r := newRemote(t, "n1.example slots=2", "N2.example. slots=3", "127.0.0.1")
	prog := r.rank(`echo "rank $SPERLI_RANK local $SPERLI_LOCAL_RANK/$SPERLI_LOCAL_SIZE on ${SSH_HOST:-here}"
echo "rank $SPERLI_RANK says" >&2`)
	res := r.run(context.Background(), 6, prog, Options{})
	var want, wantErr strings.Builder
	for rank, where := range []string{"0/2 on n1.example", "1/2 on n1.example", "0/3 on N2.example.", "1/3 on N2.example.", "2/3 on N2.example.", "0/1 on here"} {
		fmt.Fprintf(&want, "[rank %d] rank %d local %s\n", rank, rank, where)
		fmt.Fprintf(&wantErr, "[rank %d] rank %d says\n", rank, rank)
	}
	if res.code != 0 || res.stdout != want.String() || res.stderr != wantErr.String() {
		t.Errorf("%v\nwant exit status 0, stdout\n%sstderr\n%s", res, &want, &wantErr)
	}
	starts := r.sshLines()
	slices.Sort(starts) // the order the stand-ins wrote the log in
	self := os.Args[0]
	wantStarts := []string{
		fmt.Sprintf("-p 62222 -o BatchMode=yes N2.example. %s spawn", shellQuoteForTest(self)),
		fmt.Sprintf("-p 62222 -o BatchMode=yes n1.example %s spawn", shellQuoteForTest(self)),
	}
	if strings.Join(starts, "\n") != strings.Join(wantStarts, "\n") {
		t.Errorf("ssh started as\n  %s\nwant one session per remote host:\n  %s", strings.Join(starts, "\n  "), strings.Join(wantStarts, "\n  "))
	}
}

// shellQuoteForTest is how a word of an ssh command line reads in the
// stand-in's log.
func shellQuoteForTest(w string) string { return hosts.ShellQuote(w) }

// TestRemoteEnds: what a remote rank's end says, as a local rank's would:
// a rank killed by a signal on its host is lost (exit 75), one that exits
// with a status and no record is named with it (exit 1).
func TestRemoteEnds(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		code int
		line string
	}{
		{"killed", `[ "$SPERLI_RANK" = 1 ] && kill -9 $$; exit 0`, 75, "sperli: rank 1 lost: killed by signal 9 (SIGKILL)"},
		{"exit status", `[ "$SPERLI_RANK" = 2 ] && exit 3; exit 0`, 1, "sperli: rank 2 on n2.example ended with exit status 3 and no status record"},
		{"cannot start", ``, 1, "[rank 0] sperli spawn: cannot start "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRemote(t, "n1.example slots=2", "n2.example")
			prog := r.rank(tc.body)
			if tc.name == "cannot start" {
				prog = r.goneThere()
			}
			res := r.run(context.Background(), 3, prog, Options{})
			if res.code != tc.code || !strings.Contains(res.stderr, tc.line) {
				t.Errorf("%v\nwant exit status %d and a line %q", res, tc.code, tc.line)
			}
		})
	}
}

// goneThere returns a program that passes the launcher's check (an
// executable file here) but is not there when the agent starts it: the
// ssh stand-in removes it first.
func (r *remote) goneThere() string {
	gone := writeTestFile(r.t, filepath.Join(r.dir, "gone.sh"), "#!/bin/sh\n", 0o755)
	ssh := filepath.Join(r.dir, "bin", "ssh")
	b, _ := os.ReadFile(ssh)
	writeTestFile(r.t, ssh, strings.Replace(string(b), "h=$5\n", "h=$5\nrm -f "+gone+"\n", 1), 0o755)
	return gone
}

// pidsOf reads the pid-R files the ranks of a test wrote.
func pidsOf(t *testing.T, dir string) []int {
	files, _ := filepath.Glob(filepath.Join(dir, "pid-*"))
	var pids []int
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if p, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			pids = append(pids, p)
		}
	}
	return pids
}

// waitGone waits at most d for every pid to be gone.
func waitGone(t *testing.T, pids []int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for _, p := range pids {
		for alive(p) {
			if time.Now().After(deadline) {
				t.Errorf("rank process %d still runs", p)
				syscall.Kill(p, syscall.SIGKILL)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// holdBody writes the rank's pid to DIR/pid-RANK and waits for ever.
func holdBody(dir string) string {
	return fmt.Sprintf(`echo $$ > %s/pid-$SPERLI_RANK.part && mv %s/pid-$SPERLI_RANK.part %s/pid-$SPERLI_RANK
exec sleep 1000`, dir, dir, dir)
}

// TestRemoteSessionDies: the session of one host breaks while its ranks
// run: each of its ranks is lost, once, with ssh's last words; the job
// ends (the others are killed after the silence limit and a margin) and
// nothing is left running, on that host or the other.
func TestRemoteSessionDies(t *testing.T) {
	r := newRemote(t, "n1.example slots=2", "n2.example")
	t.Setenv("SPERLI_TEST_AGENT", "die")
	t.Setenv("SPERLI_TEST_AGENT_HOST", "n1.example")
	t.Setenv("SPERLI_TEST_AGENT_DIR", r.dir)
	t.Setenv("SPERLI_TEST_AGENT_PIDS", "3")
	prog := r.rank(holdBody(r.dir))
	res := r.run(context.Background(), 3, prog, Options{SilenceMS: 100})
	why := "ssh to n1.example ended with exit status 255 before the rank's status record: Connection to n1.example closed by remote host."
	for _, want := range []string{"sperli: rank 0 lost: " + why, "sperli: rank 1 lost: " + why, "sperli: rank 2 did not end after the job failed; killed"} {
		if strings.Count(res.stderr, want+"\n") != 1 {
			t.Errorf("%v\nwant the line %q once", res, want)
		}
	}
	if res.code != 75 {
		t.Errorf("%v\nwant exit status 75 (a rank lost)", res)
	}
	pids := pidsOf(t, r.dir)
	if len(pids) != 3 {
		t.Fatalf("ranks wrote pids %v, want 3", pids)
	}
	waitGone(t, pids, 5*time.Second)
}

// TestRemoteRefusedFrames: an agent whose frames the launcher refuses (a
// stdout frame over the bound; a login shell that greets before the
// agent's hello) ends its session: its ranks are lost with the reason.
func TestRemoteRefusedFrames(t *testing.T) {
	for _, tc := range []struct{ mode, why string }{
		{"oversize", "ssh to n1.example: the launcher refuses the agent's frames: mux: stdout frame of 1048576 bytes, want 1 to 65536"},
		{"junk", `ssh to n1.example: the remote command did not answer as a sperli agent: its first bytes are "Welcome t" (a login shell that prints something, or another sperli at this path?)`},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			r := newRemote(t, "n1.example")
			t.Setenv("SPERLI_TEST_AGENT", tc.mode)
			res := r.run(context.Background(), 1, r.rank("exit 0"), Options{})
			if want := "sperli: rank 0 lost: " + tc.why + "\n"; res.code != 75 || !strings.Contains(res.stderr, want) || res.took > 10*time.Second {
				t.Errorf("%v\nwant exit status 75 at once and the line %q", res, want)
			}
		})
	}
}

// TestRemoteSSHFails: ssh that cannot reach its host fails before the
// agent: every rank of the host is lost with ssh's message.
func TestRemoteSSHFails(t *testing.T) {
	r := newRemote(t, "n1.example slots=2")
	writeTestFile(t, filepath.Join(r.dir, "bin", "ssh"), "#!/bin/sh\necho \"ssh: connect to host $5 port 62222: Connection refused\" >&2\nexit 255\n", 0o755)
	res := r.run(context.Background(), 2, r.rank("exit 0"), Options{})
	why := "ssh to n1.example ended with exit status 255 before the rank's status record: ssh: connect to host n1.example port 62222: Connection refused"
	if res.code != 75 || !strings.Contains(res.stderr, "sperli: rank 0 lost: "+why+"\n") || !strings.Contains(res.stderr, "sperli: rank 1 lost: "+why+"\n") {
		t.Errorf("%v\nwant exit status 75 and both ranks lost: %s", res, why)
	}
}

// TestRemoteInterrupt: the launcher ends (an interrupt, here its context)
// while remote ranks run: it ends at once and no rank is left.
func TestRemoteInterrupt(t *testing.T) {
	r := newRemote(t, "n1.example slots=2", "n2.example", "127.0.0.1")
	prog := r.rank(holdBody(r.dir))
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for len(pidsOf(t, r.dir)) < 4 {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
	}()
	res := r.run(ctx, 4, prog, Options{})
	if res.code != 1 || res.took > 20*time.Second {
		t.Errorf("%v\nwant exit status 1 soon after the interrupt", res)
	}
	waitGone(t, pidsOf(t, r.dir), 5*time.Second)
}

// TestRemoteControlChannel: the control channel is two-way over the
// session: at --timeout the launcher asks every rank what it waits in
// (a "waiting" line on its standard input) and says each answer (a
// waiting record on its standard error).
func TestRemoteControlChannel(t *testing.T) {
	r := newRemote(t, "n1.example slots=2", "n2.example")
	prog := r.rank(`while IFS= read -r l; do
  [ "$l" = waiting ] && printf '\036sperli-waiting {"call":"fake(%s)","ms":1500,"rank":%s,"for":-1}\n' $SPERLI_RANK $SPERLI_RANK >&2
done`)
	res := r.run(context.Background(), 3, prog, Options{Timeout: 2 * time.Second})
	for rank := 0; rank < 3; rank++ {
		if want := fmt.Sprintf("sperli:   rank %d: fake(%d) for 1.5 s\n", rank, rank); !strings.Contains(res.stderr, want) {
			t.Errorf("%v\nwant the line %q", res, want)
		}
	}
	if res.code != 1 {
		t.Errorf("%v\nwant exit status 1", res)
	}
}

// TestRemoteRecord: the generation record names each remote slot's
// process by its pid on its host, which its agent says.
func TestRemoteRecord(t *testing.T) {
	r := newRemote(t, "n1.example slots=2")
	prog := r.rank(`echo $$ > ` + r.dir + `/pid-$SPERLI_RANK`)
	rec := filepath.Join(r.dir, "record.jsonl")
	res := r.run(context.Background(), 2, prog, Options{Record: rec})
	if res.code != 0 {
		t.Fatalf("%v", res)
	}
	b, _ := os.ReadFile(rec)
	for rank := 0; rank < 2; rank++ {
		pid, _ := os.ReadFile(filepath.Join(r.dir, fmt.Sprintf("pid-%d", rank)))
		want := fmt.Sprintf(`"%d":%s`, rank, strings.TrimSpace(string(pid)))
		if !regexp.MustCompile(`"pids":\{[^}]*` + regexp.QuoteMeta(want)).Match(b) {
			t.Errorf("record %s: want pids with %s", b, want)
		}
	}
}

// TestTailLine: ssh's last line that is not blank, at most 200 bytes,
// however it is written.
func TestTailLine(t *testing.T) {
	var tl tailLine
	for _, w := range []string{"Warning: x\nssh: connect to host ", "n1 port 62222: Connection refused\r\n", "\n  \n"} {
		tl.Write([]byte(w))
	}
	if got, want := tl.String(), "ssh: connect to host n1 port 62222: Connection refused"; got != want {
		t.Errorf("tailLine = %q, want %q", got, want)
	}
	tl.Write([]byte(strings.Repeat("x", 1000)))
	if got := tl.String(); got != strings.Repeat("x", tailMax) {
		t.Errorf("a long last line without its end: %d bytes, want %d", len(got), tailMax)
	}
}

// TestExitState: a rank's end as the agent's exit frame says it reads as
// a local process's would.
func TestExitState(t *testing.T) {
	for _, tc := range []struct {
		ws       syscall.WaitStatus
		success  bool
		code     int
		signaled bool
	}{
		{0, true, 0, false},
		{75 << 8, false, 75, false},
		{syscall.WaitStatus(syscall.SIGKILL), false, -1, true},
	} {
		ws, err := parseMuxExit(appendMuxExit(nil, tc.ws))
		if err != nil {
			t.Fatal(err)
		}
		e := &exitState{ws}
		if e.Success() != tc.success || e.ExitCode() != tc.code || e.Sys().(syscall.WaitStatus).Signaled() != tc.signaled {
			t.Errorf("exitState(%#x) = success %v, code %d, signaled %v; want %v, %d, %v", tc.ws, e.Success(), e.ExitCode(), e.Sys().(syscall.WaitStatus).Signaled(), tc.success, tc.code, tc.signaled)
		}
	}
}

// TestRemoteOneProcessor: a host's agent gives GOMAXPROCS=1 to the ranks
// of a host that runs more of them than the machine has processors, and
// nothing to a host's only rank.
func TestRemoteOneProcessor(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	os.Unsetenv("GOMAXPROCS") // the agents inherit the test's environment
	many := machineCPUs() + 1
	r := newRemote(t, fmt.Sprintf("n1.example slots=%d", many), "n2.example")
	prog := r.rank(`echo "GOMAXPROCS=${GOMAXPROCS-unset}"`)
	res := r.run(context.Background(), many+1, prog, Options{})
	var want strings.Builder
	for rank := 0; rank <= many; rank++ {
		v := "1"
		if rank == many {
			v = "unset"
		}
		fmt.Fprintf(&want, "[rank %d] GOMAXPROCS=%s\n", rank, v)
	}
	if res.code != 0 || res.stdout != want.String() {
		t.Errorf("%v\nwant exit status 0, stdout\n%s", res, &want)
	}
}
