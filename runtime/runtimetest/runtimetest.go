// Package runtimetest starts jobs of runtime.Comms inside one test
// process: real certificates and descriptions made by the launcher's own
// code (package job), one listener per rank on an in-memory network
// (package memnet: TLS over it as over TCP, no socket) or on loopback.
// It serves the tests of runtime and of the packages built over it
// (workq), as net/http/httptest serves net/http's users.
package runtimetest

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

// Job is a job of Spec.Size ranks: its identity, its spec (every rank's
// host and port), each rank's listener, and the network they are on (nil
// on loopback).
type Job struct {
	T         testing.TB
	ID        *job.Identity
	Spec      job.Spec
	Listeners []net.Listener
	Net       *memnet.Network
}

// New makes a job of n ranks on mn, or on loopback when mn is nil; its
// listeners are closed at the test's end.
func New(t testing.TB, n int, mn *memnet.Network) *Job {
	t.Helper()
	id, err := job.NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	j := &Job{T: t, ID: id, Net: mn}
	table := make([]runtime.Host, n)
	for r := 0; r < n; r++ {
		ln := j.Listen()
		j.Listeners = append(j.Listeners, ln)
		table[r] = runtime.Host{Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port}
	}
	j.Spec = job.Spec{Size: n, Hosts: table, JoinMS: 20000, Expires: time.Now().Add(10 * time.Minute)}
	return j
}

// Listen makes a listener on the job's network, closed at the test's end.
func (j *Job) Listen() net.Listener {
	j.T.Helper()
	var ln net.Listener
	var err error
	if j.Net != nil {
		ln, err = j.Net.Listen("127.0.0.1:0")
	} else {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		j.T.Fatal(err)
	}
	j.T.Cleanup(func() { ln.Close() })
	return ln
}

// Describe is rank's description with its listener and network; its log
// lines are dropped.
func (j *Job) Describe(rank int) *runtime.Job {
	j.T.Helper()
	d, err := j.ID.Describe(j.Spec, rank)
	if err != nil {
		j.T.Fatal(err)
	}
	d.Listener = j.Listeners[rank]
	if j.Net != nil {
		d.Net = j.Net
	}
	d.Logf = func(string, ...any) {}
	return d
}

// InitAll joins every rank concurrently, each with the description
// describe gives it, fails the test if one does not join, and closes
// every Comm at the test's end.
func InitAll(ctx context.Context, t testing.TB, n int, describe func(rank int) *runtime.Job) []*runtime.Comm {
	t.Helper()
	descs := make([]*runtime.Job, n)
	for r := range descs {
		descs[r] = describe(r)
	}
	comms := make([]*runtime.Comm, n)
	errs := Each(comms, func(r int, _ *runtime.Comm) error {
		var err error
		comms[r], err = runtime.Init(ctx, descs[r])
		return err
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("Init(rank %d) = %v", r, err)
		}
	}
	t.Cleanup(func() {
		for _, c := range comms {
			c.Close()
		}
	})
	return comms
}

// Each runs fn on every rank concurrently (with its index in comms) and
// returns the errors by rank.
func Each(comms []*runtime.Comm, fn func(r int, c *runtime.Comm) error) []error {
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for i, c := range comms {
		wg.Add(1)
		go func(i int, c *runtime.Comm) {
			defer wg.Done()
			errs[i] = fn(i, c)
		}(i, c)
	}
	wg.Wait()
	return errs
}

// Context is a context that ends a minute after the test began, or at
// its end: no test waits for ever.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// WantCode fails the test unless err has code want and its text begins
// with the code, as every refusal's does.
func WantCode(t testing.TB, what string, err error, want codes.Code) {
	t.Helper()
	if got := codes.Of(err); got != want {
		t.Fatalf("%s = %v (code %v), want %v", what, err, got, want)
	}
	if !strings.HasPrefix(err.Error(), want.String()+": ") {
		t.Fatalf("%s error text %q does not start with %q", what, err.Error(), want.String()+": ")
	}
}
