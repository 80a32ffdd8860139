package starlib_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.starlark.net/starlark"

	"sperli/codes"
	"sperli/runtime"
	"sperli/starlib"
)

// argsSize is the size of the jobs the argument tests run on: 3 is a rank
// just outside the job.
const argsSize = 3

// hangGuard is how long a call may take before the test calls it a wait.
// It only keeps a call that waits from blocking the test for ever: no
// peer sends anything, so a call that waits never returns, and the test
// asserts on the error a call returns, not on how fast.
const hangGuard = 60 * time.Second

// argsJob runs programs, one after another, on the ranks of one job.
type argsJob struct {
	t     *testing.T
	comms []*runtime.Comm
	dir   string
	n     int // programs run so far, to name their files
}

func newArgsJob(t *testing.T) *argsJob {
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel() // the join only
	return &argsJob{t: t, comms: startJob(t, ctx, argsSize), dir: t.TempDir()}
}

// runEach runs srcs[r] on rank r at once ("" leaves a rank idle: it sends
// nothing) and returns each rank's error. When a rank has not returned
// after hangGuard, the test stops with a message naming what, and the
// programs are cancelled.
func (j *argsJob) runEach(name string, srcs []string) []error {
	j.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make([]error, len(srcs))
	var wg sync.WaitGroup
	for r, src := range srcs {
		if src == "" {
			continue
		}
		j.n++
		file := filepath.Join(j.dir, fmt.Sprintf("p%d.star", j.n))
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			j.t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = starlib.Run(&starlib.Program{File: file, Comm: j.comms[r], Context: ctx, Stdout: new(bytes.Buffer)})
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(hangGuard):
		cancel()
		j.t.Fatalf("%s did not return within %v: it waits instead of refusing its argument at once", name, hangGuard)
	}
	return errs
}

// refuse runs call on ranks (every rank for a collective, else rank 0 with
// the others idle) as a program that fails with "returned" if the call
// returns, and gives the error each raised: the binding's error, without
// the backtrace.
func (j *argsJob) refuse(call string, every bool) []error {
	j.t.Helper()
	src := fmt.Sprintf("v = %s\nfail('returned %%r' %% (v,))\n", call)
	srcs := make([]string, argsSize)
	srcs[0] = src
	if every {
		for r := range srcs {
			srcs[r] = src
		}
	}
	errs := j.runEach(call, srcs)
	if !every {
		errs = errs[:1]
	}
	for r, err := range errs {
		var ee *starlark.EvalError
		if errors.As(err, &ee) && ee.Unwrap() != nil {
			errs[r] = ee.Unwrap()
		}
	}
	return errs
}

// A refusal is what one argument value should get: code 0 for a program
// error (a wrong type), which sperli.attempt does not catch.
type refusal struct {
	arg  string // the argument, in Starlark
	code codes.Code
	msg  string
}

var (
	bigInts = []string{"2147483648", "9223372036854775808", "-9223372036854775809"}
	notInts = [][2]string{{"'1'", "string"}, {"1.0", "float"}, {"None", "NoneType"}, {"[1]", "list"}}
)

// ranksOf are the refusals of a rank argument of a call that names itself
// op in its refusals; -1 is refused unless it is ANY_SOURCE.
func ranksOf(op string, wildcard bool) []refusal {
	vs := append([]string{"-2", fmt.Sprint(argsSize)}, bigInts...)
	if !wildcard {
		vs = append([]string{"-1"}, vs...)
	}
	var out []refusal
	for _, v := range vs {
		out = append(out, refusal{v, codes.OutOfRange, fmt.Sprintf("H1616: %s: rank %s is outside the job (size %d)", op, v, argsSize)})
	}
	return out
}

// tagsOf are the refusals of a tag argument; -1 is refused unless it is
// ANY_TAG.
func tagsOf(op string, wildcard bool) []refusal {
	vs := append([]string{"-2"}, bigInts...)
	if !wildcard {
		vs = append([]string{"-1"}, vs...)
	}
	var out []refusal
	for _, v := range vs {
		out = append(out, refusal{v, codes.OutOfRange, fmt.Sprintf("H1616: %s: tag %s is outside 0 to 2147483647", op, v)})
	}
	return out
}

// rootsOf are the refusals of a collective's root: H1618 on every rank.
func rootsOf() []refusal {
	var out []refusal
	for _, v := range append([]string{"-1", "-2", fmt.Sprint(argsSize)}, bigInts...) {
		out = append(out, refusal{v, codes.WrongCollective, fmt.Sprintf("H1618: root %s is outside the job (size %d)", v, argsSize)})
	}
	return out
}

