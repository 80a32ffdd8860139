package runtime_test

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"sperli/codes"
	"sperli/pki"
	"sperli/runtime"
	"sperli/topo"
)

// resettingListener resets, in the middle of their TLS handshake, the
// connections it accepts while reset says so — a rank killed while a
// dialer's handshake with it was under way — and hands out the others.
type resettingListener struct {
	net.Listener
	reset  func() bool
	resets atomic.Int32 // connections reset so far
}

func (l *resettingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil || !l.reset() {
			return c, err
		}
		resetMidHandshake(c)
		l.resets.Add(1)
	}
}

// resetMidHandshake reads the dialer's ClientHello, then resets the
// connection (SO_LINGER 0, then close: an RST), as the kernel does for a
// process that dies with the connection open.
func resetMidHandshake(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	c.Read(make([]byte, 1<<10))
	c.(*net.TCPConn).SetLinger(0)
	c.Close()
}

// wantBroken checks that err is code want and says that the handshake's
// connection broke, the reset included, and nothing of a refusal.
func wantBroken(t *testing.T, what string, err error, want codes.Code) {
	t.Helper()
	wantCode(t, what, err, want)
	msg := err.Error()
	t.Logf("%s = %s", what, msg)
	for _, s := range []string{"broke during the handshake", "connection reset by peer"} {
		if !strings.Contains(msg, s) {
			t.Errorf("%s = %q, does not say %q", what, msg, s)
		}
	}
	if strings.Contains(msg, "H1601") || strings.Contains(msg, "refused") {
		t.Errorf("%s = %q, calls a reset a refusal", what, msg)
	}
}

// TestResetInHandshakeDuringJoin: a listener whose connections are reset
// before the handshake's end is not reachable, never refusing: the dial
// is tried again until the join window ends (H1610 saying what
// happened), and a right rank that comes within the window is let in.
func TestResetInHandshakeDuringJoin(t *testing.T) {
	t.Run("window ends", func(t *testing.T) {
		ctx := testCtx(t)
		f := newFixtureTCP(t, 2)
		f.spec.JoinMS = 1000
		ln := &resettingListener{Listener: f.lns[1], reset: func() bool { return true }}
		go func() {
			for {
				if _, err := ln.Accept(); err != nil {
					return
				}
			}
		}()
		c, err := runtime.Init(ctx, f.job(0))
		if err == nil {
			c.Close()
			t.Fatal("Init(rank 0) succeeded against a listener that resets")
		}
		if ln.resets.Load() == 0 {
			t.Fatalf("Init(rank 0) = %v, before any reset", err)
		}
		wantBroken(t, "Init(rank 0)", err, codes.Unreachable)
		if !strings.Contains(err.Error(), "rank 1 at "+f.lns[1].Addr().String()) {
			t.Errorf("Init(rank 0) = %q, does not name rank 1 and its address", err)
		}
		if f.logs.has("refused") {
			t.Errorf("a reset was logged as a refusal:\n%s", f.logs)
		}
	})
	t.Run("right peer comes", func(t *testing.T) {
		ctx := testCtx(t)
		f := newFixtureTCP(t, 2)
		var n atomic.Int32
		j1 := f.job(1)
		ln := &resettingListener{Listener: f.lns[1], reset: func() bool { return n.Add(1) <= 3 }}
		j1.Listener = ln
		listener := startInit(ctx, j1)
		joinRight(t, ctx, f, listener)
		if got := ln.resets.Load(); got != 3 {
			t.Errorf("%d connections reset, want 3", got)
		}
		if f.logs.has("refused") {
			t.Errorf("a reset was logged as a refusal:\n%s", f.logs)
		}
	})
}

