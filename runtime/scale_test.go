package runtime_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"sperli/codes"
	"sperli/pki"
	"sperli/runtime"
	"sperli/topo"
)

// TestLinksOnDemand: a job of 64 ranks joins with the links of its
// spanning tree and ring only (package topo, SPEC §18), runs its
// collectives on them (no rank gains a link), and makes a link the first
// time a send needs one, with every check of the join.
func TestLinksOnDemand(t *testing.T) {
	ctx := testCtx(t)
	const n = 64
	f := newFixture(t, n)
	comms := f.initAll(ctx)
	for r, c := range comms {
		if got, want := runtime.LinkedForTest(c), topo.Neighbours(n, r, nil); !slices.Equal(got, want) {
			t.Fatalf("rank %d after the join has links to %v, want its tree and ring %v", r, got, want)
		}
	}
	errs := each(comms, func(c *runtime.Comm) error {
		if err := c.Barrier(ctx); err != nil {
			return err
		}
		sum, err := c.Allreduce(ctx, runtime.Int64, runtime.Sum, binary.LittleEndian.AppendUint64(nil, uint64(c.Rank()+1)))
		if err != nil {
			return err
		}
		if got := binary.LittleEndian.Uint64(sum); got != n*(n+1)/2 {
			return fmt.Errorf("allreduce = %d, want %d", got, n*(n+1)/2)
		}
		var data []byte
		if c.Rank() == 37 {
			data = []byte("from rank 37")
		}
		got, err := c.Bcast(ctx, 37, data)
		if err != nil {
			return err
		}
		if string(got) != "from rank 37" {
			return fmt.Errorf("bcast = %q", got)
		}
		all, err := c.Gather(ctx, 5, []byte{byte(c.Rank())})
		if err != nil {
			return err
		}
		if c.Rank() == 5 {
			for r := range n {
				if all[r] != byte(r) {
					return fmt.Errorf("gather: byte %d is %d", r, all[r])
				}
			}
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for r, c := range comms {
		if got, want := runtime.LinkedForTest(c), topo.Neighbours(n, r, nil); !slices.Equal(got, want) {
			t.Fatalf("rank %d after the collectives has links to %v, want still %v", r, got, want)
		}
	}

	// Rank 3 and rank 50 have no link; the send makes it, both ways.
	if slices.Contains(topo.Neighbours(n, 3, nil), 50) {
		t.Fatal("the test wants ranks 3 and 50 not to be neighbours")
	}
	errs = each(comms, func(c *runtime.Comm) error {
		switch c.Rank() {
		case 3:
			if err := c.Send(ctx, 50, 7, []byte("hello 50")); err != nil {
				return err
			}
			got, err := c.Recv(ctx, 50, 8)
			if err == nil && string(got) != "hello 3" {
				err = fmt.Errorf("recv = %q", got)
			}
			return err
		case 50:
			got, err := c.Recv(ctx, 3, 7)
			if err != nil {
				return err
			}
			if string(got) != "hello 50" {
				return fmt.Errorf("recv = %q", got)
			}
			return c.Send(ctx, 3, 8, []byte("hello 3"))
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	if !slices.Contains(runtime.LinkedForTest(comms[3]), 50) || !slices.Contains(runtime.LinkedForTest(comms[50]), 3) {
		t.Fatalf("after the send, rank 3 links %v and rank 50 links %v: want each other", runtime.LinkedForTest(comms[3]), runtime.LinkedForTest(comms[50]))
	}

	// An alltoall of small blocks runs by bruck: each rank links to at
	// most 2·log2(64) more ranks, not to every rank.
	errs = each(comms, func(c *runtime.Comm) error {
		data := make([]byte, 2*n)
		for j := range n {
			data[2*j], data[2*j+1] = byte(c.Rank()), byte(j)
		}
		got, err := c.Alltoall(ctx, data)
		if err != nil {
			return err
		}
		for j := range n {
			if int(got[2*j]) != j || int(got[2*j+1]) != c.Rank() {
				return fmt.Errorf("alltoall: block %d is rank %d's block for rank %d", j, got[2*j], got[2*j+1])
			}
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for r, c := range comms {
		if got, lim := len(runtime.LinkedForTest(c)), len(topo.Neighbours(n, r, nil))+2*6+1; got > lim {
			t.Errorf("rank %d after an alltoall has %d links, want at most %d (tree, ring, bruck's partners and the send's)", r, got, lim)
		}
	}
	for r, err := range each(comms, func(c *runtime.Comm) error { return c.Finish() }) {
		if err != nil {
			t.Fatalf("rank %d's Finish: %v", r, err)
		}
	}
}

// TestSimultaneousDials: pairs of ranks with no link send to each other at
// the same moment, both dialing; each pair ends with one link, and every
// message arrives, in order, both ways.
func TestSimultaneousDials(t *testing.T) {
	ctx := testCtx(t)
	const n, msgs = 40, 50
	f := newFixture(t, n)
	comms := f.initAll(ctx)
	partner := func(r int) int { return (r + n/2) % n } // 20 apart: never neighbours
	errs := each(comms, func(c *runtime.Comm) error {
		p := partner(c.Rank())
		done := make(chan error, 1)
		go func() {
			for i := range msgs {
				if err := c.Send(ctx, p, 1, []byte(fmt.Sprint(i))); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		for i := range msgs {
			got, err := c.Recv(ctx, p, 1)
			if err != nil {
				return err
			}
			if want := fmt.Sprint(i); !bytes.Equal(got, []byte(want)) {
				return fmt.Errorf("message %d from rank %d is %q", i, p, got)
			}
		}
		return <-done
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for r, c := range comms {
		if !slices.Contains(runtime.LinkedForTest(c), partner(r)) {
			t.Errorf("rank %d has no link to rank %d after their messages", r, partner(r))
		}
	}
	for r, err := range each(comms, func(c *runtime.Comm) error { return c.Finish() }) {
		if err != nil {
			t.Fatalf("rank %d's Finish: %v", r, err)
		}
	}
}

// TestLossNewsForAll: in a job of 24 ranks that manage their losses, a
// rank's loss is seen by the few with a link to it, and every other rank
// learns it from them (SPEC §18): failed() converges to the same list on
// every rank, a collective that needs the lost rank raises H1611 on
// every live one, and the ring heals around it.
func TestLossNewsForAll(t *testing.T) {
	ctx := testCtx(t)
	const n, dead = 24, 11
	f := newFixture(t, n)
	f.spec.SilenceMS = 1000
	comms := f.initAll(ctx)
	for _, err := range each(comms, func(c *runtime.Comm) error { return c.SetOnLoss(runtime.LossReturn) }) {
		if err != nil {
			t.Fatal(err)
		}
	}
	runtime.CrashForTest(comms[dead])
	errs := each(comms, func(c *runtime.Comm) error {
		if c.Rank() == dead {
			return nil
		}
		return c.Barrier(ctx)
	})
	for r, err := range errs {
		if r != dead {
			wantCode(t, fmt.Sprintf("rank %d's barrier", r), err, codes.PeerLost)
		}
	}
	for r, c := range comms {
		if r == dead {
			continue
		}
		if got := c.Failed(); !slices.Equal(got, []int{dead}) {
			t.Errorf("rank %d: failed() = %v, want [%d]", r, got, dead)
		}
		lost := func(s int) bool { return s == dead }
		for _, s := range topo.Neighbours(n, r, lost) {
			if !slices.Contains(runtime.LinkedForTest(c), s) {
				// The healed ring's link may still be on its way.
				waitLinked(t, ctx, c, s)
			}
		}
	}
}

// waitLinked waits until c has a made link to slot s.
func waitLinked(t *testing.T, ctx context.Context, c *runtime.Comm, s int) {
	t.Helper()
	for !slices.Contains(runtime.LinkedForTest(c), s) {
		select {
		case <-ctx.Done():
			t.Fatalf("slot %d never linked slot %d (links %v)", c.Slot(), s, runtime.LinkedForTest(c))
		case <-time.After(time.Millisecond):
		}
	}
}

// TestRevokeOverTheTree: a revoke in a job of 64 ranks reaches every rank
// over the tree and the ring (SPEC §18, news for all): every pending
// receive ends with H1626, and no rank gains a link (sent to every rank
// at once, it made a link from every rank to every other).
func TestRevokeOverTheTree(t *testing.T) {
	ctx := testCtx(t)
	const n = 64
	comms := newFixture(t, n).initAll(ctx)
	for _, c := range comms {
		c.SetOnLoss(runtime.LossReturn)
	}
	errs := each(comms, func(c *runtime.Comm) error {
		if c.Rank() == 37 {
			return c.Revoke()
		}
		_, err := c.Recv(ctx, (c.Rank()+1)%n, 9) // never sent: only the revoke ends it
		return err
	})
	for r, err := range errs {
		if r != 37 && codes.Of(err) != codes.Revoked {
			t.Fatalf("rank %d: pending recv = %v, want H1626", r, err)
		}
	}
	for r, c := range comms {
		if got, want := runtime.LinkedForTest(c), topo.Neighbours(n, r, nil); !slices.Equal(got, want) {
			t.Fatalf("rank %d after the revoke has links to %v, want still its tree and ring %v", r, got, want)
		}
	}
}

// answerless passes on the connections it accepts until hold is
// set; after that it gives them to held, answered by nobody: a dial to
// it stays in its handshake, as a dial to a slot starved of processor
// time does.
type answerless struct {
	net.Listener
	hold atomic.Bool
	held chan net.Conn
}

func (h *answerless) Accept() (net.Conn, error) {
	for {
		c, err := h.Listener.Accept()
		if err != nil || !h.hold.Load() {
			return c, err
		}
		h.held <- c
	}
}

// TestDialEndsWhenPeersLinkAttaches: a dial still in its handshake when
// the peer's own dial makes the link is ended at once (its connection
// closed), not left to fail later: in a pairwise alltoall of 128 ranks
// on two processors such dials failed seconds later, when the peer had
// finished and closed its listener, and each failure declared a live,
// finished peer lost ("no link could be made").
func TestDialEndsWhenPeersLinkAttaches(t *testing.T) {
	ctx := testCtx(t)
	const n, lo, hi = 40, 0, 20 // never neighbours (TestSimultaneousDials)
	f := newFixture(t, n)
	// A handshake's deadline far beyond the test's: before the fix the
	// held dial ended only there.
	f.spec.JoinMS = 300000
	hl := &answerless{Listener: f.lns[lo], held: make(chan net.Conn, 1)}
	f.lns[lo] = hl
	comms := f.initAll(ctx)
	hl.hold.Store(true)

	sent := make(chan error, 1)
	go func() { sent <- comms[hi].Send(ctx, lo, 1, []byte("from the higher")) }()
	var held net.Conn
	select {
	case held = <-hl.held: // the higher slot's dial is in its handshake
	case <-ctx.Done():
		t.Fatal("the higher slot never dialed")
	}
	defer held.Close()
	if err := comms[lo].Send(ctx, hi, 2, []byte("from the lower")); err != nil {
		t.Fatalf("lower slot's send: %v", err)
	}
	dl, _ := ctx.Deadline()
	held.SetReadDeadline(dl)
	var b [1 << 10]byte
	for {
		_, err := held.Read(b[:])
		if err == nil {
			continue // the ClientHello
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("the higher slot's dial was not ended when the lower slot's link was attached")
		}
		break // closed by the dialer
	}
	if got, err := comms[hi].Recv(ctx, lo, 2); err != nil || string(got) != "from the lower" {
		t.Fatalf("higher slot's receive: %q, %v", got, err)
	}
	if got, err := comms[lo].Recv(ctx, hi, 1); err != nil || string(got) != "from the higher" {
		t.Fatalf("lower slot's receive: %q, %v", got, err)
	}
	if err := <-sent; err != nil {
		t.Fatalf("higher slot's send: %v", err)
	}
	for r, err := range each(comms, func(c *runtime.Comm) error { return c.Finish() }) {
		if err != nil {
			t.Fatalf("rank %d's Finish: %v", r, err)
		}
	}
	if f.logs.has("lost") || f.logs.has("refused") {
		t.Errorf("a rank logged a loss or a refusal:\n%s", f.logs)
	}
}

// TestHangUpIsNoRefusal: a connection its dialer closes before the end of
// the TLS handshake — a dial ended because the link was made the other
// way — is not logged as a refusal; one that sends what is not TLS is.
func TestHangUpIsNoRefusal(t *testing.T) {
	ctx := testCtx(t)
	f := newFixture(t, 2)
	f.initAll(ctx)
	try := func(send string) {
		t.Helper()
		c, err := f.net.Dial(f.lns[0].Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		dl, _ := ctx.Deadline()
		c.SetDeadline(dl)
		if _, err := c.Write([]byte(send)); err != nil {
			t.Fatal(err)
		}
		c.(interface{ CloseWrite() error }).CloseWrite()
		// The listener closes its end once it has dealt with ours
		// (logged or not): read to that end.
		var b [512]byte
		for {
			if _, err := c.Read(b[:]); err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatal("the listener never closed the connection")
				}
				return
			}
		}
	}
	try("\x16\x03\x01\x00") // the first bytes of a ClientHello, then the hang-up
	// A TLS handshake done with rank 1's certificate, then the hang-up
	// before the hello.
	j1 := f.job(1)
	pool, _, err := pki.Pool(j1.CA)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := f.net.Dial(f.lns[0].Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	dl, _ := ctx.Deadline()
	raw.SetDeadline(dl)
	tc := tls.Client(raw, &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{rankCert(j1)}, RootCAs: pool, ServerName: "127.0.0.1"})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	tc.CloseWrite()
	if _, err := io.ReadAll(tc); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the listener never closed the TLS connection")
	}
	tc.Close()
	if f.logs.has("refused") {
		t.Errorf("a dialer that hung up was logged as refused:\n%s", f.logs)
	}
	try("GET / HTTP/1.0\r\n\r\n")
	if !f.logs.has("refused") {
		t.Errorf("a dialer that spoke no TLS was not logged as refused:\n%s", f.logs)
	}
}
