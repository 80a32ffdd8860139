package runtime_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"sperli/codes"
	"sperli/job"
	"sperli/pki"
	"sperli/runtime"
	"sperli/wire"
)

// resign gives j a token with the fields changed by edit, signed by key.
func resign(t *testing.T, j *runtime.Job, key *pki.PrivateKey, edit func(*pki.Token)) {
	t.Helper()
	tok, err := pki.ParseToken(j.Token)
	if err != nil {
		t.Fatal(err)
	}
	edit(&tok)
	if j.Token, err = tok.Sign(key); err != nil {
		t.Fatal(err)
	}
}

// TestDialerRefused: a rank 0 that is wrong in one way is refused by rank
// 1 with the code of SPEC §4.3, its Init returns that code, and the right
// rank 0 is let in afterwards.
func TestDialerRefused(t *testing.T) {
	other, err := job.NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		tamper func(t *testing.T, f *fixture, j *runtime.Job)
		want   codes.Code
	}{
		{"certificate of another CA", func(t *testing.T, f *fixture, j *runtime.Job) {
			ca, err := pki.NewCA(f.id.ID, pki.Config{}) // the same job, another CA
			if err != nil {
				t.Fatal(err)
			}
			der, key, err := ca.Issue(f.id.ID, 0, "127.0.0.1", time.Now().Add(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			j.Cert, j.Key = der, key.Seed()
		}, codes.CertRefused},
		{"bad token signature", func(t *testing.T, f *fixture, j *runtime.Job) {
			resign(t, j, other.JobPriv, func(*pki.Token) {})
		}, codes.TokenSignature},
		{"expired token", func(t *testing.T, f *fixture, j *runtime.Job) {
			resign(t, j, f.id.JobPriv, func(tk *pki.Token) { tk.Expires = time.Now().Add(-time.Second) })
		}, codes.TokenExpired},
		{"token of another job", func(t *testing.T, f *fixture, j *runtime.Job) {
			resign(t, j, f.id.JobPriv, func(tk *pki.Token) { tk.Job = other.ID })
		}, codes.TokenJob},
		{"token of another rank", func(t *testing.T, f *fixture, j *runtime.Job) {
			resign(t, j, f.id.JobPriv, func(tk *pki.Token) { tk.Rank = 1 })
		}, codes.TokenRank},
		{"wrong size", func(t *testing.T, f *fixture, j *runtime.Job) {
			resign(t, j, f.id.JobPriv, func(tk *pki.Token) { tk.Size = 3 })
		}, codes.TokenMismatch},
		{"wrong incarnation", func(t *testing.T, f *fixture, j *runtime.Job) {
			resign(t, j, f.id.JobPriv, func(tk *pki.Token) { tk.Incarnation = 7 })
		}, codes.TokenMismatch},
		{"wrong host", func(t *testing.T, f *fixture, j *runtime.Job) {
			resign(t, j, f.id.JobPriv, func(tk *pki.Token) { tk.Host = "127.0.0.2" })
		}, codes.TokenMismatch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			f := newFixtureTCP(t, 2)
			listener := startInit(ctx, f.job(1))

			bad := f.job(0)
			spare, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer spare.Close()
			bad.Listener = spare
			tc.tamper(t, f, bad)
			c, err := runtime.Init(ctx, bad)
			if err == nil {
				c.Close()
				t.Fatalf("Init(wrong rank 0) succeeded, want %v", tc.want)
			}
			wantCode(t, "Init(wrong rank 0)", err, tc.want)
			// The refused dialer may learn of it (a TLS alert) before the
			// listener has written its log line: wait for the line.
			if !f.logs.waitFor("rank 1: refused rank", tc.want.String()) {
				t.Errorf("rank 1 did not log the refusal %v; log:\n%s", tc.want, f.logs)
			}

			good, err := runtime.Init(ctx, f.job(0))
			if err != nil {
				t.Fatalf("Init(right rank 0) after the refusal = %v", err)
			}
			defer good.Close()
			r := <-listener
			if r.err != nil {
				t.Fatalf("Init(rank 1) = %v, want success after the right peer came", r.err)
			}
			defer r.c.Close()
			pingPong(t, ctx, good, r.c)
		})
	}
}

type result struct {
	c   *runtime.Comm
	err error
}

func pingPong(t *testing.T, ctx context.Context, a, b *runtime.Comm) {
	t.Helper()
	if err := a.Send(ctx, b.Rank(), 5, []byte("ping")); err != nil {
		t.Fatalf("Send = %v", err)
	}
	got, err := b.Recv(ctx, a.Rank(), 5)
	if err != nil || string(got) != "ping" {
		t.Fatalf("Recv = %q, %v; want ping", got, err)
	}
}

// rawClient is a TLS client with rank 0's certificate (or none) that
// speaks frames by hand.
func rawClient(t *testing.T, f *fixture, withCert bool) (*tls.Conn, error) {
	t.Helper()
	j := f.job(0)
	pool, _, err := pki.Pool(j.CA)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool, ServerName: "127.0.0.1"}
	if withCert {
		cfg.Certificates = []tls.Certificate{rankCert(j)}
	}
	addr := f.lns[1].Addr().String()
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	return conn, nil
}

