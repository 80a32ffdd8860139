package runtime_test

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"sperli/codes"
	"sperli/job"
	"sperli/memnet"
	"sperli/runtime"
	"sperli/runtime/runtimetest"
)

// fixture is a job of n ranks with real certificates, descriptions made
// by the launcher's own code (package job), one listener per rank: on an
// in-memory network of its own (newFixture: package memnet, TLS over it
// as over TCP, no socket), or on loopback from the kernel (newFixtureTCP,
// for the tests of the join's sockets: refusals, hardening, inherited
// listeners, benchmarks).
type fixture struct {
	t    testing.TB
	id   *job.Identity
	spec job.Spec
	lns  []net.Listener
	net  *memnet.Network // nil on loopback
	logs *logBook
	// clock, when set, is every rank's Job.Now.
	clock func() time.Time
	base  *runtimetest.Job
}

type logBook struct {
	mu    sync.Mutex
	lines []string
}

func (l *logBook) logf(rank int) func(string, ...any) {
	return func(format string, args ...any) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, fmt.Sprintf("rank %d: ", rank)+fmt.Sprintf(format, args...))
	}
}

func (l *logBook) has(sub string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.lines {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// waitFor reports whether every one of subs shows in the log, waiting up
// to 30 s for lines still being written.
func (l *logBook) waitFor(subs ...string) bool {
	for i := 0; i < 3000; i++ {
		all := true
		for _, s := range subs {
			all = all && l.has(s)
		}
		if all {
			return true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

func (l *logBook) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// newFixture is a job of n ranks on an in-memory network.
func newFixture(t *testing.T, n int) *fixture { return newFixtureOn(t, n, memnet.New()) }

// newFixtureTCP is a job of n ranks on loopback.
func newFixtureTCP(t *testing.T, n int) *fixture { return newFixtureOn(t, n, nil) }

// newFixtureB is a job of n ranks on loopback for a benchmark.
func newFixtureB(t testing.TB, n int) *fixture { return newFixtureOn(t, n, nil) }

func newFixtureOn(t testing.TB, n int, mn *memnet.Network) *fixture {
	t.Helper()
	j := runtimetest.New(t, n, mn)
	return &fixture{t: t, id: j.ID, spec: j.Spec, lns: j.Listeners, net: mn, logs: &logBook{}, base: j}
}

// listen makes a listener on the fixture's network.
func (f *fixture) listen() net.Listener { return f.base.Listen() }

// job returns rank's description with its listener and a log capture.
func (f *fixture) job(rank int) *runtime.Job {
	f.t.Helper()
	j, err := f.id.Describe(f.spec, rank)
	if err != nil {
		f.t.Fatal(err)
	}
	j.Listener = f.lns[rank]
	if f.net != nil {
		j.Net = f.net
	}
	if f.clock != nil {
		j.Now = f.clock
	}
	j.Logf = f.logs.logf(rank)
	return j
}

// initAll joins every rank of the fixture concurrently.
func (f *fixture) initAll(ctx context.Context) []*runtime.Comm {
	f.t.Helper()
	return runtimetest.InitAll(ctx, f.t, f.spec.Size, f.job)
}

// each runs fn on every rank concurrently and returns the errors by rank.
func each(comms []*runtime.Comm, fn func(c *runtime.Comm) error) []error {
	return runtimetest.Each(comms, func(_ int, c *runtime.Comm) error { return fn(c) })
}

func testCtx(t *testing.T) context.Context { return runtimetest.Context(t) }

func wantCode(t *testing.T, what string, err error, want codes.Code) {
	t.Helper()
	runtimetest.WantCode(t, what, err, want)
}

// startInit joins j on a goroutine of its own; the channel gets the result.
func startInit(ctx context.Context, j *runtime.Job) chan result {
	out := make(chan result, 1)
	go func() {
		c, err := runtime.Init(ctx, j)
		out <- result{c, err}
	}()
	return out
}

// rankCert is j's certificate and key for a hand-made TLS peer.
func rankCert(j *runtime.Job) tls.Certificate {
	leaf, _ := x509.ParseCertificate(j.Cert)
	return tls.Certificate{Certificate: [][]byte{j.Cert}, PrivateKey: ed25519.NewKeyFromSeed(j.Key), Leaf: leaf}
}