// notInt are the program errors of an int parameter given another type.
func notInt(fn, param string) []refusal {
	var out []refusal
	for _, v := range notInts {
		out = append(out, refusal{v[0], 0, fmt.Sprintf("comm.%s: for parameter %s: got %s, want int", fn, param, v[1])})
	}
	return out
}

// notOf are the program errors of a parameter given another type, want
// being what its message says it wants.
func notOf(fn, param, want string) []refusal {
	var out []refusal
	for _, v := range [][2]string{{"1", "int"}, {"None", "NoneType"}, {"[1]", "list"}} {
		out = append(out, refusal{v[0], 0, fmt.Sprintf("comm.%s: for parameter %s: got %s, want %s", fn, param, v[1], want)})
	}
	return out
}

func notData(fn, param string) []refusal { return notOf(fn, param, "bytes or string") }

func join(rs ...[]refusal) []refusal {
	var out []refusal
	for _, r := range rs {
		out = append(out, r...)
	}
	return out
}

// TestArgsRefusedBeforeWaiting calls every comm binding with each wrong
// value of each argument — negative (but a wildcard), the job's size,
// 2**31, 2**63, below -2**63, another type — and checks that the call
// returns the exact refusal, at once: the peers send nothing, so a call
// that waited instead would never return. Point-to-point calls run on rank
// 0 alone; a collective's wrong call is made alike by every rank, which
// all return H1618, and the job goes on (SPEC §8.3): every call runs on
// the same job, which ends with calls that work.
func TestArgsRefusedBeforeWaiting(t *testing.T) {
	const over = 16777200 + 1 // a collective's data limit per rank, and one
	tooLong := fmt.Sprintf("'x' * %d", 16777216+1)
	unknownType := refusal{"'int65'", codes.WrongCollective, `H1618: unknown element type "int65" (want one of bytes, int32, int64, uint32, uint64, float32, float64)`}
	unknownOp := refusal{"'add'", codes.WrongCollective, `H1618: unknown reduction "add" (want one of sum, prod, min, max, land, lor, lxor, band, bor, bxor)`}
	tests := []struct {
		call  string // %s is the argument under test
		every bool   // a collective: every rank calls it
		wrong []refusal
	}{
		{"comm.send(%s, 0, 'x')", false, join(ranksOf("send", false), notInt("send", "dest"))},
		{"comm.send(1, %s, 'x')", false, join(tagsOf("send", false), notInt("send", "tag"))},
		{"comm.send(1, 0, %s)", false, join(notData("send", "data"), []refusal{{tooLong, codes.OutOfRange, "H1616: send: message is 16777217 bytes, limit 16777216"}})},
		{"comm.start_send(%s, 0, 'x')", false, join(ranksOf("send", false), notInt("start_send", "dest"))},
		{"comm.start_send(1, %s, 'x')", false, join(tagsOf("send", false), notInt("start_send", "tag"))},
		{"comm.start_send(1, 0, %s)", false, join(notData("start_send", "data"), []refusal{{tooLong, codes.OutOfRange, "H1616: send: message is 16777217 bytes, limit 16777216"}})},
		{"comm.recv(%s, 0)", false, join(ranksOf("recv", true), notInt("recv", "source"))},
		{"comm.recv(1, %s)", false, join(tagsOf("recv", true), notInt("recv", "tag"))},
		{"comm.start_recv(%s, 0)", false, join(ranksOf("recv", true), notInt("start_recv", "source"))},
		{"comm.start_recv(1, %s)", false, join(tagsOf("recv", true), notInt("start_recv", "tag"))},
		{"comm.recv_from(%s, 0)", false, join(ranksOf("recv", true), notInt("recv_from", "source"))},
		{"comm.recv_from(1, %s)", false, join(tagsOf("recv", true), notInt("recv_from", "tag"))},
		{"comm.probe(%s, 0)", false, join(ranksOf("probe", true), notInt("probe", "source"))},
		{"comm.probe(1, %s)", false, join(tagsOf("probe", true), notInt("probe", "tag"))},
		{"comm.iprobe(%s, 0)", false, join(ranksOf("iprobe", true), notInt("iprobe", "source"))},
		{"comm.iprobe(1, %s)", false, join(tagsOf("iprobe", true), notInt("iprobe", "tag"))},
		{"comm.sendrecv(%s, 0, 'x', 1, 0)", false, join(ranksOf("sendrecv", false), notInt("sendrecv", "dest"))},
		{"comm.sendrecv(1, %s, 'x', 1, 0)", false, join(tagsOf("sendrecv", false), notInt("sendrecv", "sendtag"))},
		{"comm.sendrecv(1, 0, %s, 1, 0)", false, join(notData("sendrecv", "data"), []refusal{{tooLong, codes.OutOfRange, "H1616: sendrecv: message is 16777217 bytes, limit 16777216"}})},
		{"comm.sendrecv(1, 0, 'x', %s, 0)", false, join(ranksOf("recv", true), notInt("sendrecv", "source"))},
		{"comm.sendrecv(1, 0, 'x', 1, %s)", false, join(tagsOf("recv", true), notInt("sendrecv", "recvtag"))},
		{"comm.set_silence(%s)", false, join(func() []refusal {
			var out []refusal
			for _, v := range append([]string{"-1", "0", "99", "86400001"}, bigInts...) {
				out = append(out, refusal{v, codes.OutOfRange, fmt.Sprintf("H1616: set_silence: %s ms is outside 100 to 86400000", v)})
			}
			return out
		}(), notInt("set_silence", "ms"))},
		{"comm.finish_send(%s)", false, notOf("finish_send", "op", "comm.op")},
		{"comm.finish_recv(%s)", false, notOf("finish_recv", "op", "comm.op")},
		{"comm.set_on_loss(%s)", false, join([]refusal{{"'never'", codes.OutOfRange, `H1616: set_on_loss: mode "never", want "return" or "recover"`}}, notOf("set_on_loss", "mode", "string"))},
		{"comm.use_checkpoints(%s)", false, []refusal{{"1", 0, "comm.use_checkpoints: dir is int, want a string or None"}}},
		{"comm.%s(1)", false, func() []refusal {
			var out []refusal
			for _, fn := range []string{"heartbeat", "abort", "finish", "failed", "revoke", "layout"} {
				out = append(out, refusal{fn, 0, fmt.Sprintf("comm.%s: got 1 arguments, want at most 0", fn)})
			}
			return out
		}()},

		{"comm.%s(1)", true, func() []refusal {
			var out []refusal
			for _, fn := range []string{"barrier", "resume", "shrink", "grow"} {
				out = append(out, refusal{fn, 0, fmt.Sprintf("comm.%s: got 1 arguments, want at most 0", fn)})
			}
			return out
		}()},
		{"comm.checkpoint(%s)", true, notData("checkpoint", "state")},
		{"comm.bcast(%s, 'x')", true, join(rootsOf(), notInt("bcast", "root"))},
		{"comm.bcast(0, %s)", true, notData("bcast", "data")},
		{"comm.reduce(%s, 'int64', 'sum', '')", true, join(rootsOf(), notInt("reduce", "root"))},
		{"comm.reduce(0, %s, 'sum', '')", true, join([]refusal{unknownType}, notOf("reduce", "type", "string"))},
		{"comm.reduce(0, 'int64', %s, '')", true, join([]refusal{unknownOp}, notOf("reduce", "op", "string"))},
		{"comm.reduce(0, 'bytes', 'bor', %s)", true, join(notData("reduce", "data"), []refusal{{fmt.Sprintf("'x' * %d", over), codes.WrongCollective, "H1618: reduce: data is 16777201 bytes, limit 16777200 per rank per call"}})},
		{"comm.reduce(0, %s)", true, []refusal{
			{"'float64', 'band', ''", codes.WrongCollective, "H1618: reduce: reduction band does not fit type float64"},
			{"'int64', 'sum', 'x' * 7", codes.WrongCollective, "H1618: reduce: 7 bytes are no whole number of int64 elements (8 bytes each)"},
		}},
		{"comm.allreduce(%s, 'sum', '')", true, join([]refusal{unknownType}, notOf("allreduce", "type", "string"))},
		{"comm.allreduce('int64', %s, '')", true, join([]refusal{unknownOp}, notOf("allreduce", "op", "string"))},
		{"comm.allreduce('int64', 'sum', %s)", true, join(notData("allreduce", "data"), []refusal{{"'x' * 7", codes.WrongCollective, "H1618: allreduce: 7 bytes are no whole number of int64 elements (8 bytes each)"}})},
		{"comm.gather(%s, '')", true, join(rootsOf(), notInt("gather", "root"))},
		{"comm.gather(0, %s)", true, join(notData("gather", "data"), []refusal{{fmt.Sprintf("'x' * %d", over), codes.WrongCollective, "H1618: gather: data is 16777201 bytes, limit 16777200 per rank per call"}})},
		{"comm.scatter(%s, '')", true, join(rootsOf(), notInt("scatter", "root"))},
		{"comm.scatter(0, %s)", true, notData("scatter", "data")},
		{"comm.allgather(%s)", true, join(notData("allgather", "data"), []refusal{{fmt.Sprintf("'x' * %d", over), codes.WrongCollective, "H1618: allgather: data is 16777201 bytes, limit 16777200 per rank per call"}})},
		{"comm.alltoall(%s)", true, join(notData("alltoall", "data"), []refusal{
			{"'xx'", codes.WrongCollective, "H1618: alltoall: 2 bytes are no whole number of 3 blocks"},
			{fmt.Sprintf("'x' * %d", over), codes.WrongCollective, "H1618: alltoall: data is 16777201 bytes, limit 16777200 per rank per call"},
		})},
		{"comm.reduce_scatter(%s, 'sum', '')", true, join([]refusal{unknownType}, notOf("reduce_scatter", "type", "string"))},
		{"comm.reduce_scatter('int64', %s, '')", true, join([]refusal{unknownOp}, notOf("reduce_scatter", "op", "string"))},
		{"comm.reduce_scatter('int64', 'sum', %s)", true, join(notData("reduce_scatter", "data"), []refusal{{"'x' * 8", codes.WrongCollective, "H1618: reduce_scatter: 8 bytes are no 3 equal blocks of whole int64 elements"}})},
		{"comm.split(%s, 0)", true, join(func() []refusal {
			var out []refusal
			for _, v := range append([]string{"-2"}, bigInts...) {
				out = append(out, refusal{v, codes.WrongCollective, fmt.Sprintf("H1618: split: color %s, want -1 (none) or 0 … 2147483647", v)})
			}
			return out
		}(), notInt("split", "color"))},
		{"comm.split(0, %s)", true, join(func() []refusal {
			var out []refusal
			for _, v := range append([]string{"-2147483649"}, bigInts...) {
				out = append(out, refusal{v, codes.WrongCollective, fmt.Sprintf("H1618: split: key %s is outside the 32-bit range", v)})
			}
			return out
		}(), notInt("split", "key"))},
		{"comm.agree(%s)", true, join([]refusal{
			{"-1", codes.OutOfRange, "H1616: agree: flag -1, want an int 0 to 18446744073709551615 (its bits are ANDed)"},
			{"18446744073709551616", codes.OutOfRange, "H1616: agree: flag 18446744073709551616, want an int 0 to 18446744073709551615 (its bits are ANDed)"},
		}, notInt("agree", "flag"))},
		{"comm.work_queue('q', ['a'], %s)", true, join(func() []refusal {
			var out []refusal
			for _, v := range []string{"-1", "1", "1048577", "9223372036854775808"} {
				out = append(out, refusal{v, codes.OutOfRange, fmt.Sprintf("H1616: work_queue: %s ranks a master; want 2 to 1048576", v)})
			}
			return out
		}(), notInt("work_queue", "per_master"))},
		{"comm.work_queue('q', %s)", true, []refusal{
			{"'a'", 0, "comm.work_queue: for parameter items: got string, want list"},
			{"[1]", 0, "comm.work_queue: item 0: got int, want bytes or string"},
		}},
	}
	j := newArgsJob(t)
	for _, tt := range tests {
		for _, w := range tt.wrong {
			call := fmt.Sprintf(tt.call, w.arg)
			for r, err := range j.refuse(call, tt.every) {
				if err == nil || codes.Of(err) != w.code || err.Error() != w.msg {
					t.Errorf("rank %d: %s = %v (code %v), want %q (code %v)", r, short(call), err, codes.Of(err), w.msg, w.code)
				}
			}
		}
	}
	// The job went on through every refusal: collectives and messages work.
	errs := j.runEach("the calls after the refusals", func() []string {
		src := `
s = array.unpack("int64", comm.allreduce("int64", "sum", array.pack("int64", [comm.rank])))
if s != [3]:
    fail("allreduce gave %r, want [3]" % s)
a = comm.agree(18446744073709551615)
if a != 18446744073709551615:
    fail("agree gave %d" % a)
if comm.rank == 0:
    comm.send(1, 7, "after")
elif comm.rank == 1:
    m = comm.recv(0, 7)
    if m != b"after":
        fail("recv gave %r" % m)
`
		return []string{src, src, src}
	}())
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d after the refusals: %v", r, err)
		}
	}
}

