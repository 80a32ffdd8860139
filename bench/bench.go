// Package bench is `sperli bench` (SPEC §11): real rank processes on
// loopback, each measurement a job of its own, against a bare crypto/tls
// pair measured in the same run.
package bench

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sperli/job"
	"sperli/record"
)

//go:embed pingpong.star
var pingpongStar []byte

// Options are the flags of `sperli bench`.
type Options struct {
	Pings    int   // round trips per 64-byte measurement (default 1000)
	Messages int   // 1 MiB messages per rate measurement (default 32)
	Sizes    []int // the message-size sweep (default 64 B … 16 MiB)
	Repeat   int   // runs of each pair measurement, interleaved; the median counts (default 5)
	Pin      bool  // rank i of every job on core i mod NumCPU (taskset), as mpirun --bind-to core
	Self     string
	Log      io.Writer // progress, or nil
}

// DefaultSizes is the sweep of message sizes.
var DefaultSizes = []int{64, 1 << 10, 16 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20}

// Pair is one measured pair of rank kinds.
type Pair struct {
	Name        string  `json:"name"`
	RoundTripUS float64 `json:"roundtrip_64B_us"`
	NoSpinUS    float64 `json:"roundtrip_64B_nospin_us,omitempty"` // SPERLI_SPIN_US=0
	RateMBs     float64 `json:"rate_1MiB_MBps"`
	RTRatio     float64 `json:"roundtrip_ratio_to_tls"`
	RateRatio   float64 `json:"rate_ratio_to_tls"`
}

// Point is one size of the sweep.
type Point struct {
	Size        int     `json:"size"`
	RoundTripUS float64 `json:"roundtrip_us"`
	RateMBs     float64 `json:"rate_MBps"`
	TLSRTUS     float64 `json:"tls_roundtrip_us"`
	TLSRateMBs  float64 `json:"tls_rate_MBps"`
}

// Report is the whole run.
type Report struct {
	Machine     string             `json:"machine"`
	Placement   string             `json:"placement"`
	Pairs       []Pair             `json:"pairs"`
	Sweep       []Point            `json:"sweep"`
	AllreduceMS float64            `json:"allreduce_16MB_3ranks_ms"`
	JoinMS      map[string]float64 `json:"join_ms"`
	EmptyRunMS  float64            `json:"empty_run_4ranks_ms"`
	IdleRSSMiB  float64            `json:"idle_rank_rss_MiB"`
}

type kind string

const (
	kStar kind = "starlark"
	kGo   kind = "go"
	kTLS  kind = "tls"
)

type runner struct {
	o   Options
	dir string
	id  *job.Identity
}

func (o *Options) defaults() {
	if o.Pings <= 0 {
		o.Pings = 1000
	}
	if o.Messages <= 0 {
		o.Messages = 32
	}
	if o.Repeat <= 0 {
		o.Repeat = 5
	}
	if len(o.Sizes) == 0 {
		o.Sizes = DefaultSizes
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
}

// Run measures everything of SPEC §11.
func Run(o Options) (*Report, error) {
	o.defaults()
	dir, err := os.MkdirTemp("", "sperli-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "pingpong.star"), pingpongStar, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "empty.star"), []byte("pass\n"), 0o600); err != nil {
		return nil, err
	}
	id, err := job.NewIdentity()
	if err != nil {
		return nil, err
	}
	r := &runner{o: o, dir: dir, id: id}
	rep := &Report{Machine: machine(), JoinMS: map[string]float64{}, Placement: "ranks unpinned"}
	if o.Pin {
		if _, err := exec.LookPath("taskset"); err != nil {
			return nil, fmt.Errorf("--pin needs taskset (util-linux): %w", err)
		}
		rep.Placement = fmt.Sprintf("rank i of each job pinned to core i mod %d (taskset)", goruntime.NumCPU())
	}

	if err := r.pairs(rep); err != nil {
		return nil, err
	}
	if err := r.sweep(rep); err != nil {
		return nil, err
	}
	if err := r.collJoin(rep); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Log, "bench: empty run\n")
	if rep.EmptyRunMS, err = r.emptyRun(); err != nil {
		return nil, err
	}
	if rep.IdleRSSMiB, err = r.idleRSS(); err != nil {
		return nil, err
	}
	return rep, nil
}

