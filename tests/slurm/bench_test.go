//go:build slurm

package slurm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sperli/tests/internal/testbin"
)

// jobMakeArgs makes a job of 6 ranks, 2 on each node in srun's block
// order, with `sperli job make` in dir, and returns srun's arguments that
// start it (no PMI: every task reads its own description).
func jobMakeArgs(tb testing.TB, dir string) []string {
	tb.Helper()
	var lines []string
	for r := 0; r < 6; r++ {
		lines = append(lines, nodeAddr(r/2+1))
	}
	hostsFile := testbin.WriteFile(tb, filepath.Join(dir, "hosts.txt"), strings.Join(lines, "\n")+"\n", 0o644)
	jobDir := filepath.Join(dir, "job")
	os.RemoveAll(jobDir)
	mk := cl.command(context.Background(), dir, baseEnv, sperli, "job", "make", "-n", "6", "--hosts", hostsFile, "--out", jobDir)
	if out, err := mk.CombinedOutput(); err != nil {
		tb.Fatalf("sperli job make: %v\n%s", err, out)
	}
	return []string{"--mpi=none", "-K", "-N", "3", "--ntasks-per-node=2", "-n", "6", "/bin/sh", "-c",
		fmt.Sprintf(`exec %s rank %s < %s/rank-$SLURM_PROCID.job`, sperli, sum, jobDir)}
}

// TestJobMakeSrun: the recipe for launchers without PMI — descriptions
// from `sperli job make`, each task reading its own — prints the golden
// line too.
func TestJobMakeSrun(t *testing.T) {
	p := newPlace(t)
	r := p.srun(jobMakeArgs(t, filepath.Dir(p.work))...)
	if r.Code != 0 || r.Stdout != golden+"\n" || r.Stderr != "" {
		t.Errorf("%v\nwant exit status 0, stdout %q and nothing on stderr", r, golden)
	}
	p.checkClean()
}

// BenchmarkSrunSumPMI: srun launch to result of the sum on 6 ranks on 3
// nodes over PMI (docs/benchmarks.md).
func BenchmarkSrunSumPMI(b *testing.B) {
	dir := b.TempDir()
	for i := 0; i < b.N; i++ {
		out, err := cl.command(context.Background(), dir, baseEnv, append([]string{"srun"}, args(sperli, "rank", sum)...)...).Output()
		if err != nil || string(out) != golden+"\n" {
			b.Fatalf("srun: %v: %q", err, out)
		}
	}
}

// BenchmarkSrunSumJobMake: the same sum, `sperli job make` then srun of
// ranks that read their descriptions, both timed.
func BenchmarkSrunSumJobMake(b *testing.B) {
	dir := b.TempDir()
	for i := 0; i < b.N; i++ {
		a := jobMakeArgs(b, dir)
		out, err := cl.command(context.Background(), dir, baseEnv, append([]string{"srun"}, a...)...).Output()
		if err != nil || string(out) != golden+"\n" {
			b.Fatalf("srun: %v: %q", err, out)
		}
	}
}

// BenchmarkSrunHostname: srun's own cost of a step of 6 tasks on the same
// nodes, for comparison.
func BenchmarkSrunHostname(b *testing.B) {
	dir := b.TempDir()
	for i := 0; i < b.N; i++ {
		out, err := cl.command(context.Background(), dir, baseEnv, append([]string{"srun"}, args("hostname")...)...).Output()
		if err != nil || strings.Count(string(out), "\n") != 6 {
			b.Fatalf("srun hostname: %v: %q", err, out)
		}
	}
}
