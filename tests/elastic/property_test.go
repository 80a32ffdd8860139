package elastic

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sperli/tests/internal/testbin"
)

// The recovery property (SPEC §10.3, no call waits for ever after a loss):
// random programs — point-to-point with a fixed and with any source, the
// collectives, agree, shrink and grow; recovered in place or managing
// their losses — run under random losses (one slot or two, rank 0 among
// them, at a collective, as the agreement begins or while the job joins;
// or a rank process stopped with SIGSTOP at a collective and continued after a while, within
// its silence limit or past it). Every run ends by
// itself (the launcher's --timeout, the bound, is never needed), leaves no
// process behind, and ends with 0 when the spares cover the losses of a
// job recovered in place, with the result of the run without failures.
// PROPERTY_RUNS sets the number of programs (make fuzz runs more),
// PROPERTY_SEED the first program's seed (1: a failure names its seed, and
// PROPERTY_SEED=S PROPERTY_RUNS=1 runs that program alone).

// op is one step of a generated program: Starlark that reads and returns
// acc on communicator c at step k.
type op struct {
	name       string
	collective bool // counts as a collective of the failure schedule
	body       string
}

var ops = []op{
	{"allreduce", true, `v = array.unpack("int64", c.allreduce("int64", "sum", array.pack("int64", [acc % 1000 + c.rank + k])))[0]
    return (acc * 31 + v) % 1000003`},
	{"barrier", true, `c.barrier()
    return (acc * 31 + k) % 1000003`},
	{"bcast", true, `d = c.bcast(0, array.pack("int64", [acc])) if c.rank == 0 else c.bcast(0)
    return (acc * 31 + array.unpack("int64", d)[0]) % 1000003`},
	{"allgather", true, `t = 0
    for x in array.unpack("int64", c.allgather(array.pack("int64", [c.rank + k]))):
        t += x
    return (acc * 31 + t) % 1000003`},
	{"ring", false, `right, left = (c.rank + 1) % c.size, (c.rank + c.size - 1) % c.size
    d = c.sendrecv(right, 100 + k, array.pack("int64", [k * 7 + c.rank]), left, 100 + k)
    return (acc * 31 + array.unpack("int64", d)[0] - left) % 1000003`},
	{"anysource", false, `t = 0
    if c.rank == 0:
        for i in range(c.size - 1):
            m = c.recv_from(c.ANY_SOURCE, 200 + k)
            t += array.unpack("int64", m.data)[0]
        t = t - (c.size - 1) * c.size // 2
    else:
        c.send(0, 200 + k, array.pack("int64", [c.rank * (k + 1)]))
    return (acc * 31 + t % 97) % 1000003`},
}

// program is a generated rank program and what its failure schedule may
// name.
type program struct {
	srcText     string
	collectives int // collectives each rank makes in a run without failures
	manages     bool
}

// genProgram writes a program of steps random steps; manages: it takes its
// losses itself (set_on_loss("return"), agree on each step, revoke and
// shrink or grow on a failed one).
func genProgram(rng *rand.Rand, steps int, manages, grow bool) program {
	var b strings.Builder
	p := program{manages: manages}
	var seq []int
	for i := 0; i < steps; i++ {
		seq = append(seq, rng.Intn(len(ops)))
	}
	for i, o := range seq {
		fmt.Fprintf(&b, "def step%d(c, acc, k):\n    %s\n\n", i, ops[o].body)
		if ops[o].collective {
			p.collectives++
		}
	}
	b.WriteString("STEPS = [")
	for i := range seq {
		fmt.Fprintf(&b, "step%d, ", i)
	}
	b.WriteString("]\n\n")
	if !manages {
		b.WriteString(`def main():
    acc = 1
    for k in range(len(STEPS)):
        acc = STEPS[k](comm, acc, k)
    if comm.rank == 0:
        print("result %d" % acc)
`)
		p.srcText = b.String()
		return p
	}
	regroup := "c.shrink()"
	if grow {
		regroup = "c.grow()"
	}
	fmt.Fprintf(&b, `def main():
    c = comm
    c.set_on_loss("return")
    # ULFM's idiom: every step's outcome is agreed on, so every live rank
    # makes the same calls; a failed one is revoked and regrouped. A
    # promoted spare (grow) runs main() from its start: after a regroup
    # every rank takes the step of the one furthest on (sync), agreed too.
    acc, k, sync = 1, 0, c.generation > 0
    for attempt in range(8 * len(STEPS)):
        if not sync and k >= len(STEPS):
            break
        if sync:
            r = sperli.attempt(c.allreduce, "int64", "max", array.pack("int64", [k]))
        else:
            r = sperli.attempt(STEPS[k], c, acc, k)
        a = sperli.attempt(c.agree, 1 if r.ok else 0)
        if r.ok and a.ok and a.value == 1:
            if sync:
                k, sync = array.unpack("int64", r.value)[0], False
            else:
                acc, k = r.value, k + 1
            continue
        c.revoke()
        c = %[1]s
        sync = True
    print("rank %%d of %%d: %%d steps" %% (c.rank, c.size, k))
`, regroup)
	p.srcText = b.String()
	return p
}

