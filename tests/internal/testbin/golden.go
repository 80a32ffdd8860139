package testbin

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"sperli/hosts"
)

// Golden compares got with testdata/<name>.golden, or, with update (the
// suites' -update flag), rewrites that file.
func Golden(t testing.TB, name, got string, update bool) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// WantLine fails the test unless out has exactly the line line, so that
// -update cannot bless a wrong result.
func WantLine(t testing.TB, out, line string) {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if l == line {
			return
		}
	}
	t.Errorf("output has no line %q:\n%s", line, out)
}

// RandomLoopback returns an address 127.X.Y.Z with X, Y, Z in 1..254, so
// that the fixed ports of a job made by `sperli job make` (hosts.BasePort + rank)
// do not collide with another test's. An address whose ports are taken
// already (a listener on the wildcard address holds them on every
// address) is passed over.
func RandomLoopback(t testing.TB, ranks int) string {
	t.Helper()
	b := func() int { return 1 + rand.IntN(254) }
next:
	for range 20 {
		addr := fmt.Sprintf("127.%d.%d.%d", b(), b(), b())
		for r := 0; r < ranks; r++ {
			ln, err := net.Listen("tcp", net.JoinHostPort(addr, fmt.Sprint(hosts.BasePort+r)))
			if err != nil {
				continue next
			}
			ln.Close()
		}
		return addr
	}
	t.Fatalf("no loopback address with free ports %d..%d found", hosts.BasePort, hosts.BasePort+ranks-1)
	return ""
}

// HandJob makes a job with `sperli job make` (sperli is the binary) on a
// random loopback address and starts its ranks by hand, as another
// launcher would: ranks[i] is rank i's command line, run in wdir with env
// and rank-i.job on its standard input, the ranks started in a random
// order with small random delays. It returns the job's directory, how
// `job make` ended and how each rank ended; the whole job has d.
func HandJob(t testing.TB, sperli, wdir string, env []string, ranks [][]string, d time.Duration) (jobDir string, made Result, res []Result) {
	t.Helper()
	deadline := time.Now().Add(d)
	dir := t.TempDir()
	addr := RandomLoopback(t, len(ranks))
	hostsFile := WriteFile(t, filepath.Join(dir, "hosts"), strings.Repeat(addr+"\n", len(ranks)), 0o644)
	jobDir = filepath.Join(dir, "job")
	mk := exec.Command(sperli, "job", "make", "-n", strconv.Itoa(len(ranks)), "--hosts", hostsFile, "--out", jobDir)
	mk.Dir, mk.Env = wdir, env
	if made = Start(t, mk).Wait(t, d); made.Code != 0 {
		t.Fatalf("sperli job make: exit status %d, want 0\nstderr:\n%s", made.Code, made.Stderr)
	}
	procs := make([]*Process, len(ranks))
	order := rand.Perm(len(ranks))
	t.Logf("host %s, start order %v", addr, order)
	for _, i := range order {
		time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond) // a start skew, not a wait for anything
		in, err := os.Open(filepath.Join(jobDir, fmt.Sprintf("rank-%d.job", i)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { in.Close() })
		cmd := exec.Command(ranks[i][0], ranks[i][1:]...)
		cmd.Dir, cmd.Env, cmd.Stdin = wdir, env, in
		procs[i] = Start(t, cmd)
	}
	res = make([]Result, len(ranks))
	for i, p := range procs {
		res[i] = p.Wait(t, time.Until(deadline))
	}
	return jobDir, made, res
}
