package clib

// The refusal matrix of "Jobs that run" (SPEC §4.3) with a C rank on the
// refusing side and on the refused side: real certificates and tokens made
// by the launcher's own code, the C rank a process of libsperli/test/cpeer.c
// ("cpeer echo") that reads its tampered or right description on stdin and
// listens on a socket the test hands it (listen_fd 3), the other side Go
// (runtime.Init in this process) or raw TLS.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sperli/codes"
	"sperli/job"
	"sperli/pki"
	"sperli/runtime"
	"sperli/tests/internal/testbin"
	"sperli/wire"
)

// testJob is a job of two (or n) ranks on 127.0.0.1 with listeners from the
// kernel.
type testJob struct {
	t    *testing.T
	id   *job.Identity
	spec job.Spec
	lns  []*net.TCPListener
	logs *logBook
}

func newJob(t *testing.T) *testJob { return newJobN(t, 2) }

func newJobN(t *testing.T, n int) *testJob {
	t.Helper()
	id, err := job.NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	j := &testJob{t: t, id: id, logs: &logBook{}, lns: make([]*net.TCPListener, n)}
	table := make([]runtime.Host, n)
	for r := range j.lns {
		ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		j.lns[r] = ln
		table[r] = runtime.Host{Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port}
	}
	j.spec = job.Spec{Size: n, Hosts: table, JoinMS: 20000, Expires: time.Now().Add(10 * time.Minute)}
	return j
}

// describe returns rank's description (not yet bound to a listener).
func (j *testJob) describe(rank int) *runtime.Job {
	j.t.Helper()
	d, err := j.id.Describe(j.spec, rank)
	if err != nil {
		j.t.Fatal(err)
	}
	d.Logf = j.logs.logf(rank)
	return d
}

// goRank is rank's description for runtime.Init in this process, on its
// listener (or on a spare one).
func (j *testJob) goRank(rank int, spare bool) *runtime.Job {
	d := j.describe(rank)
	d.Listener = j.lns[rank]
	if spare {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			j.t.Fatal(err)
		}
		j.t.Cleanup(func() { ln.Close() })
		d.Listener = ln
	}
	return d
}

type logBook struct {
	mu    sync.Mutex
	lines []string
}

func (l *logBook) logf(rank int) func(string, ...any) {
	return func(format string, args ...any) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, fmt.Sprintf("rank %d: ", rank)+fmt.Sprintf(format, args...))
	}
}

func (l *logBook) has(sub string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.lines {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func (l *logBook) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// cRank is a C rank process.
type cRank struct {
	cmd            *exec.Cmd
	stdout, stderr *bytes.Buffer
	done           chan struct{}
	err            error
}

// startC starts "cpeer echo" with description d, listening on ln (its
// descriptor becomes the child's fd 3; this process's copy is closed), or
// on a spare listener when ln is nil.
func startC(t *testing.T, ctx context.Context, d *runtime.Job, ln *net.TCPListener) *cRank {
	t.Helper()
	return startProgram(t, ctx, d, ln, filepath.Join(bin, "cpeer"), "echo")
}

// startProgram starts a rank program with description d, as startC.
func startProgram(t *testing.T, ctx context.Context, d *runtime.Job, ln *net.TCPListener, name string, args ...string) *cRank {
	t.Helper()
	if ln == nil {
		var err error
		if ln, err = net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}); err != nil {
			t.Fatal(err)
		}
	}
	f, err := ln.File()
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	defer f.Close()
	d.ListenFD = 3
	cmd, stdout, stderr := command(t, ctx, name, args...)
	cmd.ExtraFiles = []*os.File{f}
	cmd.Stdin = bytes.NewReader(append(d.Encode(), '\n'))
	c := &cRank{cmd: cmd, stdout: stdout, stderr: stderr, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.err = cmd.Wait(); close(c.done) }()
	return c
}

// end waits for the rank and returns its exit status.
func (c *cRank) end(t *testing.T) int {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(jobTimeout):
		t.Fatalf("the rank did not end within %v", jobTimeout)
	}
	return exitCode(t, c.err)
}

// wait waits for the C rank and wants its sperli_init code and exit status.
func (c *cRank) wait(t *testing.T, init codes.Code, status int) {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(jobTimeout):
		t.Fatalf("the C rank did not end within %v", jobTimeout)
	}
	got := exitCode(t, c.err)
	want := fmt.Sprintf("init=%d\n", int(init))
	if !strings.HasPrefix(c.stdout.String(), want) || got != status {
		t.Fatalf("C rank: stdout %q, exit status %d; want %q and %d\nstderr:\n%s", c.stdout, got, want, status, c.stderr)
	}
}

