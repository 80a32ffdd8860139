//go:build scale

// Package scale runs jobs of hundreds of real rank processes on this
// machine (SPEC §18): `make test-scale`. Each job joins, allreduces and
// meets at a barrier; the test checks the result and, from every rank's
// status record (--stats=json), that no rank had more links than its
// tree and ring give it and that its descriptors stayed within
// 2·log₂N + 8. It logs the wall time, the peak resident memory and the
// processor time a rank took, in all and until its join ended.
package scale

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"sperli/tests/internal/testbin"
	"sperli/topo"
)

var sperli string

func TestMain(m *testing.M) {
	bin, err := os.MkdirTemp("", "sperli-scale-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sperli = filepath.Join(bin, "sperli")
	root, err := testbin.Root()
	if err == nil {
		cmd := exec.Command("go", "build", "-o", sperli, "./cmd/sperli")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0") // as make build-go
		var out []byte
		if out, err = cmd.CombinedOutput(); err != nil {
			err = fmt.Errorf("%v\n%s", err, out)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "building sperli:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(bin)
	os.Exit(code)
}

// prog is scripts/bench/scale.star.
const prog = `def main():
    s = comm.allreduce("int64", "sum", array.pack("int64", [comm.rank + 1]))
    comm.barrier()
    if comm.rank == 0:
        n = comm.size
        print("sum=%d want=%d" % (array.unpack("int64", s)[0], n * (n + 1) // 2))
`

type report struct {
	Ranks []struct {
		Rank      int     `json:"rank"`
		PeakRSSKB int64   `json:"peak_rss_kb"`
		PeakLinks int64   `json:"peak_links"`
		PeakFDs   int64   `json:"peak_fds"`
		CPUMS     float64 `json:"cpu_ms"`
		JoinCPUMS float64 `json:"join_cpu_ms"`
		JoinMS    float64 `json:"join_ms"`
	} `json:"sperli_stats"`
}

func TestScale(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "scale.star")
	if err := os.WriteFile(p, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{256, 512, 1024} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			cmd := exec.Command(sperli, "run", "-n", fmt.Sprint(n), "--stats=json", "--timeout", "8m", p)
			cmd.Dir = dir
			start := time.Now()
			r := testbin.Start(t, cmd).Wait(t, 9*time.Minute)
			took := time.Since(start)
			if r.Code != 0 {
				t.Fatalf("exit status %d\nstdout:\n%s\nstderr (last 3000 bytes):\n%s", r.Code, r.Stdout, tail(r.Stderr, 3000))
			}
			want := fmt.Sprintf("[rank 0] sum=%d want=%d", n*(n+1)/2, n*(n+1)/2)
			if !strings.Contains(r.Stdout, want) {
				t.Fatalf("stdout lacks %q:\n%s", want, r.Stdout)
			}
			js := regexp.MustCompile(`(?m)^\{"sperli_stats".*\}$`).FindString(r.Stderr)
			var rep report
			if err := json.Unmarshal([]byte(js), &rep); err != nil || len(rep.Ranks) != n {
				t.Fatalf("no --stats report of %d ranks (%v) in:\n%s", n, err, tail(r.Stderr, 3000))
			}
			fdBound := int64(2*bits.Len(uint(n-1)) + 8)
			var rss, links, fds int64
			var cpu, joinCPU, joinWall float64
			for _, x := range rep.Ranks {
				if x.CPUMS <= 0 || x.JoinCPUMS <= 0 || x.JoinCPUMS > x.CPUMS {
					t.Errorf("rank %d says it took %.1f ms of processor time, %.1f ms of it until its join ended: want both above 0, the second within the first", x.Rank, x.CPUMS, x.JoinCPUMS)
				}
				cpu, joinCPU, joinWall = cpu+x.CPUMS, joinCPU+x.JoinCPUMS, joinWall+x.JoinMS
				if most := int64(len(topo.Neighbours(n, x.Rank, nil))); x.PeakLinks > most {
					t.Errorf("rank %d had %d links at once, want at most its %d tree and ring neighbours", x.Rank, x.PeakLinks, most)
				}
				if x.PeakFDs > fdBound {
					t.Errorf("rank %d had %d descriptors open, want at most 2·log₂%d + 8 = %d", x.Rank, x.PeakFDs, n, fdBound)
				}
				rss, links, fds = max(rss, x.PeakRSSKB), max(links, x.PeakLinks), max(fds, x.PeakFDs)
			}
			f := float64(n)
			t.Logf("%d ranks: %v wall, peak RSS per rank at most %.1f MiB, links at most %d, descriptors at most %d; processor time a rank %.1f ms mean, %.1f ms of it until the join ended (%.0f ms after the rank's start, mean)",
				n, took.Round(10*time.Millisecond), float64(rss)/1024, links, fds, cpu/f, joinCPU/f, joinWall/f)
		})
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// TestScaleStop: one rank of 512 stopped (SIGSTOP, by the test failure
// schedule's stop point, never continued) is declared lost by its
// watchers although few others have a link to it; with a spare the job
// recovers in place and ends with the right result, the stopped slot
// ended by the launcher; without one the job ends with 75.
func TestScaleStop(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "stop.star")
	const stopProg = `def main():
    for i in range(3):
        s = comm.allreduce("int64", "sum", array.pack("int64", [comm.rank + 1]))
        comm.barrier()
    if comm.rank == 0:
        n = comm.size
        print("sum=%d want=%d generation=%d" % (array.unpack("int64", s)[0], n * (n + 1) // 2, comm.generation))
`
	if err := os.WriteFile(p, []byte(stopProg), 0o644); err != nil {
		t.Fatal(err)
	}
	const n = 512
	for _, tc := range []struct {
		spares, code int
		out          string
	}{
		{1, 0, fmt.Sprintf("sum=%d want=%d generation=1", n*(n+1)/2, n*(n+1)/2)},
		{0, 75, ""},
	} {
		t.Run(fmt.Sprintf("spares=%d", tc.spares), func(t *testing.T) {
			cmd := exec.Command(sperli, "run", "-n", fmt.Sprint(n), "--spares", fmt.Sprint(tc.spares), "--timeout", "4m", p)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "SPERLI_TEST_FAILURE_SCHEDULE=0:300@stop-collective-2")
			start := time.Now()
			r := testbin.Start(t, cmd).Wait(t, 9*time.Minute)
			if r.Code != tc.code {
				t.Fatalf("exit status %d, want %d\nstdout:\n%s\nstderr (last 3000 bytes):\n%s", r.Code, tc.code, r.Stdout, tail(r.Stderr, 3000))
			}
			if tc.out != "" && !strings.Contains(r.Stdout, tc.out) {
				t.Fatalf("stdout lacks %q:\n%s", tc.out, r.Stdout)
			}
			if !regexp.MustCompile(`rank 300 .*lost`).MatchString(r.Stderr) {
				t.Fatalf("stderr does not say rank 300 was lost:\n%s", tail(r.Stderr, 3000))
			}
			t.Logf("%d ranks, %d spares, rank 300 stopped: exit %d after %v", n, tc.spares, r.Code, time.Since(start).Round(10*time.Millisecond))
		})
	}
}
