package workq_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"sperli/codes"
	"sperli/job"
	"sperli/memnet"
	"sperli/runtime"
)

// fixture is a job of n ranks in this process, with real certificates
// and descriptions made by the launcher's own code (package job), joined
// over an in-memory network (package memnet: TLS over it as over TCP, no
// socket). The queue runs on it as it does between processes.
type fixture struct {
	t    *testing.T
	id   *job.Identity
	spec job.Spec
	lns  []net.Listener
	net  *memnet.Network
}

// newFixture is a job of n ranks on an in-memory network.
func newFixture(t *testing.T, n int) *fixture {
	t.Helper()
	id, err := job.NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, id: id, net: memnet.New()}
	table := make([]runtime.Host, n)
	for r := 0; r < n; r++ {
		ln, err := f.net.Listen("127.0.0.1:0")
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

// initAll joins every rank of the fixture concurrently.
func (f *fixture) initAll(ctx context.Context) []*runtime.Comm {
	f.t.Helper()
	n := f.spec.Size
	comms := make([]*runtime.Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		j, err := f.id.Describe(f.spec, r)
		if err != nil {
			f.t.Fatal(err)
		}
		j.Listener, j.Net = f.lns[r], f.net
		j.Logf = func(string, ...any) {}
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			comms[r], errs[r] = runtime.Init(ctx, j)
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