// echo has the right Go rank talk to the C rank: the C rank sends back
// what it is sent.
func echo(t *testing.T, ctx context.Context, c *runtime.Comm) {
	t.Helper()
	peer := 1 - c.Rank()
	if err := c.Send(ctx, peer, 5, []byte("ping")); err != nil {
		t.Fatalf("Send = %v", err)
	}
	got, err := c.Recv(ctx, peer, 6)
	if err != nil || string(got) != "ping" {
		t.Fatalf("Recv = %q, %v; want ping back from the C rank", got, err)
	}
	if err := c.Finish(); err != nil {
		t.Fatalf("Finish = %v", err)
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), jobTimeout)
	t.Cleanup(cancel)
	return ctx
}

// resign gives d a token with the fields changed by edit, signed by key.
func resign(t *testing.T, d *runtime.Job, key *pki.PrivateKey, edit func(*pki.Token)) {
	t.Helper()
	tok, err := pki.ParseToken(d.Token)
	if err != nil {
		t.Fatal(err)
	}
	edit(&tok)
	if d.Token, err = tok.Sign(key); err != nil {
		t.Fatal(err)
	}
}

// tamperings make a description wrong in one way, with the code the
// receiver refuses it with.
func tamperings(t *testing.T) []tampering {
	other, err := job.NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	return []tampering{
		{"certificate of another CA", codes.CertRefused, func(t *testing.T, j *testJob, d *runtime.Job) {
			ca, err := pki.NewCA(j.id.ID, pki.Config{}) // the same job, another CA
			if err != nil {
				t.Fatal(err)
			}
			der, key, err := ca.Issue(j.id.ID, d.Rank, "127.0.0.1", time.Now().Add(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			d.Cert, d.Key = der, key.Seed()
		}},
		{"expired token", codes.TokenExpired, func(t *testing.T, j *testJob, d *runtime.Job) {
			resign(t, d, j.id.JobPriv, func(tk *pki.Token) { tk.Expires = time.Now().Add(-time.Second) })
		}},
		{"token of another job", codes.TokenJob, func(t *testing.T, j *testJob, d *runtime.Job) {
			resign(t, d, j.id.JobPriv, func(tk *pki.Token) { tk.Job = other.ID })
		}},
		{"token of another rank", codes.TokenRank, func(t *testing.T, j *testJob, d *runtime.Job) {
			resign(t, d, j.id.JobPriv, func(tk *pki.Token) { tk.Rank = 1 - tk.Rank })
		}},
	}
}

type tampering struct {
	name   string
	want   codes.Code
	tamper func(t *testing.T, j *testJob, d *runtime.Job)
}

// rawDial is a TLS client with rank 0's certificate (or none) to rank 1's
// listener, speaking frames by hand.
func rawDial(t *testing.T, j *testJob, withCert bool) (*tls.Conn, error) {
	t.Helper()
	d := j.describe(0)
	pool, _, err := pki.Pool(d.CA)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool, ServerName: "127.0.0.1"}
	if withCert {
		leaf, _ := x509.ParseCertificate(d.Cert)
		cfg.Certificates = []tls.Certificate{{Certificate: [][]byte{d.Cert}, PrivateKey: ed25519.NewKeyFromSeed(d.Key), Leaf: leaf}}
	}
	addr := fmt.Sprintf("127.0.0.1:%d", j.spec.Hosts[1].Port)
	var conn *tls.Conn
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if conn, err = tls.Dial("tcp", addr, cfg); err == nil || time.Now().After(end) {
			break
		}
		if isAlert(err) {
			return nil, err
		}
	}
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	return conn, nil
}

func isAlert(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error"
}

// readRefusal reads a refuse frame and returns its code.
func readRefusal(t *testing.T, r io.Reader) codes.Code {
	t.Helper()
	br := bufio.NewReader(r)
	var hb [wire.HeaderSize]byte
	h, err := wire.ReadHeader(br, hb[:], wire.AnySource)
	if err != nil {
		t.Fatalf("reading the refusal: %v", err)
	}
	if h.Type != wire.Refuse {
		t.Fatalf("the C rank answered with a %s frame, want refuse", h.Type)
	}
	p := make([]byte, h.Length)
	if _, err := io.ReadFull(br, p); err != nil {
		t.Fatal(err)
	}
	reason, err := wire.DecodeReason(p)
	if err != nil {
		t.Fatal(err)
	}
	return reason.Code
}

// loggedRefusal reports whether log has a refusal line with code: "rank 1:
// refused rank 0: H1606: …" (rank -1 when the certificate names none).
func loggedRefusal(log string, code codes.Code) bool {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "rank 1: refused rank ") && strings.Contains(l, ": "+code.String()+": ") {
			return true
		}
	}
	return false
}