// schedule draws the losses: one slot or two (rank 0 a third of the time),
// each at a collective of the run or as it begins the agreement, or, in an
// eighth of the schedules, every rank at one collective. A quarter
// of the schedules stop the first slot (SIGSTOP) at its collective instead
// of killing it: stop is then how long it stays stopped before the test
// continues it, 0 otherwise. In a fifth of the others the first slot dies
// while the job joins instead (join-1). A stop counts as a loss (it is one when it
// outlasts the silence limit).
func schedule(rng *rand.Rand, p program, n int, inPlace bool) (_ string, losses int, stop time.Duration) {
	losses = 1 + rng.Intn(2)
	slots := rng.Perm(n)[:losses]
	if rng.Intn(4) == 0 {
		// Past the silence limit of 1 s (declared lost, then continued:
		// a zombie that must end), or well within it (nothing lost).
		stop = []time.Duration{200 * time.Millisecond, 2500 * time.Millisecond}[rng.Intn(2)]
	}
	if rng.Intn(3) == 0 && !slicesContains(slots, 0) {
		slots[0] = 0
	}
	var items []string
	for i, s := range slots {
		// Entries are per generation: the second loss comes in generation
		// 0 too (two at once, or one during the other's recovery), or in
		// the generation the first made.
		gen := 0
		if i == 1 && rng.Intn(2) == 0 {
			gen = 1
		}
		point := fmt.Sprintf("collective-%d", 1+rng.Intn(max(1, p.collectives)))
		switch {
		case i == 0 && stop > 0:
			point = "stop-" + point // in generation 0: at a collective the run makes
		case inPlace && losses == 2 && rng.Intn(4) == 0:
			point = "agree-1" // dies as it begins the agreement on the other's loss
		}
		items = append(items, fmt.Sprintf("%d:%d@%s", gen, s, point))
	}
	if rng.Intn(8) == 0 {
		// Every rank at once, at the same collective: only spares are
		// left (drawn last, so the other draws of a seed stay as they were).
		point := fmt.Sprintf("collective-%d", 1+rng.Intn(max(1, p.collectives)))
		items = items[:0]
		for s := 0; s < n; s++ {
			items = append(items, fmt.Sprintf("0:%d@%s", s, point))
		}
		return strings.Join(items, ","), n, 0
	}
	if stop == 0 && rng.Intn(5) == 0 {
		// The first loss while the job joins, once the slot has its
		// first link (drawn after the others, which stay as they were).
		items[0] = fmt.Sprintf("0:%d@join-1", slots[0])
	}
	return strings.Join(items, ","), losses, stop
}

// continueStopped watches the processes under the launcher l until it
// ends and continues (SIGCONT) each one found stopped, stop after it was
// first seen so. It polls every 5 ms: the loop is bounded by the
// launcher's end, which --timeout bounds.
func continueStopped(l *testbin.Process, stop time.Duration) {
	seen := map[int]time.Time{}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-l.Done():
			for pid := range seen {
				syscall.Kill(pid, syscall.SIGCONT)
			}
			return
		case <-tick.C:
		}
		for _, k := range testbin.Children(l.Cmd.Process.Pid) {
			if k.State != "T" {
				continue
			}
			if t0, ok := seen[k.PID]; !ok {
				seen[k.PID] = time.Now()
			} else if time.Since(t0) >= stop {
				syscall.Kill(k.PID, syscall.SIGCONT)
			}
		}
	}
}

func slicesContains(s []int, x int) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

var resultRE = regexp.MustCompile(`(?m)^\[rank \d+(?: · slot \d+)?\] result (\d+)$`)