// readRefusal reads the listener's answer: a refuse frame's code.
func readRefusal(t *testing.T, conn net.Conn) codes.Code {
	t.Helper()
	br := bufio.NewReader(conn)
	var hb [wire.HeaderSize]byte
	h, err := wire.ReadHeader(br, hb[:], wire.AnySource)
	if err != nil {
		t.Fatalf("reading the refusal: %v", err)
	}
	if h.Type != wire.Refuse {
		t.Fatalf("listener answered with a %s frame, want refuse", h.Type)
	}
	p := make([]byte, h.Length)
	if _, err := io.ReadFull(br, p); err != nil {
		t.Fatal(err)
	}
	r, err := wire.DecodeReason(p)
	if err != nil {
		t.Fatal(err)
	}
	return r.Code
}

// TestListenerRefusesFrames: a dialer with a right certificate that sends a
// bad first frame is told the code and cut off; no certificate at all is
// refused in the handshake; the listener then lets the right rank 0 in.
func TestListenerRefusesFrames(t *testing.T) {
	oversized := func() []byte {
		b := make([]byte, wire.HeaderSize)
		(&wire.Header{Type: wire.Hello, Length: wire.MaxPayload + 1}).Put(b)
		return b
	}
	badMagic := func() []byte {
		b := make([]byte, wire.HeaderSize)
		(&wire.Header{Type: wire.Hello, Length: 4}).Put(b)
		copy(b, "XXXX")
		return b
	}
	wrongSource := func() []byte {
		b := make([]byte, wire.HeaderSize)
		(&wire.Header{Type: wire.Hello, Source: 1, Length: 0}).Put(b)
		return b
	}
	// A peer of protocol version 2 (its agreement's decisions unsigned
	// and unconfirmed): refused at its hello, not left to misread the
	// agree frames.
	version2 := func() []byte {
		b := make([]byte, wire.HeaderSize)
		(&wire.Header{Type: wire.Hello, Length: 4}).Put(b)
		b[4] = 2
		return b
	}
	notHello := func() []byte {
		b := make([]byte, wire.HeaderSize)
		(&wire.Header{Type: wire.Data, Length: 0}).Put(b)
		return b
	}
	cases := []struct {
		name  string
		frame func() []byte
		want  codes.Code
	}{
		{"oversized frame", oversized, codes.FrameTooLarge},
		{"malformed header", badMagic, codes.FrameMalformed},
		{"hello from the wrong source", wrongSource, codes.FrameMalformed},
		{"data before hello", notHello, codes.HelloMalformed},
		{"a peer of protocol version 2", version2, codes.FrameMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			f := newFixtureTCP(t, 2)
			listener := startInit(ctx, f.job(1))
			conn, err := rawClient(t, f, true)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Write(tc.frame()); err != nil {
				t.Fatal(err)
			}
			if got := readRefusal(t, conn); got != tc.want {
				t.Fatalf("refusal code = %v, want %v", got, tc.want)
			}
			conn.Close()
			joinRight(t, ctx, f, listener)
		})
	}
	t.Run("no certificate", func(t *testing.T) {
		ctx := testCtx(t)
		f := newFixtureTCP(t, 2)
		listener := startInit(ctx, f.job(1))
		conn, err := rawClient(t, f, false)
		if err == nil {
			// TLS 1.3: the client learns of the refusal on its first read.
			_, err = conn.Read(make([]byte, 1))
			conn.Close()
		}
		var op *net.OpError
		if !errors.As(err, &op) || op.Op != "remote error" {
			t.Fatalf("client without certificate got %v, want a TLS alert", err)
		}
		joinRight(t, ctx, f, listener)
		if !f.logs.has("H1601") {
			t.Errorf("rank 1 did not log H1601; log:\n%s", f.logs)
		}
	})
}

func joinRight(t *testing.T, ctx context.Context, f *fixture, listener chan result) {
	t.Helper()
	good, err := runtime.Init(ctx, f.job(0))
	if err != nil {
		t.Fatalf("Init(right rank 0) = %v", err)
	}
	defer good.Close()
	r := <-listener
	if r.err != nil {
		t.Fatalf("Init(rank 1) = %v", r.err)
	}
	defer r.c.Close()
	pingPong(t, ctx, good, r.c)
}

// TestListenerMetOnlyByWrongPeer: when the join window ends with only a
// wrong peer seen, the join fails with that peer's refusal code.
func TestListenerMetOnlyByWrongPeer(t *testing.T) {
	ctx := testCtx(t)
	f := newFixtureTCP(t, 2)
	f.spec.JoinMS = 1500
	listener := startInit(ctx, f.job(1))
	bad := f.job(0)
	bad.Listener = f.lns[0]
	resign(t, bad, f.id.JobPriv, func(tk *pki.Token) { tk.Expires = time.Now().Add(-time.Minute) })
	_, err := runtime.Init(ctx, bad)
	wantCode(t, "Init(expired rank 0)", err, codes.TokenExpired)
	r := <-listener
	if r.err == nil {
		r.c.Close()
		t.Fatal("Init(rank 1) succeeded with no right peer")
	}
	wantCode(t, "Init(rank 1) at the end of the window", r.err, codes.TokenExpired)
}

