package runtime_test

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	goruntime "runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"sperli/codes"
	"sperli/pki"
	"sperli/runtime"
)

// TestCancelledRecvWithdraws: a Recv whose ctx ends withdraws its posted
// receive, so the next message goes to the next receive instead of being
// swallowed (it was, and Exit later failed with H1617). FinishRecv keeps
// its operation open instead (TestBothWaits finishes one again).
func TestCancelledRecvWithdraws(t *testing.T) {
	ctx := testCtx(t)
	comms := newFixture(t, 2).initAll(ctx)
	a, b := comms[0], comms[1]

	gone, cancel := context.WithCancel(ctx)
	cancel()
	for i := 0; i < 2; i++ {
		if _, err := b.Recv(gone, 0, 5); !errors.Is(err, context.Canceled) {
			t.Fatalf("Recv with a cancelled ctx = %v, want context.Canceled", err)
		}
	}
	for _, m := range []string{"one", "two"} {
		if err := a.Send(ctx, 1, 5, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"one", "two"} {
		got, err := b.Recv(ctx, 0, 5)
		if err != nil || string(got) != want {
			t.Fatalf("Recv after cancelled receives = %q, %v; want %q", got, err, want)
		}
	}
	// Together: a rank that finished waits for the other's bye.
	errs := each(comms, func(c *runtime.Comm) error { return c.Finish() })
	if errs[0] != nil {
		t.Fatalf("Finish(rank 0) = %v", errs[0])
	}
	if errs[1] != nil {
		t.Fatalf("Finish(rank 1) = %v (a withdrawn receive must not stay open)", errs[1])
	}
}

// reasonPayload lays out a reason (protocol.md §3.2): code u16, cause u8,
// rank i32, message.
func reasonPayload(code uint16, cause byte, rank int32, msg string) []byte {
	b := []byte{byte(code >> 8), byte(code), cause}
	b = binary.BigEndian.AppendUint32(b, uint32(rank))
	return append(b, msg...)
}

// TestRelayedAbortNamesItsOrigin: an abort passed on by rank 1 on behalf
// of rank 2 ends rank 0 with "job ended by rank 2", not by the relay.
func TestRelayedAbortNamesItsOrigin(t *testing.T) {
	ctx := testCtx(t)
	comms := newFixture(t, 3).initAll(ctx)
	newHostile(t, comms[1]).write(0, rawFrame{Type: tAbort, Payload: reasonPayload(1612, 3, 2, "aborted")})
	_, err := comms[0].Recv(ctx, 2, 1)
	wantCode(t, "Recv after the relayed abort", err, codes.JobEnded)
	if want := "H1612: job ended by rank 2: it called abort"; err.Error() != want {
		t.Fatalf("error = %q, want %q", err, want)
	}
}

// TestAbortAboutNoRank: an abort whose rank is outside the job is a
// protocol violation (H1627) at the rank that reads it.
func TestAbortAboutNoRank(t *testing.T) {
	ctx := testCtx(t)
	comms := newFixture(t, 3).initAll(ctx)
	newHostile(t, comms[1]).write(0, rawFrame{Type: tAbort, Payload: reasonPayload(1612, 3, 9, "aborted")})
	_, err := comms[0].Recv(ctx, 2, 1)
	wantCode(t, "Recv after an abort about rank 9", err, codes.ProtocolViolation)
	if !strings.Contains(err.Error(), "rank 1") {
		t.Fatalf("error %q does not name rank 1, the liar", err)
	}
}

// TestRefusedFrameToldToSender: a rank that ends a connection over a bad
// frame tells the sender why before it closes, so the sender ends with
// H1612 naming the code, never a false loss (H1611, exit 75, a restart).
func TestRefusedFrameToldToSender(t *testing.T) {
	ctx := testCtx(t)
	comms := newFixture(t, 2).initAll(ctx)
	// A silence limit of 0 ms is outside 100 … 86,400,000 (protocol.md §3.4).
	newHostile(t, comms[1]).write(0, rawFrame{Type: tSilence, Payload: []byte{0, 0, 0, 0}})
	_, err := comms[0].Recv(ctx, 1, 1)
	wantCode(t, "rank 0 after the bad frame", err, codes.FrameMalformed)
	_, err = comms[1].Recv(ctx, 0, 1)
	wantCode(t, "the sender of the bad frame", err, codes.JobEnded)
	ce := codes.As(err)
	if ce.Cause == nil || ce.Cause.Kind != codes.CauseFailed || ce.Cause.Code != codes.FrameMalformed || ce.Cause.Rank != 0 {
		t.Fatalf("sender's cause = %+v, want rank 0 failed with H1609", ce.Cause)
	}
	if st := runtime.ExitStatus(err); st != 1 {
		t.Fatalf("sender's exit status = %d, want 1 (not a loss)", st)
	}
}

// TestVoidThenFailIsH1618Everywhere: rank 1 passes 7 bytes of int64 to an
// allreduce and does not catch its H1618 (its program ends with it). Every
// other rank still returns H1618 from that call — whether it was waiting
// in the call or came to it after rank 1's abort — never H1612.
func TestVoidThenFailIsH1618Everywhere(t *testing.T) {
	for _, late := range []bool{false, true} {
		name := "waiting"
		if late {
			name = "late"
		}
		t.Run(name, func(t *testing.T) {
			ctx := testCtx(t)
			comms := newFixture(t, 3).initAll(ctx)
			wrong := func(c *runtime.Comm) error {
				_, err := c.Allreduce(ctx, runtime.Int64, runtime.Sum, make([]byte, 7))
				c.Fail(err)
				return err
			}
			right := func(c *runtime.Comm) error {
				_, err := c.Allreduce(ctx, runtime.Int64, runtime.Sum, make([]byte, 8))
				return err
			}
			var errs []error
			if late {
				wantCode(t, "rank 1", wrong(comms[1]), codes.WrongCollective)
				for _, r := range []int{0, 2} {
					for i := 0; i < 6000 && comms[r].Heartbeat() == nil; i++ {
						time.Sleep(5 * time.Millisecond) // until rank 1's abort is here
					}
				}
				errs = []error{right(comms[0]), nil, right(comms[2])}
			} else {
				errs = each(comms, func(c *runtime.Comm) error {
					if c.Rank() == 1 {
						return wrong(c)
					}
					return right(c)
				})
			}
			for r, err := range errs {
				if r != 1 {
					wantCode(t, fmt.Sprintf("rank %d's allreduce", r), err, codes.WrongCollective)
				}
			}
		})
	}
}

// wantViolation waits for rank c's end and checks it is H1627 naming rank
// liar, and that the liar was told the code (H1612, cause failed, H1627).
func wantViolation(t *testing.T, ctx context.Context, c, liar *runtime.Comm) {
	t.Helper()
	wantViolationBy(t, ctx, c, liar, fmt.Sprintf("rank %d", liar.Rank()))
}

// wantViolationBy is wantViolation for an error that names the liar as
// who ("rank 1", or "slot 1" for the agreement, which is among slots).
func wantViolationBy(t *testing.T, ctx context.Context, c, liar *runtime.Comm, who string) {
	t.Helper()
	_, err := c.Recv(ctx, liar.Rank(), 99)
	wantCode(t, fmt.Sprintf("rank %d after rank %d's frames", c.Rank(), liar.Rank()), err, codes.ProtocolViolation)
	if !strings.Contains(err.Error(), "protocol violation by "+who) {
		t.Fatalf("error %q does not name %s", err, who)
	}
	_, err = liar.Recv(ctx, c.Rank(), 99)
	wantCode(t, "the liar", err, codes.JobEnded)
	if ce := codes.As(err); ce.Cause == nil || ce.Cause.Code != codes.ProtocolViolation {
		t.Fatalf("the liar's cause = %+v, want H1627", ce.Cause)
	}
}

// TestWindowEnforced: a joined peer that sends past its credit — 16 MiB
// frames or empty ones — is cut off with H1627 at the first frame past the
// window, before that frame's payload is allocated.
func TestWindowEnforced(t *testing.T) {
	t.Run("16 MiB frames", func(t *testing.T) {
		ctx := testCtx(t)
		comms := newFixture(t, 2).initAll(ctx)
		h := newHostile(t, comms[1])
		big := rawFrame{Type: tData, Tag: 1, Payload: make([]byte, 16<<20)}
		for i := 0; i < 4; i++ { // 4 × (16 MiB + 256) is past 64 MiB
			h.write(0, big)
		}
		wantViolation(t, ctx, comms[0], comms[1])
	})
	t.Run("empty frames", func(t *testing.T) {
		ctx := testCtx(t)
		comms := newFixture(t, 2).initAll(ctx)
		h := newHostile(t, comms[1])
		// 64 MiB / 256 bytes a frame: the 262,145th is past the window.
		batch := make([]rawFrame, 4096)
		for i := range batch {
			batch[i] = rawFrame{Type: tData, Tag: 1}
		}
		for i := 0; i < 65; i++ {
			h.write(0, batch...)
		}
		wantViolation(t, ctx, comms[0], comms[1])
	})
	t.Run("credit not used", func(t *testing.T) {
		ctx := testCtx(t)
		comms := newFixture(t, 2).initAll(ctx)
		credit := binary.BigEndian.AppendUint64(nil, 1<<63)
		newHostile(t, comms[1]).write(0, rawFrame{Type: tCredit, Payload: credit})
		wantViolation(t, ctx, comms[0], comms[1])
	})
}

// TestWindowHoldsWithinItsMemory: an honest peer may fill the window with
// empty messages the receiver never takes; what they really cost in
// memory stays within the window's 64 MiB (it took 191 MB when an empty
// frame counted 64 bytes).
func TestWindowHoldsWithinItsMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 262,144 messages")
	}
	ctx := testCtx(t)
	comms := newFixture(t, 2).initAll(ctx)
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	// As many as the window takes by the runtime's own count, less one
	// sent on another tag.
	n := int(runtime.Window/runtime.FrameCostForTest(0)) - 1
	for i := 0; i < n; i++ {
		if err := comms[1].Send(ctx, 0, 1, nil); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	// One source's frames are read in order: once the last is received,
	// every empty message before it is held by rank 0.
	if err := comms[1].Send(ctx, 0, 2, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := comms[0].Recv(ctx, 1, 2); err != nil {
		t.Fatal(err)
	}
	goruntime.GC()
	goruntime.ReadMemStats(&after)
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > runtime.Window {
		t.Fatalf("%d empty messages held take %d bytes of heap, more than the %d bytes of window they count against", n, grew, runtime.Window)
	}
}

// holdingListener hands out its first connection at once and holds the
// second until release is closed: a peer that joins one rank promptly and
// another late.
type holdingListener struct {
	net.Listener
	first   chan struct{} // closed when the first connection is accepted
	release chan struct{}
	n       int
}

func (l *holdingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.n++
	switch l.n {
	case 1:
		close(l.first)
	case 2:
		select {
		case <-l.release:
		case <-time.After(time.Minute):
		}
	}
	return c, nil
}

// TestSlowJoinIsNoLoss: rank 0 has joined everyone while rank 1 still
// waits for rank 2 (its hello is late, well inside the join window). Rank
// 1 heartbeats rank 0 from the moment their connection is joined, so rank
// 0 does not declare it lost (it did, after the silence limit: H1611).
func TestSlowJoinIsNoLoss(t *testing.T) {
	ctx := testCtx(t)
	f := newFixtureTCP(t, 3)
	f.spec.SilenceMS = 1000
	hold := &holdingListener{Listener: f.lns[2], first: make(chan struct{}), release: make(chan struct{})}
	jobs := []*runtime.Job{f.job(0), f.job(1), f.job(2)}
	jobs[2].Listener = hold
	type res struct {
		c   *runtime.Comm
		err error
	}
	out := make([]chan res, 3)
	start := func(r int) {
		out[r] = make(chan res, 1)
		go func() {
			c, err := runtime.Init(ctx, jobs[r])
			out[r] <- res{c, err}
		}()
	}
	start(0)
	start(2)
	select {
	case <-hold.first: // rank 0's connection to rank 2
	case r0 := <-out[0]:
		t.Fatalf("Init(rank 0) = %v before it reached rank 2", r0.err)
	}
	start(1) // joins rank 0 at once, rank 2 only when released
	r0 := <-out[0]
	if r0.err != nil {
		t.Fatalf("Init(rank 0) = %v", r0.err)
	}
	defer r0.c.Close()
	// Rank 1's join stays open for five silence limits of rank 0's.
	time.Sleep(5 * time.Second)
	close(hold.release)
	comms := []*runtime.Comm{r0.c, nil, nil}
	for r := 1; r < 3; r++ {
		got := <-out[r]
		if got.err != nil {
			t.Fatalf("Init(rank %d) = %v", r, got.err)
		}
		defer got.c.Close()
		comms[r] = got.c
	}
	for r, err := range each(comms, func(c *runtime.Comm) error { return c.Barrier(ctx) }) {
		if err != nil {
			t.Errorf("rank %d: barrier after the slow join = %v", r, err)
		}
	}
}

// TestNoCommonGroup: a peer whose TLS offers no X25519MLKEM768 is told
// and reported as a key-exchange failure (H1601 saying so), on both sides,
// never as a refused certificate; the right peer still joins.
func TestNoCommonGroup(t *testing.T) {
	t.Run("dialer without the group", func(t *testing.T) {
		ctx := testCtx(t)
		f := newFixtureTCP(t, 2)
		listener := startInit(ctx, f.job(1))
		j := f.job(0)
		pool, _, err := pki.Pool(j.CA)
		if err != nil {
			t.Fatal(err)
		}
		cfg := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool, ServerName: "127.0.0.1",
			CurvePreferences: []tls.CurveID{tls.X25519},
			Certificates:     []tls.Certificate{rankCert(j)}}
		if conn, err := tls.Dial("tcp", f.lns[1].Addr().String(), cfg); err == nil {
			conn.Close()
			t.Fatal("a handshake without the hybrid group succeeded")
		}
		if !f.logs.waitFor("rank 1: refused rank -1: H1601", "no key exchange group in common") {
			t.Errorf("rank 1 did not log the key exchange failure; log:\n%s", f.logs)
		}
		joinRight(t, ctx, f, listener)
	})
	t.Run("listener without the group", func(t *testing.T) {
		ctx := testCtx(t)
		f := newFixtureTCP(t, 2)
		f.spec.JoinMS = 1500
		j := f.job(1)
		serveTLS(tls.NewListener(f.lns[1], &tls.Config{MinVersion: tls.VersionTLS13, CurvePreferences: []tls.CurveID{tls.X25519},
			Certificates: []tls.Certificate{rankCert(j)}}))
		c, err := runtime.Init(ctx, f.job(0))
		if err == nil {
			c.Close()
			t.Fatal("Init against a listener without the hybrid group succeeded")
		}
		wantCode(t, "Init(rank 0)", err, codes.CertRefused)
		if !strings.Contains(err.Error(), "no key exchange group in common") {
			t.Fatalf("error %q does not say the key exchange failed", err)
		}
	})
}

