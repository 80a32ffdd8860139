package workq_test

import (
	"context"
	"testing"

	"sperli/codes"
	"sperli/memnet"
	"sperli/runtime"
	"sperli/runtime/runtimetest"
)

// fixture is a job of n ranks in this process (package runtimetest: real
// certificates, descriptions made by the launcher's own code, an
// in-memory network with TLS over it as over TCP, no socket). The queue
// runs on it as it does between processes.
type fixture struct {
	t    *testing.T
	base *runtimetest.Job
}

// newFixture is a job of n ranks on an in-memory network.
func newFixture(t *testing.T, n int) *fixture {
	t.Helper()
	return &fixture{t: t, base: runtimetest.New(t, n, memnet.New())}
}

// initAll joins every rank of the fixture concurrently.
func (f *fixture) initAll(ctx context.Context) []*runtime.Comm {
	f.t.Helper()
	return runtimetest.InitAll(ctx, f.t, f.base.Spec.Size, f.base.Describe)
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