// TestResetInHandshakeAfterJoin: a link made on demand (SPEC §18) to a
// rank whose connections are reset before the handshake's end is a loss
// of that rank (H1611) that says so, not a refused certificate.
func TestResetInHandshakeAfterJoin(t *testing.T) {
	ctx := testCtx(t)
	const n, from, to = 6, 1, 4
	if slicesContain(topo.Neighbours(n, from, nil), to) || slicesContain(topo.Neighbours(n, to, nil), from) {
		t.Fatalf("slots %d and %d are linked by the join: the test needs a link made on demand", from, to)
	}
	f := newFixtureTCP(t, n)
	f.spec.SilenceMS = 1000
	var on atomic.Bool
	ln := &resettingListener{Listener: f.lns[to], reset: on.Load}
	f.lns[to] = ln
	comms := f.initAll(ctx)
	on.Store(true)
	if err := comms[from].Send(ctx, to, 1, []byte("x")); err != nil && codes.Of(err) != codes.PeerLost {
		t.Fatalf("Send to rank %d = %v", to, err)
	}
	_, err := comms[from].Recv(ctx, to, 2)
	if ln.resets.Load() == 0 {
		t.Fatalf("Recv from rank %d = %v, before any reset", to, err)
	}
	wantBroken(t, "Recv from the reset rank", err, codes.PeerLost)
	if !strings.Contains(err.Error(), "rank 4 lost") {
		t.Errorf("Recv = %q, does not say rank %d was lost", err, to)
	}
}

func slicesContain(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestDialerRefusesListenerCert: a listener at rank 1's address whose
// certificate the dialer's checks refuse — another CA, or the right CA
// for another address — stays H1601 (SPEC §4.3), told by the dialer's own
// verification, not taken for a peer gone.
func TestDialerRefusesListenerCert(t *testing.T) {
	cases := []struct {
		name string
		cert func(t *testing.T, f *fixture) tls.Certificate
		says string
	}{
		{"another CA", func(t *testing.T, f *fixture) tls.Certificate {
			ca, err := pki.NewCA(f.id.ID, pki.Config{})
			if err != nil {
				t.Fatal(err)
			}
			return issued(t, ca, f.id.ID, "127.0.0.1")
		}, "certificate signed by unknown authority"},
		{"another address", func(t *testing.T, f *fixture) tls.Certificate {
			return issued(t, f.id.CA, f.id.ID, "127.0.0.2")
		}, "not 127.0.0.1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			f := newFixtureTCP(t, 2)
			f.spec.JoinMS = 1000
			serveTLS(tls.NewListener(f.lns[1], &tls.Config{MinVersion: tls.VersionTLS13,
				Certificates: []tls.Certificate{tc.cert(t, f)}}))
			c, err := runtime.Init(ctx, f.job(0))
			if err == nil {
				c.Close()
				t.Fatal("Init(rank 0) succeeded against a listener of a refused certificate")
			}
			wantCode(t, "Init(rank 0)", err, codes.CertRefused)
			var ve *tls.CertificateVerificationError
			if !errors.As(err, &ve) || !strings.Contains(err.Error(), "certificate of rank 1") || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("Init(rank 0) = %q, want the verification failure of rank 1's certificate (%q)", err, tc.says)
			}
			if !f.logs.has("rank 0: refused rank 1: H1601") {
				t.Errorf("rank 0 did not log the refusal; log:\n%s", f.logs)
			}
		})
	}
}

// issued is a certificate of ca for rank 1 of job at host.
func issued(t *testing.T, ca *pki.CA, job, host string) tls.Certificate {
	t.Helper()
	der, key, err := ca.Issue(job, 1, host, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// TestStalledHandshakeIsNoRefusal: a dialer that starts a handshake and
// then says nothing until the listener's handshake deadline is not a
// refused certificate: the listener closes it without a refusal logged.
func TestStalledHandshakeIsNoRefusal(t *testing.T) {
	ctx := testCtx(t)
	f := newFixture(t, 2)
	f.spec.JoinMS = 1000 // after the join, a handshake's deadline is a join window away
	f.initAll(ctx)
	c, err := f.net.Dial(f.lns[0].Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dl, _ := ctx.Deadline()
	c.SetDeadline(dl)
	if _, err := c.Write([]byte("\x16\x03\x01\x00")); err != nil { // the first bytes of a ClientHello
		t.Fatal(err)
	}
	var b [512]byte
	for {
		if _, err := c.Read(b[:]); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal("the listener never closed the stalled connection")
			}
			break
		}
	}
	if f.logs.has("refused") {
		t.Errorf("a stalled handshake was logged as a refusal:\n%s", f.logs)
	}
}
