package clib

// The C contract of SPEC §12 where it needs more than one process: a
// thread cancelled while it waits in a call (issue 16, item 4), a
// SPERLI_SPIN_US outside its range under the launcher (item 1), and the
// calls of issue 13 between C and Go ranks. The other
// items of issue 16 are checked by test_sperli.c and test_ranks.c
// (TestCheckLibsperli, TestCheckRanks) and by the fuzzer (fuzz_test.go).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sperli/runtime"
)

// lineRank is a C rank whose standard output is read line by line as it
// comes.
type lineRank struct {
	cmd    *exec.Cmd
	lines  chan string
	out    bytes.Buffer // every line, once the process has ended
	stderr bytes.Buffer
	done   chan struct{}
	err    error
}

// startLines starts cpeer with args, description d on its standard input,
// listening on ln (its fd 3), with extra environment variables.
func startLines(t *testing.T, ctx context.Context, d *runtime.Job, ln *net.TCPListener, extra []string, args ...string) *lineRank {
	t.Helper()
	f, err := ln.File()
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	defer f.Close()
	d.ListenFD = 3
	r := &lineRank{lines: make(chan string, 16), done: make(chan struct{})}
	r.cmd = exec.CommandContext(ctx, filepath.Join(bin, "cpeer"), args...)
	r.cmd.Dir = root
	r.cmd.Env = append(append([]string(nil), env...), extra...)
	r.cmd.WaitDelay = 5 * time.Second
	r.cmd.ExtraFiles = []*os.File{f}
	r.cmd.Stdin = bytes.NewReader(append(d.Encode(), '\n'))
	r.cmd.Stderr = &r.stderr
	stdout, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.cmd.Process.Kill() })
	go func() {
		sc := bufio.NewScanner(stdout)
		var all []string
		for sc.Scan() {
			all = append(all, sc.Text())
			select {
			case r.lines <- sc.Text():
			default:
			}
		}
		io.Copy(io.Discard, stdout)
		r.err = r.cmd.Wait()
		r.out.WriteString(strings.Join(all, "\n"))
		close(r.done)
	}()
	return r
}

// waitLine waits for the line want; false when the process ended first or
// jobTimeout passed.
func (r *lineRank) waitLine(want string) bool {
	deadline := time.After(jobTimeout)
	for {
		select {
		case l := <-r.lines:
			if l == want {
				return true
			}
		case <-r.done:
			for {
				select {
				case l := <-r.lines:
					if l == want {
						return true
					}
				default:
					return false
				}
			}
		case <-deadline:
			return false
		}
	}
}

func (r *lineRank) end(t *testing.T) int {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(jobTimeout):
		t.Fatalf("the C rank did not end within %v", jobTimeout)
	}
	return exitCode(t, r.err)
}

// TestCancelInWait: a thread of a C rank waits in sperli_recv and is
// cancelled (pthread_cancel) before the message comes, in each place the
// wait can run: on the library's worker with the C thread asleep in wait.c
// (SPERLI_WORKER=1, SPERLI_SPIN_US=0), spinning first there, and on the
// calling thread. The call runs to its end and gets the message, the
// cancellation takes effect after it, and the library is free afterwards:
// the main thread copies the message out and sends it back.
func TestCancelInWait(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  []string
	}{
		{"worker, sleeping", []string{"SPERLI_WORKER=1", "SPERLI_SPIN_US=0"}},
		{"worker, spinning", []string{"SPERLI_WORKER=1", "SPERLI_SPIN_US=200000"}},
		{"calling thread", []string{"SPERLI_WORKER=0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t)
			j := newJob(t)
			c := startLines(t, ctx, j.describe(1), j.lns[1], tc.env, "cancel")
			g, err := runtime.Init(ctx, j.goRank(0, false))
			if err != nil {
				t.Fatalf("Init(rank 0) = %v", err)
			}
			defer g.Close()
			if !c.waitLine("cancelled") {
				c.end(t)
				t.Fatalf("the C rank never said it cancelled its thread\nstdout:\n%s\nstderr:\n%s", &c.out, &c.stderr)
			}
			// Only now the message the cancelled thread waits for.
			if err := g.Send(ctx, 1, 5, []byte("ping")); err != nil {
				t.Fatalf("Send = %v", err)
			}
			got, err := g.Recv(ctx, 1, 6)
			if err != nil || string(got) != "ping" {
				t.Fatalf("Recv = %q, %v; want ping back\nstderr:\n%s", got, err, &c.stderr)
			}
			if err := g.Finish(); err != nil {
				t.Errorf("Finish = %v", err)
			}
			if st := c.end(t); st != 0 || !strings.Contains(c.out.String(), "cancel=ok") {
				t.Errorf("C rank: exit status %d, stdout %q; want 0 and cancel=ok\nstderr:\n%s", st, &c.out, &c.stderr)
			}
		})
	}
}

