package clib

// The benchmark pairs of the C library: the round trip of a 64-byte message
// and the one-way rate of 1 MiB messages (MB = 10^6 bytes) between two rank
// processes on loopback, for the pairs Go–Go, C–C, C–Go and Go–C (the first
// rank named is rank 0: it sends the 1 MiB messages and times both), in
// one run, rounds interleaved, medians reported with their ratio to Go–Go.
// The C rank is libsperli/test/cpeer.c, the Go rank tests/clib/gopeer (the
// same protocol). Not part of make test:
//
//	sh scripts/libsperli/bench.sh
//	LIBSPERLI_BENCH=1 go test -run TestBenchPairs -v ./tests/clib/
//
// LIBSPERLI_BENCH_PINGS (2000), LIBSPERLI_BENCH_MESSAGES (64) and
// LIBSPERLI_BENCH_ROUNDS (7) set the sizes.

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"sperli/job"
	sperlirt "sperli/runtime"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

type pair struct {
	name  string
	ranks [2]string // program of rank 0, rank 1
}

type figures struct{ rtt, rate []float64 }

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// runPair runs one job of two ranks and returns rank 0's figures.
func runPair(t *testing.T, p pair, pings, msgs int) (rtt, rate float64) {
	t.Helper()
	id, err := job.NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	var lns [2]*net.TCPListener
	table := make([]sperlirt.Host, 2)
	for r := range lns {
		if lns[r], err = net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}); err != nil {
			t.Fatal(err)
		}
		table[r] = sperlirt.Host{Host: "127.0.0.1", Port: lns[r].Addr().(*net.TCPAddr).Port}
	}
	spec := job.Spec{Size: 2, Hosts: table, Expires: time.Now().Add(time.Hour)}
	var cmds [2]*exec.Cmd
	var outs [2]*bytes.Buffer
	for r := range cmds {
		d, err := id.Describe(spec, r)
		if err != nil {
			t.Fatal(err)
		}
		d.ListenFD = 3
		f, err := lns[r].File()
		if err != nil {
			t.Fatal(err)
		}
		lns[r].Close()
		cmd := exec.Command(filepath.Join(bin, p.ranks[r]), "bench", strconv.Itoa(pings), strconv.Itoa(msgs))
		cmd.Env = env
		cmd.ExtraFiles = []*os.File{f}
		cmd.Stdin = bytes.NewReader(append(d.Encode(), '\n'))
		outs[r] = &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = outs[r], outs[r]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		cmds[r] = cmd
	}
	for r, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("%s rank %d: %v\n%s", p.name, r, err, outs[r])
		}
	}
	for _, l := range strings.Split(outs[0].String(), "\n") {
		if _, err := fmt.Sscanf(l, "rtt_us=%g rate_mbs=%g", &rtt, &rate); err == nil {
			return rtt, rate
		}
	}
	t.Fatalf("%s: rank 0 printed no figures:\n%s", p.name, outs[0])
	return 0, 0
}

func TestBenchPairs(t *testing.T) {
	if os.Getenv("LIBSPERLI_BENCH") != "1" {
		t.Skip("set LIBSPERLI_BENCH=1 (sh scripts/libsperli/bench.sh)")
	}
	pings := envInt("LIBSPERLI_BENCH_PINGS", 2000)
	msgs := envInt("LIBSPERLI_BENCH_MESSAGES", 64)
	rounds := envInt("LIBSPERLI_BENCH_ROUNDS", 7)
	pairs := []pair{
		{"Go–Go", [2]string{"gopeer", "gopeer"}},
		{"C–C", [2]string{"cpeer", "cpeer"}},
		{"C–Go", [2]string{"cpeer", "gopeer"}},
		{"Go–C", [2]string{"gopeer", "cpeer"}},
	}
	got := make([]figures, len(pairs))
	for round := 0; round < rounds; round++ {
		for i, p := range pairs {
			rtt, rate := runPair(t, p, pings, msgs)
			got[i].rtt = append(got[i].rtt, rtt)
			got[i].rate = append(got[i].rate, rate)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "libsperli pairs: %d round trips of 64 B, %d messages of 1 MiB, median of %d rounds (%s/%s, %d CPUs)\n",
		pings, msgs, rounds, runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	fmt.Fprintf(&b, "%-6s  %12s  %8s  %14s  %8s\n", "pair", "64 B rtt µs", "×Go–Go", "1 MiB MB/s", "Go–Go×")
	base := got[0]
	for i, p := range pairs {
		rtt, rate := median(got[i].rtt), median(got[i].rate)
		fmt.Fprintf(&b, "%-6s  %12.1f  %8.2f  %14.1f  %8.2f\n", p.name, rtt, rtt/median(base.rtt), rate, median(base.rate)/rate)
	}
	fmt.Print(b.String())
	for i, p := range pairs {
		t.Logf("%s rtt %v rate %v", p.name, got[i].rtt, got[i].rate)
	}
}