// lastResult is the result line of the generation that went on (an
// abandoned generation's lines come first, under their mark).
func lastResult(out string) string {
	m := resultRE.FindAllStringSubmatch(out, -1)
	if len(m) == 0 {
		return ""
	}
	return m[len(m)-1][1]
}

// afterFinish is what the ranks say of a loss that came after one of them
// had said bye.
const afterFinish = "a generation whose ranks have begun to finish is not recovered in place"

// propertyRuns is how many runs a property test makes (the variable
// runsVar, else def) and its first seed (PROPERTY_SEED, else 1).
func propertyRuns(t *testing.T, runsVar string, def int) (runs, first int) {
	runs, first = def, 1
	for _, v := range []struct {
		name string
		to   *int
	}{{runsVar, &runs}, {"PROPERTY_SEED", &first}} {
		if s := os.Getenv(v.name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: want a number 1 or more", v.name, s)
			}
			*v.to = n
		}
	}
	return runs, first
}

func TestRecoveryProperty(t *testing.T) {
	runs, first := propertyRuns(t, "PROPERTY_RUNS", 24)
	for seed := int64(first); seed < int64(first+runs); seed++ {
		rng := rand.New(rand.NewSource(seed))
		n := 3 + rng.Intn(3)
		manages := seed%2 == 0
		spares := rng.Intn(3)
		if !manages {
			spares = 1 + rng.Intn(2)
		}
		grow := manages && spares > 0 && rng.Intn(2) == 0
		p := genProgram(rng, 4+rng.Intn(5), manages, grow)
		sched, losses, stop := schedule(rng, p, n, !manages)
		name := fmt.Sprintf("seed %d: %d ranks + %d spares, manages %v, grow %v, %s", seed, n, spares, manages, grow, sched)
		if stop > 0 {
			name += fmt.Sprintf(" (continued after %v)", stop)
		}
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			dir := t.TempDir()
			prog := filepath.Join(dir, "p.star")
			if err := os.WriteFile(prog, []byte(p.src()), 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"-n", fmt.Sprint(n), "--spares", fmt.Sprint(spares), "--silence", "1000", "--timeout", "80s", "--record", "rec.jsonl", prog}
			l, work := start(t, sched, args...)
			watched := make(chan struct{})
			go func() { continueStopped(l, stop); close(watched) }()
			r := l.Wait(t, timeout)
			<-watched
			t.Logf("%s: exit %d\n%s", name, r.Code, r.Stderr)
			if strings.Contains(r.Stderr, "--timeout") || r.Code == 1 && strings.Contains(r.Stderr, "waiting") {
				t.Fatalf("%s: the job hung (ended by --timeout)\n%s\n%v", name, p.src(), r)
			}
			for _, g := range testbin.ReadRecord(t, filepath.Join(work, "rec.jsonl")) {
				for slot, pid := range g.Pids {
					if syscall.Kill(pid, 0) == nil {
						t.Errorf("%s: slot %s (pid %d) of generation %d is still running", name, slot, pid, g.Gen)
					}
				}
			}
			switch {
			case manages:
				if r.Code != 0 && r.Code != 1 && r.Code != 75 {
					t.Fatalf("%s: exit %d, want 0, 1 or 75\n%v", name, r.Code, r)
				}
			case losses <= spares && r.Code == 75 && strings.Contains(r.Stderr, afterFinish):
				// The loss came after a rank had finished: the ranks
				// cannot all run the program again, so no spare takes the
				// place, and the job ends as without spares (SPEC §10.2).
			case losses <= spares:
				if r.Code != 0 {
					t.Fatalf("%s: exit %d, want 0 (spares for every loss)\n%s\n%v", name, r.Code, p.src(), r)
				}
				clean, _ := run(t, "", "-n", fmt.Sprint(n), prog)
				if got, want := lastResult(r.Stdout), lastResult(clean.Stdout); got == "" || got != want {
					t.Fatalf("%s: result %q, want %q (the run without failures)\n%v", name, got, want, r)
				}
			default:
				if r.Code != 0 && r.Code != 75 {
					t.Fatalf("%s: exit %d, want 0 or 75 (more losses than spares, or fewer if one came late)\n%v", name, r.Code, r)
				}
			}
		})
	}
}

func (p program) src() string { return p.srcText }