// TestSpinUSOutOfRange: a SPERLI_SPIN_US outside its range is a usage
// error of the launcher, found before any C rank starts (exit 2, one line
// naming it; SPEC §2). A C rank started by hand with it gets 1616 from
// sperli_init_stdin instead of an abort: check-libsperli.sh runs
// test_sperli's spin case for that (TestCheckLibsperli).
func TestSpinUSOutOfRange(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"abc", "-5", "2000000"} {
		ctx, cancel := context.WithTimeout(context.Background(), jobTimeout)
		cmd, stdout, stderr := command(t, ctx, sperli, "run", "-n", "2", filepath.Join(bin, "cpeer"), "echo")
		cmd.Env = append(cmd.Env, "SPERLI_SPIN_US="+v)
		code := exitCode(t, cmd.Run())
		cancel()
		out, errs := stdout.String(), stderr.String()
		if code != 2 || out != "" || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, fmt.Sprintf("SPERLI_SPIN_US=%q", v)) {
			t.Errorf("SPERLI_SPIN_US=%s: exit status %d, want 2 and one line naming it, no rank started\nstdout:\n%s\nstderr:\n%s", v, code, out, errs)
		}
	}
}

// TestMixedCalls13: the calls of issue 13 between C ranks and a Go rank in
// one job of three — allgather, alltoall, reduce_scatter, a sendrecv ring
// from any source, split by parity with the key reversing the order and
// point-to-point on the new communicators, probe then receive — with the Go
// rank at rank 0 (it probes a C rank's message) and at rank 1 (a C rank
// probes its message). Both sides check every result against the same
// formulas (cpeer.c's calls13 has the C side).
func TestMixedCalls13(t *testing.T) {
	t.Parallel()
	for _, g := range []int{0, 1} {
		t.Run(fmt.Sprintf("go-rank-%d", g), func(t *testing.T) {
			ctx := testCtx(t)
			j := newJobN(t, 3)
			var cs []*lineRank
			for r := 0; r < 3; r++ {
				if r != g {
					cs = append(cs, startLines(t, ctx, j.describe(r), j.lns[r], nil, "calls13"))
				}
			}
			c, err := runtime.Init(ctx, j.goRank(g, false))
			if err != nil {
				t.Fatalf("Init(rank %d) = %v", g, err)
			}
			defer c.Close()
			if err := goCalls13(ctx, c); err != nil {
				t.Errorf("Go rank %d: %v", g, err)
			}
			if err := c.Finish(); err != nil {
				t.Errorf("Finish = %v", err)
			}
			for _, cr := range cs {
				if st := cr.end(t); st != 0 || !strings.Contains(cr.out.String(), "calls13=ok") {
					t.Errorf("C rank: exit status %d, stdout %q; want 0 and calls13=ok\nstderr:\n%s", st, &cr.out, &cr.stderr)
				}
			}
		})
	}
}