// pairs measures the round trip and the rate of every pair of kinds of
// rank, with and without spinning, Repeat times interleaved.
func (r *runner) pairs(rep *Report) error {
	o := r.o
	pairs := []struct {
		name string
		a, b kind
	}{
		{"tls (ceiling)", kTLS, kTLS},
		{"go-go", kGo, kGo},
		{"starlark-starlark", kStar, kStar},
		{"starlark-go", kStar, kGo},
		{"go-starlark", kGo, kStar},
	}
	// Each pair's measurements run Repeat times, the pairs interleaved, so
	// that a slow spell of the machine falls on every pair alike; each
	// figure is the median of its runs.
	noSpin := []string{"SPERLI_SPIN_US=0"}
	rt := make([][]float64, len(pairs))
	rtNoSpin := make([][]float64, len(pairs))
	st := make([][]float64, len(pairs))
	for run := 0; run < o.Repeat; run++ {
		for i, p := range pairs {
			fmt.Fprintf(o.Log, "bench: %s (%d of %d)\n", p.name, run+1, o.Repeat)
			ns, err := r.measure([]kind{p.a, p.b}, "pingpong", 64, o.Pings, nil)
			if err != nil {
				return fmt.Errorf("%s round trip: %w", p.name, err)
			}
			rt[i] = append(rt[i], ns)
			if p.a != kTLS {
				if ns, err = r.measure([]kind{p.a, p.b}, "pingpong", 64, o.Pings, noSpin); err != nil {
					return fmt.Errorf("%s round trip without spin: %w", p.name, err)
				}
				rtNoSpin[i] = append(rtNoSpin[i], ns)
			}
			if ns, err = r.measure([]kind{p.a, p.b}, "stream", 1<<20, o.Messages, nil); err != nil {
				return fmt.Errorf("%s rate: %w", p.name, err)
			}
			st[i] = append(st[i], ns)
		}
	}
	for i, p := range pairs {
		rep.Pairs = append(rep.Pairs, Pair{Name: p.name, RoundTripUS: median(rt[i]) / 1e3, NoSpinUS: median(rtNoSpin[i]) / 1e3,
			RateMBs: float64(o.Messages) * (1 << 20) / (median(st[i]) / 1e9) / 1e6})
	}
	for i := range rep.Pairs {
		rep.Pairs[i].RTRatio = rep.Pairs[i].RoundTripUS / rep.Pairs[0].RoundTripUS // pairs[0] is the ceiling
		rep.Pairs[i].RateRatio = rep.Pairs[i].RateMBs / rep.Pairs[0].RateMBs
	}
	return nil
}

// sweep measures the round trip and the rate of Go ranks and of plain TLS
// at every size of Sizes.
func (r *runner) sweep(rep *Report) error {
	o := r.o
	for _, size := range o.Sizes {
		fmt.Fprintf(o.Log, "bench: sweep %d bytes\n", size)
		pings := max(10, min(o.Pings, (64<<20)/size))
		msgs := max(4, min(4*o.Pings, (256<<20)/size))
		pt := Point{Size: size}
		for _, k := range []kind{kGo, kTLS} {
			rt, err := r.measure([]kind{k, k}, "pingpong", size, pings, nil)
			if err != nil {
				return err
			}
			st, err := r.measure([]kind{k, k}, "stream", size, msgs, nil)
			if err != nil {
				return err
			}
			rate := float64(msgs) * float64(size) / (st / 1e9) / 1e6
			if k == kGo {
				pt.RoundTripUS, pt.RateMBs = rt/1e3, rate
			} else {
				pt.TLSRTUS, pt.TLSRateMBs = rt/1e3, rate
			}
		}
		rep.Sweep = append(rep.Sweep, pt)
	}
	return nil
}

// collJoin measures a 16 MB allreduce over 3 ranks and the join of 2, 8
// and 32.
func (r *runner) collJoin(rep *Report) error {
	o := r.o
	fmt.Fprintf(o.Log, "bench: allreduce\n")
	ar, err := r.measure([]kind{kGo, kGo, kGo}, "allreduce", 16_000_000, 10, nil)
	if err != nil {
		return fmt.Errorf("allreduce: %w", err)
	}
	rep.AllreduceMS = ar / 1e6
	for _, n := range []int{2, 8, 32} {
		fmt.Fprintf(o.Log, "bench: join of %d ranks\n", n)
		ks := make([]kind, n)
		for i := range ks {
			ks[i] = kGo
		}
		best := 0.0
		for try := 0; try < 3; try++ {
			ns, err := r.measure(ks, "join", 0, 0, nil)
			if err != nil {
				return fmt.Errorf("join of %d: %w", n, err)
			}
			if best == 0 || ns < best {
				best = ns
			}
		}
		rep.JoinMS[strconv.Itoa(n)] = best / 1e6
	}
	return nil
}

