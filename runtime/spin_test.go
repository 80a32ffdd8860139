package runtime_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"sperli/codes"
	"sperli/hosts"
	"sperli/runtime"
)

// TestSpinLimit: SPERLI_SPIN_US is whole microseconds 0 … 1,000,000 (else
// H1616 naming it); unset, a rank spins defaultSpin unless its host runs
// more ranks of the job than it has processors.
func TestSpinLimit(t *testing.T) {
	hostsOf := func(local, remote int) []runtime.Host {
		var hs []runtime.Host
		for i := 0; i < local; i++ {
			hs = append(hs, runtime.Host{Host: "127.0.0.1", Port: 40000 + i})
		}
		for i := 0; i < remote; i++ {
			hs = append(hs, runtime.Host{Host: fmt.Sprintf("node%d", i), Port: 40000})
		}
		return hs
	}
	ncpu := hosts.CPUs()
	for _, tc := range []struct {
		env           string
		local, remote int
		want          time.Duration
	}{
		{"", 1, 0, runtime.DefaultSpinForTest},
		{"", ncpu, 5, runtime.DefaultSpinForTest},
		{"", ncpu + 1, 0, 0},
		{"0", 1, 0, 0},
		{"250", ncpu + 1, 0, 250 * time.Microsecond},
		{"1000000", 1, 0, time.Second},
	} {
		t.Setenv("SPERLI_SPIN_US", tc.env)
		j := &runtime.Job{Rank: 0, Hosts: hostsOf(tc.local, tc.remote)}
		got, err := runtime.SpinLimitForTest(j)
		if err != nil || got != tc.want {
			t.Errorf("SPERLI_SPIN_US=%q, %d local + %d remote ranks: spin %v, %v; want %v", tc.env, tc.local, tc.remote, got, err, tc.want)
		}
	}
	for _, bad := range []string{"x", "-1", "1000001", "1.5", " 10", "10us"} {
		t.Setenv("SPERLI_SPIN_US", bad)
		_, err := runtime.SpinLimitForTest(&runtime.Job{Hosts: hostsOf(1, 0)})
		wantCode(t, "SPERLI_SPIN_US="+bad, err, codes.OutOfRange)
		if !strings.Contains(err.Error(), "SPERLI_SPIN_US") {
			t.Errorf("error %q does not name SPERLI_SPIN_US", err)
		}
	}
}

// TestInitRefusesBadSpin: a rank with a malformed SPERLI_SPIN_US does not
// join (H1616), and says why.
func TestInitRefusesBadSpin(t *testing.T) {
	f := newFixture(t, 2)
	t.Setenv("SPERLI_SPIN_US", "fast")
	_, err := runtime.Init(testCtx(t), f.job(0))
	wantCode(t, "Init with SPERLI_SPIN_US=fast", err, codes.OutOfRange)
}

// TestBothWaits runs the same job with reads that spin outside Go's
// poller and with reads that block in it: messages of both sizes, a wait
// cancelled and resumed, a collective right after point-to-point reads
// (whose frames the reader goroutines must read at once), and Finish.
func TestBothWaits(t *testing.T) {
	for _, spin := range []string{"0", "1000"} {
		for _, n := range []int{2, 3} {
			t.Run(fmt.Sprintf("spin %s us, %d ranks", spin, n), func(t *testing.T) {
				t.Setenv("SPERLI_SPIN_US", spin)
				ctx := testCtx(t)
				comms := newFixtureTCP(t, n).initAll(ctx)
				want := time.Duration(-1)
				if spin != "0" {
					want = time.Millisecond
				}
				if got := runtime.PeerSpinForTest(comms[0], 1); got != want {
					t.Fatalf("spin of rank 0's connection to rank 1 = %v, want %v (-1: Go's poller)", got, want)
				}
				big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
				errs := each(comms, func(c *runtime.Comm) error {
					r, next, prev := c.Rank(), (c.Rank()+1)%n, (c.Rank()+n-1)%n
					for i := 0; i < 50; i++ {
						msg := []byte(fmt.Sprintf("%d:%d", r, i))
						if i%10 == 9 {
							msg = append(big[:len(big):len(big)], msg...)
						}
						if err := c.Send(ctx, next, 7, msg); err != nil {
							return err
						}
						got, err := c.Recv(ctx, prev, 7)
						if err != nil {
							return err
						}
						if !bytes.HasSuffix(got, []byte(fmt.Sprintf("%d:%d", prev, i))) || (i%10 == 9 && !bytes.HasPrefix(got, big)) {
							return fmt.Errorf("message %d from rank %d is wrong (%d bytes)", i, prev, len(got))
						}
					}
					op, err := c.StartRecv(prev, 8)
					if err != nil {
						return err
					}
					short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
					_, err = c.FinishRecv(short, op)
					cancel()
					if err != context.DeadlineExceeded {
						return fmt.Errorf("FinishRecv with nothing sent = %v, want deadline exceeded", err)
					}
					if err := c.Barrier(ctx); err != nil { // every rank's wait was cancelled
						return err
					}
					if err := c.Send(ctx, next, 8, []byte("late")); err != nil {
						return err
					}
					if got, err := c.FinishRecv(ctx, op); err != nil || string(got) != "late" {
						return fmt.Errorf("FinishRecv again = %q, %v; want late", got, err)
					}
					sum, err := c.Allreduce(ctx, runtime.Int64, runtime.Sum, i64s(int64(r+1)))
					if err != nil {
						return err
					}
					if !bytes.Equal(sum, i64s(int64(n*(n+1)/2))) {
						return fmt.Errorf("allreduce = %x", sum)
					}
					return c.Finish()
				})
				for r, err := range errs {
					if err != nil {
						t.Errorf("rank %d: %v", r, err)
					}
				}
			})
		}
	}
}

// TestOversubscribedRemoteNote: on a host that is not the launcher's, the
// first rank there says once that the host runs more ranks than it has
// processors; the others, and the launcher's own machine, say nothing.
func TestOversubscribedRemoteNote(t *testing.T) {
	t.Setenv("SPERLI_SPIN_US", "")
	n := hosts.CPUs() + 1
	for _, tc := range []struct {
		host string
		rank int
		want bool
	}{{"node-a", 0, true}, {"node-a", 1, false}, {"127.0.0.1", 0, false}} {
		var lines []string
		j := &runtime.Job{Rank: tc.rank, Size: n, Launched: true, Logf: func(f string, a ...any) { lines = append(lines, fmt.Sprintf(f, a...)) }}
		for i := 0; i < n; i++ {
			j.Hosts = append(j.Hosts, runtime.Host{Host: tc.host, Port: 1000 + i})
		}
		spin, err := runtime.SpinLimitForTest(j)
		if err != nil || spin != 0 {
			t.Fatalf("%s rank %d: spin = %v, %v; want 0 (oversubscribed)", tc.host, tc.rank, spin, err)
		}
		if got := len(lines) == 1 && strings.Contains(lines[0], fmt.Sprintf("note: %d ranks on host %s", n, tc.host)); got != tc.want {
			t.Errorf("%s rank %d: lines %q, want a note: %v", tc.host, tc.rank, lines, tc.want)
		}
	}
}
