package job_test

import (
	"strings"
	"testing"
	"time"

	"sperli/codes"
	"sperli/job"
)

// jobs makes the descriptions of a fresh job of n ranks on 127.0.0.1
// (ports 40000 + rank; nothing listens: these tests only read and check
// descriptions).
type jobs struct {
	t    testing.TB
	id   *job.Identity
	spec job.Spec
}

func newJobs(t testing.TB, n int) *jobs {
	t.Helper()
	id, err := job.NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	table := make([]job.Host, n)
	for r := range table {
		table[r] = job.Host{Host: "127.0.0.1", Port: 40000 + r}
	}
	return &jobs{t: t, id: id, spec: job.Spec{Size: n, Hosts: table, JoinMS: 20000, Expires: time.Now().Add(10 * time.Minute)}}
}

// job returns rank's description.
func (f *jobs) job(rank int) *job.Job {
	f.t.Helper()
	j, err := f.id.Describe(f.spec, rank)
	if err != nil {
		f.t.Fatal(err)
	}
	return j
}

// wantCode fails t unless err has code want and its text starts with it.
func wantCode(t *testing.T, what string, err error, want codes.Code) {
	t.Helper()
	if got := codes.Of(err); got != want {
		t.Fatalf("%s = %v (code %v), want %v", what, err, got, want)
	}
	if !strings.HasPrefix(err.Error(), want.String()+": ") {
		t.Fatalf("%s error text %q does not start with %q", what, err.Error(), want.String()+": ")
	}
}