// flakyListener fails its first accepts as a process out of descriptors
// does (EMFILE).
type flakyListener struct {
	net.Listener
	fails int
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.fails > 0 {
		l.fails--
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestAcceptSurvivesEMFILE: a listener out of descriptors goes on
// accepting once it has some again; the join ended at the first EMFILE.
func TestAcceptSurvivesEMFILE(t *testing.T) {
	ctx := testCtx(t)
	f := newFixtureTCP(t, 2)
	j := f.job(1)
	j.Listener = &flakyListener{Listener: f.lns[1], fails: 5}
	listener := startInit(ctx, j)
	joinRight(t, ctx, f, listener)
	if !f.logs.has("too many open files") {
		t.Errorf("rank 1 did not log the failed accepts; log:\n%s", f.logs)
	}
}

// TestRefusalLogRateLimited: a flood of clients without certificates
// within one second of the job's clock gives one log line
// (TestLogLimit: the next line counts those not logged).
func TestRefusalLogRateLimited(t *testing.T) {
	ctx := testCtx(t)
	f := newFixtureTCP(t, 2)
	now := time.Now()
	j := f.job(1)
	j.Now = func() time.Time { return now }
	listener := startInit(ctx, j)
	flood := func(n int) {
		for i := 0; i < n; i++ {
			conn, err := rawClient(t, f, false)
			if err == nil {
				conn.Read(make([]byte, 1)) // TLS 1.3: the refusal comes on the first read
				conn.Close()
			}
		}
	}
	count := func() int {
		f.logs.mu.Lock()
		defer f.logs.mu.Unlock()
		n := 0
		for _, l := range f.logs.lines {
			if strings.Contains(l, "H1601") {
				n++
			}
		}
		return n
	}
	flood(30)
	if !f.logs.waitFor("H1601") {
		t.Fatalf("no refusal logged; log:\n%s", f.logs)
	}
	if n := count(); n != 1 {
		t.Fatalf("30 refusals in one second gave %d log lines, want 1; log:\n%s", n, f.logs)
	}
	joinRight(t, ctx, f, listener)
}

// TestVoidFloodBounded: voids for calls far in the future are kept for
// their call, each holding its credit, so a peer that floods them is cut
// off at the window (H1627) instead of growing a map without bound.
func TestVoidFloodBounded(t *testing.T) {
	ctx := testCtx(t)
	comms := newFixture(t, 2).initAll(ctx)
	h := newHostile(t, comms[1])
	desc := []byte{4, 3, 1, 0, 0, 0, 0, 0, 0, 0, 0, 7} // allreduce(int64, sum), 7 bytes
	batch := make([]rawFrame, 4096)
	seq := uint64(1000)
	for i := 0; i < 65; i++ { // 266,240 voids of 268 bytes of credit each: past 64 MiB
		for j := range batch {
			seq++
			batch[j] = rawFrame{Type: tCollective, Flags: fVoid, Seq: seq, Payload: desc}
		}
		h.write(0, batch...)
	}
	wantViolation(t, ctx, comms[0], comms[1])
}

// TestRefusedFrameToldToAll: a frame its reader refuses (one that says it
// is from another rank) ends the job with its code on every rank — the
// sender too, which learns the code rather than seeing its connection
// close (it took that for a loss, H1611, and a launcher would restart).
func TestRefusedFrameToldToAll(t *testing.T) {
	ctx := testCtx(t)
	comms := newFixture(t, 3).initAll(ctx)
	newHostile(t, comms[1]).write(0, rawFrame{Type: tData, Tag: 99, Source: 7, Payload: []byte("x")})
	_, err := comms[0].Recv(ctx, 1, 99)
	wantCode(t, "rank 0", err, codes.FrameMalformed)
	for _, r := range []int{1, 2} {
		_, err := comms[r].Recv(ctx, 0, 99)
		wantCode(t, fmt.Sprintf("rank %d", r), err, codes.JobEnded)
		if ce := codes.As(err); ce.Cause == nil || ce.Cause.Code != codes.FrameMalformed {
			t.Fatalf("rank %d: cause %+v, want H1609", r, ce.Cause)
		}
	}
}

// serveTLS accepts on ln until it is closed, runs each connection's TLS
// handshake as its configuration says, and closes it: a listener that is
// no Sperli rank's (another certificate, another key exchange).
func serveTLS(ln net.Listener) {
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
}