// goCalls13 is the Go side of cpeer's calls13, in the same order.
func goCalls13(ctx context.Context, c *runtime.Comm) error {
	rank, size := c.Rank(), c.Size()
	all, err := c.Allgather(ctx, []byte{byte(rank), byte(rank + 10)})
	if err != nil {
		return err
	}
	for r := 0; r < size; r++ {
		if all[2*r] != byte(r) || all[2*r+1] != byte(r+10) {
			return fmt.Errorf("allgather = %v", all)
		}
	}
	blocks := make([]byte, size)
	for j := range blocks {
		blocks[j] = byte(16*rank + j)
	}
	got, err := c.Alltoall(ctx, blocks)
	if err != nil {
		return err
	}
	for i := range got {
		if got[i] != byte(16*i+rank) {
			return fmt.Errorf("alltoall = %v", got)
		}
	}
	v := make([]byte, 8*size)
	for j := 0; j < size; j++ {
		binary.LittleEndian.PutUint64(v[8*j:], uint64(100*rank+j))
	}
	rs, err := c.ReduceScatter(ctx, runtime.Int64, runtime.Sum, v)
	if err != nil {
		return err
	}
	if want := 100*size*(size-1)/2 + size*rank; len(rs) != 8 || int(binary.LittleEndian.Uint64(rs)) != want {
		return fmt.Errorf("reduce_scatter = %v, want %d", rs, want)
	}
	left := (rank + size - 1) % size
	msg, env, err := c.Sendrecv(ctx, (rank+1)%size, 5, []byte(fmt.Sprintf("from %d", rank)), runtime.AnySource, 5)
	if err != nil || string(msg) != fmt.Sprintf("from %d", left) || env.Source != left || env.Tag != 5 {
		return fmt.Errorf("sendrecv = %q, %+v, %v; want from %d", msg, env, err, left)
	}
	sub, err := c.Split(ctx, rank%2, -rank)
	if err != nil {
		return err
	}
	if sub.Size() != (size-rank%2+1)/2 || sub.Rank() != (size-1-rank)/2 {
		return fmt.Errorf("split: rank %d of %d", sub.Rank(), sub.Size())
	}
	want := 0
	for r := rank % 2; r < size; r += 2 {
		want += r
	}
	me := make([]byte, 8)
	binary.LittleEndian.PutUint64(me, uint64(rank))
	sum, err := sub.Allreduce(ctx, runtime.Int64, runtime.Sum, me)
	if err != nil || int(binary.LittleEndian.Uint64(sum)) != want {
		return fmt.Errorf("sub allreduce = %v, %v; want %d", sum, err, want)
	}
	if sub.Size() > 1 && sub.Rank() == 0 {
		if err := sub.Send(ctx, sub.Size()-1, 6, []byte("sub")); err != nil {
			return err
		}
	}
	if sub.Size() > 1 && sub.Rank() == sub.Size()-1 {
		if _, env, err := sub.RecvFrom(ctx, runtime.AnySource, runtime.AnyTag); err != nil || env != (runtime.Envelope{Source: 0, Tag: 6, Length: 3}) {
			return fmt.Errorf("sub recv_from = %+v, %v", env, err)
		}
	}
	if err := sub.Finish(); err != nil {
		return err
	}
	if rank == 1 {
		if err := c.Send(ctx, 0, 9, []byte("probe-me")); err != nil {
			return err
		}
	}
	if rank == 0 {
		env, err := c.Probe(ctx, runtime.AnySource, runtime.AnyTag)
		if err != nil || env != (runtime.Envelope{Source: 1, Tag: 9, Length: 8}) {
			return fmt.Errorf("probe = %+v, %v", env, err)
		}
		if got, err := c.Recv(ctx, env.Source, env.Tag); err != nil || string(got) != "probe-me" {
			return fmt.Errorf("recv after probe = %q, %v", got, err)
		}
	}
	return c.Barrier(ctx)
}