// start starts the ranks of one job, kinds[i] for rank i, each with a
// listening socket of its own and its description on stdin.
func (r *runner) start(kinds []kind, args, env []string) ([]*exec.Cmd, []*bytes.Buffer, error) {
	n := len(kinds)
	table := make([]job.Host, n)
	files := make([]*os.File, n)
	defer func() {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
	}()
	for i := range table {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, err
		}
		files[i], err = ln.(*net.TCPListener).File()
		ln.Close()
		if err != nil {
			return nil, nil, err
		}
		table[i] = job.Host{Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port}
	}
	spec := job.Spec{Size: n, Hosts: table, Launched: true, Expires: time.Now().Add(10 * time.Minute)}
	cmds := make([]*exec.Cmd, n)
	outs := make([]*bytes.Buffer, n)
	for i, k := range kinds {
		j, err := r.id.Describe(spec, i)
		if err != nil {
			return nil, nil, err
		}
		j.ListenFD = 3
		var argv []string
		switch k {
		case kStar:
			argv = append([]string{r.o.Self, "rank", filepath.Join(r.dir, "pingpong.star")}, args...)
		case kGo:
			argv = append([]string{r.o.Self, "bench-rank"}, args...)
		case kTLS:
			argv = append([]string{r.o.Self, "bench-tls"}, args...)
		}
		if r.o.Pin {
			argv = append([]string{"taskset", "-c", strconv.Itoa(i % goruntime.NumCPU())}, argv...)
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		if env != nil {
			cmd.Env = append(os.Environ(), env...)
		}
		cmd.ExtraFiles = []*os.File{files[i]}
		// The description, then stdin stays open (a launched rank ends at
		// its end) until the process ends.
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, nil, err
		}
		outs[i] = new(bytes.Buffer)
		cmd.Stdout = outs[i]
		cmd.Stderr = outs[i]
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return nil, nil, err
		}
		stdin.Write(append(j.Encode(), '\n'))
		cmds[i] = cmd
	}
	return cmds, outs, nil
}

// measure runs one job (its ranks' environment plus env) and returns rank
// 0's figure in nanoseconds.
func (r *runner) measure(kinds []kind, mode string, size, count int, env []string) (float64, error) {
	args := []string{mode, strconv.Itoa(size), strconv.Itoa(count)}
	if mode == "join" {
		args[1] = strconv.FormatInt(time.Now().UnixNano(), 10)
	}
	cmds, outs, err := r.start(kinds, args, env)
	if err != nil {
		return 0, err
	}
	done := make(chan error, len(cmds))
	for _, c := range cmds {
		go func(c *exec.Cmd) { done <- c.Wait() }(c)
	}
	timeout := time.After(5 * time.Minute)
	var firstErr error
	for range cmds {
		select {
		case err := <-done:
			if err != nil && firstErr == nil {
				firstErr = err
			}
		case <-timeout:
			for _, c := range cmds {
				c.Process.Kill()
			}
			return 0, fmt.Errorf("%s of %d bytes did not end in 5 minutes", mode, size)
		}
	}
	if firstErr != nil {
		return 0, fmt.Errorf("%v: %s", firstErr, firstLines(outs))
	}
	var res struct{ NS float64 }
	for _, line := range strings.Split(outs[0].String(), "\n") {
		if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &res) == nil {
			return res.NS, nil
		}
	}
	return 0, fmt.Errorf("rank 0 reported nothing: %s", firstLines(outs))
}

// median of xs (0 for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func firstLines(outs []*bytes.Buffer) string {
	var b strings.Builder
	for i, o := range outs {
		for _, l := range strings.SplitN(o.String(), "\n", 4)[:min(3, strings.Count(o.String(), "\n"))] {
			if !strings.HasPrefix(l, record.StatusPrefix) {
				fmt.Fprintf(&b, "[rank %d] %s; ", i, l)
			}
		}
	}
	return b.String()
}

// emptyRun is the median wall time of `sperli run -n 4` of an empty program.
func (r *runner) emptyRun() (float64, error) {
	var times []float64
	for i := 0; i < 5; i++ {
		t0 := time.Now()
		out, err := exec.Command(r.o.Self, "run", "-n", "4", filepath.Join(r.dir, "empty.star")).CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("sperli run -n 4 empty.star: %v: %s", err, out)
		}
		times = append(times, float64(time.Since(t0).Microseconds())/1e3)
	}
	sort.Float64s(times)
	return times[len(times)/2], nil
}

// idleRSS is the resident memory of a joined rank that waits.
func (r *runner) idleRSS() (float64, error) {
	cmds, _, err := r.start([]kind{kGo, kGo}, []string{"idle", "0", "0"}, nil)
	if err != nil {
		return 0, err
	}
	defer func() {
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
	}()
	time.Sleep(time.Second)
	// Both ranks wait in Recv for a message that never comes: the RSS of a
	// joined rank that holds its connections and heartbeats.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmds[1].Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			kb, _ := strconv.ParseFloat(strings.Fields(l)[1], 64)
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS")
}

func machine() string {
	cpu := "unknown cpu"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				cpu = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	var u syscall.Utsname
	syscall.Uname(&u)
	rel := make([]byte, 0, len(u.Release))
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		rel = append(rel, byte(c))
	}
	return fmt.Sprintf("%s, %d cpus, linux %s", cpu, goruntime.NumCPU(), rel)
}
