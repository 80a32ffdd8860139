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
	"sperli/runtime"
)

// fixture is a job of n ranks on loopback with real certificates: one
// listener per rank from the kernel, descriptions made by the launcher's
// own code.
type fixture struct {
	t    testing.TB
	id   *job.Identity
	spec job.Spec
	lns  []net.Listener
	logs *logBook
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

func newFixture(t *testing.T, n int) *fixture { return newFixtureB(t, n) }

func newFixtureB(t testing.TB, n int) *fixture {
	t.Helper()
	id, err := job.NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, id: id, logs: &logBook{}}
	table := make([]runtime.Host, n)
	for r := 0; r < n; r++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		f.lns = append(f.lns, ln)
		table[r] = runtime.Host{Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port}
	}
	f.spec = job.Spec{Size: n, Hosts: table, JoinMS: 20000, Expires: time.Now().Add(10 * time.Minute)}
	return f
}

// job returns rank's description with its listener and a log capture.
func (f *fixture) job(rank int) *runtime.Job {
	f.t.Helper()
	j, err := f.id.Describe(f.spec, rank)
	if err != nil {
		f.t.Fatal(err)
	}
	j.Listener = f.lns[rank]
	j.Logf = f.logs.logf(rank)
	return j
}

// initAll joins every rank of the fixture concurrently.
func (f *fixture) initAll(ctx context.Context) []*runtime.Comm {
	f.t.Helper()
	n := f.spec.Size
	comms := make([]*runtime.Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			comms[r], errs[r] = runtime.Init(ctx, f.job(r))
		}(r)
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			f.t.Fatalf("Init(rank %d) = %v", r, err)
		}
	}
	f.t.Cleanup(func() {
		for _, c := range comms {
			c.Close()
		}
	})
	return comms
}

// each runs fn on every rank concurrently and returns the errors by rank.
func each(comms []*runtime.Comm, fn func(c *runtime.Comm) error) []error {
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for i, c := range comms {
		wg.Add(1)
		go func(i int, c *runtime.Comm) {
			defer wg.Done()
			errs[i] = fn(c)
		}(i, c)
	}
	wg.Wait()
	return errs
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func wantCode(t *testing.T, what string, err error, want codes.Code) {
	t.Helper()
	if got := codes.Of(err); got != want {
		t.Fatalf("%s = %v (code %v), want %v", what, err, got, want)
	}
	if !strings.HasPrefix(err.Error(), want.String()+": ") {
		t.Fatalf("%s error text %q does not start with %q", what, err.Error(), want.String()+": ")
	}
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
