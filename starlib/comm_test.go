package starlib_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"sperli/codes"
	"sperli/job"
	"sperli/runtime"
	"sperli/starlib"
)

// startJob joins n ranks in this process over loopback with real certificates.
func startJob(t *testing.T, ctx context.Context, n int) []*runtime.Comm {
	t.Helper()
	id, err := job.NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	table := make([]runtime.Host, n)
	lns := make([]net.Listener, n)
	for r := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[r] = ln
		table[r] = runtime.Host{Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port}
	}
	spec := job.Spec{Size: n, Hosts: table, Expires: time.Now().Add(time.Hour)}
	comms := make([]*runtime.Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		j, err := id.Describe(spec, r)
		if err != nil {
			t.Fatal(err)
		}
		j.Listener = lns[r]
		wg.Add(1)
		go func(r int) { defer wg.Done(); comms[r], errs[r] = runtime.Init(ctx, j) }(r)
	}
	wg.Wait()
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

// runJob runs file on every rank of a new job of n ranks.
func runJob(t *testing.T, file string, n int) ([]error, []string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	comms := startJob(t, ctx, n)
	errs := make([]error, n)
	outs := make([]bytes.Buffer, n)
	var wg sync.WaitGroup
	for r := range comms {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			errs[r] = starlib.Run(&starlib.Program{File: file, Comm: comms[r], Context: ctx, Stdout: &outs[r]})
		}(r)
	}
	wg.Wait()
	s := make([]string, n)
	for i := range outs {
		s[i] = outs[i].String()
	}
	return errs, s
}

// TestJobPrograms runs the Starlark programs of testdata/jobs, each on a
// job of its own; every rank must end without error.
func TestJobPrograms(t *testing.T) {
	for _, tc := range []struct {
		file string
		n    int
	}{
		{"testdata/jobs/p2p.star", 3},
		{"testdata/jobs/collectives.star", 3},
		{"testdata/jobs/finish.star", 2},
		{"testdata/jobs/calls.star", 4},
	} {
		t.Run(tc.file, func(t *testing.T) {
			errs, _ := runJob(t, tc.file, tc.n)
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
	}
}

// TestRefusalEndsProgram: a refusal not caught by attempt ends the program
// with an error whose message starts with the code and that keeps the code
// for the exit status; the backtrace names file and line.
func TestRefusalEndsProgram(t *testing.T) {
	dir := t.TempDir()
	file := dir + "/refuse.star"
	writeFile(t, file, "def main():\n    comm.send(9, 0, 'x')\n")
	errs, _ := runJob(t, file, 2)
	for r, err := range errs {
		if codes.Of(err) != codes.OutOfRange {
			t.Fatalf("rank %d: %v, want H1616", r, err)
		}
		if !strings.Contains(err.Error(), "refuse.star:2:") || !strings.Contains(err.Error(), "H1616: send: rank 9") {
			t.Errorf("rank %d error %q lacks file:line or the coded message", r, err)
		}
	}
}

// TestProgramErrorEndsJob: a Starlark error on one rank ends it with the
// backtrace; the runtime then tells the others (H1612, cause failed).
func TestProgramErrorEndsJob(t *testing.T) {
	dir := t.TempDir()
	file := dir + "/boom.star"
	writeFile(t, file, "def main():\n    if comm.rank == 1:\n        x = 1 // 0\n    comm.barrier()\n")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	comms := startJob(t, ctx, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for r := range comms {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			err := starlib.Run(&starlib.Program{File: file, Comm: comms[r], Context: ctx, Stdout: new(bytes.Buffer)})
			if err != nil && r == 1 {
				comms[r].Fail(err) // what runtime.Exit does for a rank program
			}
			errs[r] = err
		}(r)
	}
	wg.Wait()
	if !strings.Contains(errs[1].Error(), "boom.star:3:") || !strings.Contains(errs[1].Error(), "division by zero") {
		t.Errorf("rank 1: %v, want the division error at boom.star:3", errs[1])
	}
	for _, r := range []int{0, 2} {
		e := codes.As(errs[r])
		if e == nil || e.Code != codes.JobEnded || e.Cause == nil || e.Cause.Kind != codes.CauseFailed || e.Cause.Rank != 1 {
			t.Errorf("rank %d: %v, want H1612 caused by rank 1 failing", r, errs[r])
		}
		if strings.Contains(errs[r].Error(), "\n") && !strings.HasPrefix(lastLine(errs[r].Error()), "Error") {
			t.Errorf("rank %d: error text ends without the cause: %q", r, errs[r])
		}
	}
}

func lastLine(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return l[len(l)-1]
}

// TestNoJob: without a job comm is None and the program still runs.
func TestNoJob(t *testing.T) {
	dir := t.TempDir()
	file := dir + "/alone.star"
	writeFile(t, file, "load('json', 'json')\nload('math.star', 'math')\nprint(comm == None, sperli.args, json.encode([1]), math.floor(2.5))\n")
	var out bytes.Buffer
	if err := starlib.Run(&starlib.Program{File: file, Args: []string{"a", "--b"}, Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "True [\"a\", \"--b\"] [1] 2\n"; got != want {
		t.Errorf("output = %q, want %q", got, want)
	}
}

// TestLoadModules: load() finds files beside the program, then in the
// module directories; a missing one is an error naming the places looked.
func TestLoadModules(t *testing.T) {
	dir, mods := t.TempDir(), t.TempDir()
	writeFile(t, dir+"/near.star", "near = 'near'\n")
	writeFile(t, mods+"/far.star", "far = 'far'\n")
	writeFile(t, dir+"/prog.star", "load('near.star', 'near')\nload('far.star', 'far')\nprint(near, far)\n")
	var out bytes.Buffer
	if err := starlib.Run(&starlib.Program{File: dir + "/prog.star", Modules: []string{mods}, Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "near far\n" {
		t.Errorf("output = %q", out.String())
	}
	writeFile(t, dir+"/missing.star", "load('nowhere.star', 'x')\n")
	err := starlib.Run(&starlib.Program{File: dir + "/missing.star", Modules: []string{mods}, Stdout: &out})
	if err == nil || !strings.Contains(err.Error(), `module "nowhere.star" not found`) {
		t.Errorf("load of a missing module = %v", err)
	}
}

var _ = fmt.Sprintf