// TestNobodyThere: a dial to a rank that never listens ends with H1610.
func TestNobodyThere(t *testing.T) {
	ctx := testCtx(t)
	f := newFixtureTCP(t, 2)
	f.spec.JoinMS = 600
	f.lns[1].Close() // nobody listens at rank 1's port
	_, err := runtime.Init(ctx, f.job(0))
	wantCode(t, "Init(rank 0)", err, codes.Unreachable)
	if !strings.Contains(err.Error(), "rank 1") {
		t.Errorf("error %q does not name rank 1", err)
	}
}

// TestWrongListener: a listener at rank 1's address that shows a token of
// another rank is refused by the dialer, which goes on dialing and joins
// the right rank 1 when it comes.
func TestWrongListener(t *testing.T) {
	ctx := testCtx(t)
	f := newFixtureTCP(t, 2)
	dialer := make(chan result, 1)
	go func() {
		c, err := runtime.Init(ctx, f.job(0))
		dialer <- result{c, err}
	}()
	// The impostor: rank 1's certificate, but a token for rank 0.
	j1 := f.job(1)
	resign(t, j1, f.id.JobPriv, func(tk *pki.Token) { tk.Rank = 0 })
	pool, _, _ := pki.Pool(j1.CA)
	leaf, _ := x509.ParseCertificate(j1.Cert)
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS13, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool,
		Certificates: []tls.Certificate{{Certificate: [][]byte{j1.Cert}, PrivateKey: ed25519.NewKeyFromSeed(j1.Key), Leaf: leaf}},
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		raw, err := f.lns[1].Accept()
		if err != nil {
			t.Error(err)
		}
		accepted <- raw
	}()
	var raw net.Conn
	select {
	case raw = <-accepted:
		if raw == nil {
			t.FailNow()
		}
	case r := <-dialer:
		// (The listener is closed by the fixture's cleanup, which ends
		// the Accept.)
		t.Fatalf("Init(rank 0) = %v before it dialed the impostor", r.err)
	}
	raw.SetDeadline(time.Now().Add(20 * time.Second))
	conn := tls.Server(raw, cfg)
	br := bufio.NewReader(conn)
	var hb [wire.HeaderSize]byte
	h, err := wire.ReadHeader(br, hb[:], 0)
	if err != nil || h.Type != wire.Hello {
		t.Fatalf("impostor read %v, %v; want rank 0's hello", h.Type, err)
	}
	if _, err := io.CopyN(io.Discard, br, int64(h.Length)); err != nil {
		t.Fatal(err)
	}
	hello := wire.AppendHello(nil, wire.HelloBody{SilenceMS: 5000, Token: j1.Token})
	frame := make([]byte, wire.HeaderSize, wire.HeaderSize+len(hello))
	(&wire.Header{Type: wire.Hello, Source: 1, Length: uint32(len(hello))}).Put(frame)
	if _, err := conn.Write(append(frame, hello...)); err != nil {
		t.Fatal(err)
	}
	if got := readRefusal(t, conn); got != codes.TokenRank {
		t.Fatalf("dialer refused the impostor with %v, want H1606", got)
	}
	conn.Close()
	// Now the right rank 1 on the same listener.
	c1, err := runtime.Init(ctx, f.job(1))
	if err != nil {
		t.Fatalf("Init(right rank 1) = %v", err)
	}
	defer c1.Close()
	r := <-dialer
	if r.err != nil {
		t.Fatalf("Init(rank 0) = %v, want success once the right rank 1 listens", r.err)
	}
	defer r.c.Close()
	pingPong(t, ctx, r.c, c1)
	if !f.logs.has("rank 0: refused rank 1") {
		t.Errorf("rank 0 did not log its refusal; log:\n%s", f.logs)
	}
}

// TestJoinManyRanks joins a job of 8 ranks and passes a message around
// the ring.
func TestJoinManyRanks(t *testing.T) {
	ctx := testCtx(t)
	f := newFixtureTCP(t, 8)
	comms := f.initAll(ctx)
	errs := each(comms, func(c *runtime.Comm) error {
		n := c.Size()
		next, prev := (c.Rank()+1)%n, (c.Rank()+n-1)%n
		if err := c.Send(ctx, next, 1, []byte{byte(c.Rank())}); err != nil {
			return err
		}
		got, err := c.Recv(ctx, prev, 1)
		if err != nil {
			return err
		}
		if len(got) != 1 || int(got[0]) != prev {
			return errors.New("ring message from the wrong rank")
		}
		return c.Finish()
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}