// short is a call as the test names it, without the megabytes of data a
// call may build.
func short(call string) string {
	if len(call) > 120 {
		return call[:120] + "…"
	}
	return call
}

// TestBigRootOnOneRank: a root of 2**63 on one rank only is H1618 on every
// rank and the job goes on (SPEC §8.3), as a root of 3 is: the rank at
// fault says why, the others name it. Before, it was a program error on
// that rank alone and the others waited in the call.
func TestBigRootOnOneRank(t *testing.T) {
	j := newArgsJob(t)
	good := "comm.bcast(0, 'x')\nfail('returned')\n"
	errs := j.runEach("bcast with a root of 2**63 on rank 1", []string{good, "comm.bcast(9223372036854775808, 'x')\nfail('returned')\n", good})
	want := []string{
		"H1618: call 1 is void: rank 1 called it wrongly",
		"H1618: root 9223372036854775808 is outside the job (size 3)",
		"H1618: call 1 is void: rank 1 called it wrongly",
	}
	for r, err := range errs {
		var ee *starlark.EvalError
		if errors.As(err, &ee) {
			err = ee.Unwrap()
		}
		if codes.Of(err) != codes.WrongCollective || err.Error() != want[r] {
			t.Errorf("rank %d: bcast = %v, want %q", r, err, want[r])
		}
	}
	for r, err := range j.runEach("barrier after the void call", []string{"comm.barrier()\n", "comm.barrier()\n", "comm.barrier()\n"}) {
		if err != nil {
			t.Errorf("rank %d: barrier after the void call = %v, want nil", r, err)
		}
	}
}