func oversizedHello(source uint32) []byte {
	b := make([]byte, wire.HeaderSize)
	(&wire.Header{Type: wire.Hello, Source: source, Length: wire.MaxPayload + 1}).Put(b)
	return b
}

// TestCListenerRefuses: a C rank 1 waits for rank 0; a wrong rank 0 comes
// first and is refused with the code of SPEC §4.3 (the wrong Go dialer's
// Init returns it; a raw client reads it); the C rank logs it, goes on
// waiting, lets the right rank 0 in, and answers it.
func TestCListenerRefuses(t *testing.T) {
	t.Parallel()
	type wrong struct {
		name string
		want codes.Code
		come func(t *testing.T, ctx context.Context, j *testJob)
	}
	var cases []wrong
	for _, tm := range tamperings(t) {
		cases = append(cases, wrong{tm.name, tm.want, func(t *testing.T, ctx context.Context, j *testJob) {
			bad := j.goRank(0, true)
			tm.tamper(t, j, bad)
			c, err := runtime.Init(ctx, bad)
			if err == nil {
				c.Close()
				t.Fatalf("Init(wrong rank 0) succeeded, want %v", tm.want)
			}
			if codes.Of(err) != tm.want {
				t.Fatalf("Init(wrong rank 0) = %v, want %v", err, tm.want)
			}
		}})
	}
	cases = append(cases,
		wrong{"no certificate", codes.CertRefused, func(t *testing.T, ctx context.Context, j *testJob) {
			conn, err := rawDial(t, j, false)
			if err == nil {
				_, err = conn.Read(make([]byte, 1)) // TLS 1.3: the refusal comes on the first read
				conn.Close()
			}
			if !isAlert(err) {
				t.Fatalf("a client without certificate got %v, want a TLS alert", err)
			}
		}},
		wrong{"oversized frame", codes.FrameTooLarge, func(t *testing.T, ctx context.Context, j *testJob) {
			conn, err := rawDial(t, j, true)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.Write(oversizedHello(0)); err != nil {
				t.Fatal(err)
			}
			if got := readRefusal(t, conn); got != codes.FrameTooLarge {
				t.Fatalf("refusal code = %v, want H1608", got)
			}
		}},
	)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			j := newJob(t)
			c := startC(t, ctx, j.describe(1), j.lns[1])
			tc.come(t, ctx, j)
			good, err := runtime.Init(ctx, j.goRank(0, false))
			if err != nil {
				t.Fatalf("Init(right rank 0) after the refusal = %v\nC rank's stderr:\n%s", err, c.stderr)
			}
			defer good.Close()
			echo(t, ctx, good)
			c.wait(t, 0, 0)
			if !loggedRefusal(c.stderr.String(), tc.want) {
				t.Errorf("the C rank did not log the refusal %v; stderr:\n%s", tc.want, c.stderr)
			}
		})
	}
}

// TestCDialerRefused: a wrong C rank 0 is refused by a Go rank 1; its
// sperli_init returns the code (exit status 1); the right C rank 0 is let
// in afterwards.
func TestCDialerRefused(t *testing.T) {
	t.Parallel()
	for _, tm := range tamperings(t) {
		t.Run(tm.name, func(t *testing.T) {
			ctx := testCtx(t)
			j := newJob(t)
			listener := make(chan error, 1)
			var comm *runtime.Comm
			go func() {
				var err error
				comm, err = runtime.Init(ctx, j.goRank(1, false))
				listener <- err
			}()
			bad := j.describe(0)
			tm.tamper(t, j, bad)
			startC(t, ctx, bad, nil).wait(t, tm.want, 1)
			// The refusal is logged by rank 1's handshake goroutine, which
			// may still be at it when the refused C rank has ended.
			testbin.Poll(ctx, 5*time.Millisecond, func() bool { return loggedRefusal(j.logs.String(), tm.want) })
			if !loggedRefusal(j.logs.String(), tm.want) {
				t.Errorf("rank 1 did not log the refusal %v; log:\n%s", tm.want, j.logs)
			}
			c := startC(t, ctx, j.describe(0), j.lns[0])
			if err := <-listener; err != nil {
				t.Fatalf("Init(rank 1) = %v, want success once the right C rank 0 came\nC rank's stderr:\n%s", err, c.stderr)
			}
			defer comm.Close()
			echo(t, ctx, comm)
			c.wait(t, 0, 0)
		})
	}
}

// TestCListenerMetOnlyByWrongPeer: when the join window of a C rank ends
// with only a wrong peer seen, its sperli_init returns that peer's code.
func TestCListenerMetOnlyByWrongPeer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		want codes.Code
	}{{"expired token", codes.TokenExpired}, {"oversized frame", codes.FrameTooLarge}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			j := newJob(t)
			j.spec.JoinMS = 1500
			c := startC(t, ctx, j.describe(1), j.lns[1])
			if tc.want == codes.TokenExpired {
				bad := j.goRank(0, true)
				resign(t, bad, j.id.JobPriv, func(tk *pki.Token) { tk.Expires = time.Now().Add(-time.Minute) })
				if _, err := runtime.Init(ctx, bad); codes.Of(err) != tc.want {
					t.Fatalf("Init(expired rank 0) = %v, want %v", err, tc.want)
				}
			} else {
				conn, err := rawDial(t, j, true)
				if err != nil {
					t.Fatal(err)
				}
				conn.Write(oversizedHello(0))
				readRefusal(t, conn)
				conn.Close()
			}
			c.wait(t, tc.want, 1)
			if !strings.Contains(c.stderr.String(), tc.want.String()+": ") {
				t.Errorf("the C rank's stderr does not give the error:\n%s", c.stderr)
			}
		})
	}
}

// TestCDialerRefusesListener: a C rank 0 dials rank 1's address and meets
// an impostor that answers its hello with an oversized frame; the C rank
// refuses it (H1608, told to the impostor), goes on dialing, and joins the
// right Go rank 1 on the same address.
func TestCDialerRefusesListener(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	j := newJob(t)
	c := startC(t, ctx, j.describe(0), j.lns[0])
	d1 := j.describe(1)
	pool, _, _ := pki.Pool(d1.CA)
	leaf, _ := x509.ParseCertificate(d1.Cert)
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS13, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool,
		Certificates: []tls.Certificate{{Certificate: [][]byte{d1.Cert}, PrivateKey: ed25519.NewKeyFromSeed(d1.Key), Leaf: leaf}},
	}
	raw, err := j.lns[1].Accept()
	if err != nil {
		t.Fatal(err)
	}
	raw.SetDeadline(time.Now().Add(20 * time.Second))
	conn := tls.Server(raw, cfg)
	br := bufio.NewReader(conn)
	var hb [wire.HeaderSize]byte
	h, err := wire.ReadHeader(br, hb[:], 0)
	if err != nil || h.Type != wire.Hello {
		t.Fatalf("impostor read %v, %v; want the C rank's hello", h.Type, err)
	}
	if _, err := io.CopyN(io.Discard, br, int64(h.Length)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(oversizedHello(1)); err != nil {
		t.Fatal(err)
	}
	if got := readRefusal(t, br); got != codes.FrameTooLarge {
		t.Fatalf("the C rank refused the impostor with %v, want H1608", got)
	}
	conn.Close()
	good, err := runtime.Init(ctx, j.goRank(1, false))
	if err != nil {
		t.Fatalf("Init(right rank 1) = %v\nC rank's stderr:\n%s", err, c.stderr)
	}
	defer good.Close()
	echo(t, ctx, good)
	c.wait(t, 0, 0)
	if !strings.Contains(c.stderr.String(), "refused rank 1: H1608") {
		t.Errorf("the C rank did not log its refusal; stderr:\n%s", c.stderr)
	}
}

// TestCRankLost: in a job of three C ranks (the sum), rank 1 dies at its
// first collective (the test-only failure schedule: SIGKILL to itself);
// the others see it lost (H1611, or H1612 with the cause "lost" when the
// other told them first) and end through sperli_exit with exit status 75.
func TestCRankLost(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	j := newJobN(t, 3)
	j.spec.Failures = "0:1"
	j.spec.SilenceMS = 1000
	var ranks []*cRank
	for r := 0; r < 3; r++ {
		ranks = append(ranks, startProgram(t, ctx, j.describe(r), j.lns[r], filepath.Join(bin, "csum")))
	}
	if got := ranks[1].end(t); got != -1 {
		t.Errorf("rank 1: exit status %d, want killed by a signal", got)
	}
	for _, r := range []int{0, 2} {
		if got := ranks[r].end(t); got != 75 {
			t.Errorf("rank %d: exit status %d, want 75\nstdout:\n%s\nstderr:\n%s", r, got, ranks[r].stdout, ranks[r].stderr)
		}
		if e := ranks[r].stderr.String(); !strings.Contains(e, "H1611: rank 1 lost") && !strings.Contains(e, "H1612: job ended by rank") {
			t.Errorf("rank %d does not say H1611 or H1612:\n%s", r, e)
		}
	}
}