// TestFinishedPeerWildcard: a receive or probe with ANY_TAG from a rank
// that has finished is H1617 naming the tag as the call did, ANY_TAG (it
// said 0, or -1), whether it was posted before the rank finished or after.
func TestFinishedPeerWildcard(t *testing.T) {
	for _, tt := range []struct {
		name  string
		rank0 string   // what rank 0 does; rank 1 receives tag 1, then finishes
		want  []string // what rank 0 prints
	}{
		{
			name: "posted before",
			rank0: `
op = comm.start_recv(1, comm.ANY_TAG)
comm.send(1, 1, "go")
r = sperli.attempt(comm.finish_recv, op)
print(r.message)
`,
			want: []string{"H1617: recv: rank 1 has finished: recv(1, ANY_TAG) can never be matched"},
		},
		{
			name: "posted after",
			rank0: `
comm.send(1, 1, "go")
op = comm.start_recv(1, 5)
print(sperli.attempt(comm.finish_recv, op).message)  # rank 1 has finished now
print(sperli.attempt(comm.recv, 1, comm.ANY_TAG).message)
print(sperli.attempt(comm.recv_from, 1, comm.ANY_TAG).message)
print(sperli.attempt(comm.probe, 1, comm.ANY_TAG).message)
print(sperli.attempt(comm.probe, 1, 5).message)
`,
			want: []string{
				"H1617: recv: rank 1 has finished: recv(1, 5) can never be matched",
				"H1617: recv: rank 1 has finished: recv(1, ANY_TAG) can never be matched",
				"H1617: recv: rank 1 has finished: recv(1, ANY_TAG) can never be matched",
				"H1617: probe: rank 1 has finished: probe(1, ANY_TAG) can never be matched",
				"H1617: probe: rank 1 has finished: probe(1, 5) can never be matched",
			},
		},
		{
			// Whether the probe waits when rank 1 finishes or comes after,
			// it says the same.
			name: "probe",
			rank0: `
comm.send(1, 1, "go")
print(sperli.attempt(comm.probe, 1, comm.ANY_TAG).message)
`,
			want: []string{"H1617: probe: rank 1 has finished: probe(1, ANY_TAG) can never be matched"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			comms := startJob(t, ctx, 2)
			dir := t.TempDir()
			writeFile(t, dir+"/r0.star", tt.rank0)
			writeFile(t, dir+"/r1.star", "comm.recv(0, 1)\ncomm.finish()\n")
			var outs [2]bytes.Buffer
			var errs [2]error
			var wg sync.WaitGroup
			for r := range comms {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[r] = starlib.Run(&starlib.Program{File: fmt.Sprintf("%s/r%d.star", dir, r), Comm: comms[r], Context: ctx, Stdout: &outs[r]})
				}()
			}
			wg.Wait()
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
			if got, want := outs[0].String(), strings.Join(tt.want, "\n")+"\n"; got != want {
				t.Errorf("rank 0 printed\n%s\nwant\n%s", got, want)
			}
		})
	}
}
