//go:build linux

package mesh

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	ossignal "os/signal"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fdWait bounds every wait in these tests; a test that waits longer fails
// (and its cleanups close the connections, which ends what it waited for).
const fdWait = 10 * time.Second

// spinLong is a read spin limit longer than fdWait: a read spinning with it
// is still spinning when the test acts, and only the spin loop's own checks
// of deadline, Close and EOF can end it in time.
const spinLong = time.Minute

// tcpPair returns both ends of a loopback TCP connection on a port from the
// kernel.
func tcpPair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ln.SetDeadline(time.Now().Add(fdWait))
	c, err := net.DialTimeout("tcp", ln.Addr().String(), fdWait)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s, err := ln.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return c.(*net.TCPConn), s
}

// shrink makes the socket buffers of conns small, so that a writer whose
// peer does not read is stopped after little data.
func shrink(t *testing.T, conns ...*net.TCPConn) {
	t.Helper()
	for _, c := range conns {
		if err := c.SetReadBuffer(16 << 10); err != nil {
			t.Fatal(err)
		}
		if err := c.SetWriteBuffer(16 << 10); err != nil {
			t.Fatal(err)
		}
	}
}

// own takes c out of Go's poller with read spin limit spin.
func own(t *testing.T, c *net.TCPConn, spin time.Duration) *fdConn {
	t.Helper()
	nc, err := ownConn(c)
	if err != nil {
		t.Fatalf("ownConn: %v", err)
	}
	fc, ok := nc.(*fdConn)
	if !ok {
		t.Fatalf("ownConn(%T) = %T, want *fdConn", c, nc)
	}
	fc.setSpin(spin)
	t.Cleanup(func() { within(t, "Close", fc.Close) })
	return fc
}

// await returns what ch gives, failing the test after fdWait.
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(fdWait):
		t.Fatalf("%s: nothing after %v", what, fdWait)
	}
	var zero T
	return zero
}

// within runs f in another goroutine and returns its result, failing the
// test if f takes longer than fdWait.
func within[T any](t *testing.T, what string, f func() T) T {
	t.Helper()
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	return await(t, ch, what)
}

// send writes msg to from and fails the test unless exactly msg comes out
// of to.
func send(t *testing.T, from, to net.Conn, msg string) {
	t.Helper()
	if err := within(t, "Write", func() error { _, err := from.Write([]byte(msg)); return err }); err != nil {
		t.Fatalf("Write(%d bytes): %v", len(msg), err)
	}
	got := make([]byte, len(msg))
	if err := within(t, "Read", func() error { _, err := io.ReadFull(to, got); return err }); err != nil {
		t.Fatalf("reading %d bytes: %v", len(msg), err)
	}
	if string(got) != msg {
		t.Fatalf("read %q, want %q", got, msg)
	}
}

// readAll reads c until an error, and returns what came and that error.
func readAll(t *testing.T, c net.Conn) ([]byte, error) {
	t.Helper()
	type all struct {
		data []byte
		err  error
	}
	r := within(t, "read to the end", func() all {
		var data []byte
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			data = append(data, buf[:n]...)
			if err != nil {
				return all{data, err}
			}
		}
	})
	return r.data, r.err
}

// ioResult is what a Read or Write returned.
type ioResult struct {
	n   int
	err error
}

func readOp(c net.Conn) func() (int, error) {
	return func() (int, error) { return c.Read(make([]byte, 64)) }
}

// waiting starts op on a thread of its own and returns once op surely
// waits, as /proc shows: parked in Go's poller (its locked thread sleeps in
// futex), or, when spinning, making read calls over and over (a parked
// read makes one or two). So a
// test acts on a waiting call, not on one that a sleep hoped was waiting.
func waiting(t *testing.T, spinning bool, op func() (int, error)) <-chan ioResult {
	t.Helper()
	tids := make(chan int, 1)
	res := make(chan ioResult, 1)
	go func() {
		goruntime.LockOSThread()
		defer goruntime.UnlockOSThread()
		tids <- syscall.Gettid()
		n, err := op()
		res <- ioResult{n, err}
	}()
	task := fmt.Sprintf("/proc/self/task/%d/", await(t, tids, "thread id"))
	cond := func() bool {
		b, err := os.ReadFile(task + "syscall")
		return err == nil && strings.HasPrefix(string(b), strconv.Itoa(syscall.SYS_FUTEX)+" ")
	}
	if spinning {
		reads := func() int64 {
			b, err := os.ReadFile(task + "io")
			if err != nil {
				t.Fatal(err)
			}
			_, v, _ := strings.Cut(string(b), "syscr: ")
			v, _, _ = strings.Cut(v, "\n")
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("syscr in %sio: %v", task, err)
			}
			return n
		}
		first := reads()
		cond = func() bool { return reads() >= first+100 }
	}
	end := time.Now().Add(fdWait)
	for !cond() {
		select {
		case r := <-res:
			t.Fatalf("returned (%d, %v) before it waited", r.n, r.err)
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(end) {
			t.Fatalf("not waiting (spinning %v) after %v", spinning, fdWait)
		}
	}
	return res
}

// wantDeadline fails the test unless err is the deadline error as
// net.TCPConn gives it. crypto/tls keeps a connection usable after a read
// error only if the error is a net.Error whose Temporary() is true
// (readRecordOrCCS); any other error breaks the tls.Conn for good, and the
// runtime's interrupt (a past read deadline) relies on it going on.
func wantDeadline(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: err = %v, want os.ErrDeadlineExceeded", what, err)
	}
	ne, ok := err.(net.Error)
	if !ok || !ne.Timeout() || !ne.Temporary() {
		t.Fatalf("%s: err = %#v, want a net.Error with Timeout() and Temporary() true", what, err)
	}
}

func wantClosed(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, net.ErrClosed) {
		t.Errorf("%s: err = %v, want net.ErrClosed", what, err)
	}
}

// wantFds fails the test unless fcntl(fd, F_GETFD) gives want (0: open,
// EBADF: closed) for every fd. Nothing may open files meanwhile, or a
// closed number could be taken again.
func wantFds(t *testing.T, what string, want syscall.Errno, fds ...int) {
	t.Helper()
	for _, fd := range fds {
		if _, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFD, 0); e != want {
			t.Errorf("%s: fcntl(%d, F_GETFD) = %v, want %v", what, fd, e, want)
		}
	}
}

func sysfd(t *testing.T, c *net.TCPConn) int {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	fd := -1
	if err := rc.Control(func(s uintptr) { fd = int(s) }); err != nil {
		t.Fatal(err)
	}
	return fd
}

func TestFdConnData(t *testing.T) {
	for _, spin := range []time.Duration{0, time.Millisecond} {
		t.Run(fmt.Sprintf("spin=%v", spin), func(t *testing.T) {
			a, b := tcpPair(t)
			fa, fb := own(t, a, spin), own(t, b, spin)
			for i := 1; i <= 100; i++ {
				msg := strings.Repeat(string(rune('a'+i%26)), i)
				send(t, fa, fb, msg)
				send(t, fb, fa, msg)
			}

			// 8 MiB each way at once: a reader and a writer on each end.
			ab, ba := make([]byte, 8<<20), make([]byte, 8<<20)
			rand.Read(ab)
			rand.Read(ba)
			gotAB, gotBA := make([]byte, len(ab)), make([]byte, len(ba))
			errs := make(chan error, 4)
			for _, f := range []func() error{
				func() error { _, err := fa.Write(ab); return err },
				func() error { _, err := fb.Write(ba); return err },
				func() error { _, err := io.ReadFull(fb, gotAB); return err },
				func() error { _, err := io.ReadFull(fa, gotBA); return err },
			} {
				go func() { errs <- f() }()
			}
			for range 4 {
				if err := await(t, errs, "8 MiB each way"); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(gotAB, ab) || !bytes.Equal(gotBA, ba) {
				t.Fatal("8 MiB came out different from what went in")
			}
		})
	}
}

func TestFdConnInterrupt(t *testing.T) {
	for _, tc := range []struct {
		name string
		spin time.Duration
	}{
		{"parked", 0},
		{"spinning", spinLong},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := tcpPair(t)
			fc := own(t, a, tc.spin)
			res := waiting(t, tc.spin > 0, readOp(fc))
			if err := fc.SetReadDeadline(time.Unix(1, 0)); err != nil {
				t.Fatal(err)
			}
			wantDeadline(t, "interrupted Read", await(t, res, "interrupted Read").err)
			if err := fc.SetReadDeadline(time.Time{}); err != nil {
				t.Fatal(err)
			}
			send(t, b, fc, "after the deadline was cleared")
		})
	}
}

func TestFdConnReadDeadline(t *testing.T) {
	for _, spin := range []time.Duration{0, spinLong} {
		t.Run(fmt.Sprintf("spin=%v", spin), func(t *testing.T) {
			a, _ := tcpPair(t)
			fc := own(t, a, spin)
			if err := fc.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
				t.Fatal(err)
			}
			wantDeadline(t, "Read with no data", within(t, "Read", func() error { _, err := readOp(fc)(); return err }))
		})
	}
}

func TestFdConnClose(t *testing.T) {
	for _, tc := range []struct {
		name string
		spin time.Duration
		op   func(c net.Conn) func() (int, error)
	}{
		{"read", 0, readOp},
		{"spinning read", spinLong, readOp},
		{"write", 0, func(c net.Conn) func() (int, error) {
			// far more than the shrunk buffers of both ends hold
			return func() (int, error) { return c.Write(make([]byte, 16<<20)) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := tcpPair(t)
			shrink(t, a, b)
			orig := sysfd(t, a)
			fc := own(t, a, tc.spin)
			wantFds(t, "original socket after ownConn", syscall.EBADF, orig)
			fds := []int{fc.fd}
			wantFds(t, "before Close", 0, fds...)
			res := waiting(t, tc.spin > 0, tc.op(fc))
			if err := within(t, "Close", fc.Close); err != nil {
				t.Fatalf("Close: %v", err)
			}
			wantFds(t, "after Close", syscall.EBADF, fds...)
			wantClosed(t, "blocked "+tc.name, await(t, res, "blocked "+tc.name).err)

			wantClosed(t, "second Close", within(t, "second Close", fc.Close))
			_, err := fc.Read(make([]byte, 1))
			wantClosed(t, "Read after Close", err)
			_, err = fc.Write([]byte{1})
			wantClosed(t, "Write after Close", err)
			wantClosed(t, "SetReadDeadline after Close", fc.SetReadDeadline(time.Now()))
			wantClosed(t, "SetWriteDeadline after Close", fc.SetWriteDeadline(time.Now()))
		})
	}
}

func TestFdConnPeerClose(t *testing.T) {
	for _, spin := range []time.Duration{0, spinLong} {
		t.Run(fmt.Sprintf("spin=%v", spin), func(t *testing.T) {
			a, b := tcpPair(t)
			fc := own(t, a, spin)
			res := waiting(t, spin > 0, readOp(fc))
			b.Close()
			// Exactly io.EOF, unwrapped: TLS and the runtime test for it
			// with errors.Is, and much of the standard library with ==.
			wantEOF := func(what string, r ioResult) {
				t.Helper()
				if r.n != 0 || r.err != io.EOF {
					t.Fatalf("%s = (%d, %v), want (0, io.EOF)", what, r.n, r.err)
				}
			}
			wantEOF("Read waiting when the peer closed", await(t, res, "Read"))
			wantEOF("next Read", within(t, "next Read", func() ioResult {
				n, err := readOp(fc)()
				return ioResult{n, err}
			}))
		})
	}
}

func TestFdConnPeerReset(t *testing.T) {
	a, b := tcpPair(t)
	fc := own(t, a, 0)
	res := waiting(t, false, readOp(fc))
	if err := b.SetLinger(0); err != nil {
		t.Fatal(err)
	}
	b.Close() // a reset, as linger is 0
	// The read takes the reset's error; only a later call sees EPIPE.
	if r := await(t, res, "Read after the peer reset"); !errors.Is(r.err, syscall.ECONNRESET) {
		t.Fatalf("Read after the peer reset = (%d, %v), want ECONNRESET", r.n, r.err)
	}

	// A SIGPIPE would not kill a Go program (Go ignores it on sockets), but
	// would a C program embedding libsperli. It is raised in the write, so
	// it reaches the channel before a SIGWINCH sent after the write.
	sigs := make(chan os.Signal, 2)
	ossignal.Notify(sigs, syscall.SIGPIPE, syscall.SIGWINCH)
	defer ossignal.Stop(sigs)
	if _, err := fc.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("Write after the peer reset: err = %v, want EPIPE or ECONNRESET", err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGWINCH); err != nil {
		t.Fatal(err)
	}
	if s := await(t, sigs, "SIGWINCH"); s != syscall.SIGWINCH {
		t.Fatalf("Write after the peer reset raised %v", s)
	}
}

func TestFdConnWriteDeadline(t *testing.T) {
	a, b := tcpPair(t)
	shrink(t, a, b)
	fc := own(t, a, 0)
	data := make([]byte, 16<<20)
	rand.Read(data)
	r := within(t, "Write", func() ioResult {
		if err := fc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
			return ioResult{-1, err}
		}
		n, err := fc.Write(data)
		return ioResult{n, err}
	})
	wantDeadline(t, "Write to a peer that does not read", r.err)
	if r.n >= len(data) {
		t.Fatalf("Write to a peer that does not read = %d bytes, want fewer than %d", r.n, len(data))
	}
	if err := within(t, "Close", fc.Close); err != nil {
		t.Fatal(err)
	}
	got, err := readAll(t, b)
	if err != io.EOF || len(got) != r.n || !bytes.HasPrefix(data, got) {
		t.Fatalf("the peer read %d bytes (a prefix of what was written: %v), then %v; want the %d bytes Write reported, then EOF",
			len(got), bytes.HasPrefix(data, got), err, r.n)
	}
}

func TestOwnConnNotTCP(t *testing.T) {
	p, q := net.Pipe()
	defer p.Close()
	defer q.Close()
	if got, err := ownConn(p); got != p || err != nil {
		t.Fatalf("ownConn(net.Pipe end) = %v, %v; want it unchanged, nil", got, err)
	}
}

func TestOwnConnAddrs(t *testing.T) {
	a, _ := tcpPair(t)
	laddr, raddr := a.LocalAddr(), a.RemoteAddr()
	fc := own(t, a, 0)
	for _, c := range []struct {
		what      string
		got, want net.Addr
	}{
		{"LocalAddr", fc.LocalAddr(), laddr},
		{"RemoteAddr", fc.RemoteAddr(), raddr},
	} {
		if c.got.Network() != c.want.Network() || c.got.String() != c.want.String() {
			t.Errorf("%s() = %s %s, want %s %s", c.what, c.got.Network(), c.got, c.want.Network(), c.want)
		}
	}
}

// selfSigned returns a certificate for the name "fdconn.test", of a new
// Ed25519 key, that is its own issuer, and a pool that trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "fdconn.test"},
		DNSNames:              []string{"fdconn.test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv, Leaf: leaf}, pool
}

func TestFdConnTLS(t *testing.T) {
	cert, pool := selfSigned(t)
	cfg := &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ServerName:   "fdconn.test",
		MinVersion:   tls.VersionTLS13,
	}
	a, b := tcpPair(t)
	client, server := tls.Client(own(t, a, 0), cfg), tls.Server(own(t, b, time.Millisecond), cfg)
	ctx, cancel := context.WithTimeout(context.Background(), fdWait)
	defer cancel()
	shook := make(chan error, 1)
	go func() { shook <- server.HandshakeContext(ctx) }()
	if err := client.HandshakeContext(ctx); err != nil {
		t.Fatalf("client handshake: %v", err)
	}
	if err := await(t, shook, "server handshake"); err != nil {
		t.Fatalf("server handshake: %v", err)
	}
	for _, c := range []*tls.Conn{client, server} {
		if st := c.ConnectionState(); st.Version != tls.VersionTLS13 || len(st.PeerCertificates) != 1 {
			t.Fatalf("TLS version %x with %d peer certificates, want TLS 1.3 with 1", st.Version, len(st.PeerCertificates))
		}
	}

	send(t, server, client, "first record")
	res := waiting(t, false, readOp(client))
	if err := client.SetReadDeadline(time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	wantDeadline(t, "interrupted tls Read", await(t, res, "interrupted tls Read").err)
	if err := client.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	send(t, server, client, "second record, after the interrupted read")
	send(t, client, server, "and back")
}

// TestFdConnDeadlineEdges: a deadline past 2262 is as good as none (not
// "long past" through an overflow); a read deadline already passed wins
// over data waiting; a zero-length write after Close is net.ErrClosed — all
// as net.TCPConn.
func TestFdConnDeadlineEdges(t *testing.T) {
	a, b := tcpPair(t)
	fc := own(t, a, 0)
	if err := fc.SetDeadline(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	send(t, fc, b, "far")
	send(t, b, fc, "far")
	if _, err := b.Write([]byte("waiting")); err != nil {
		t.Fatal(err)
	}
	fc.SetReadDeadline(time.Unix(1, 0))
	buf := make([]byte, 16)
	if n, err := fc.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past its deadline with data waiting = %d, %v; want the deadline error", n, err)
	}
	fc.Close()
	if n, err := fc.Write(nil); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write(nil) after Close = %d, %v; want net.ErrClosed", n, err)
	}
}

// TestUnreadBytes: the bytes a peer sent and no read took are counted
// under every wrapping the mesh gives a connection (the cork of Go's
// poller, an fdConn of this package's), and none once they are read; a
// connection with no descriptor counts none.
func TestUnreadBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(t *testing.T, c *net.TCPConn) net.Conn
	}{
		{"poller", func(t *testing.T, c *net.TCPConn) net.Conn { return &corkConn{Conn: c} }},
		{"fdConn", func(t *testing.T, c *net.TCPConn) net.Conn { return &corkConn{Conn: own(t, c, 0)} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from, to := tcpPair(t)
			conn := tc.wrap(t, to)
			if n := unreadBytes(below(conn)); n != 0 {
				t.Fatalf("before anything was sent: %d unread bytes, want 0", n)
			}
			if _, err := from.Write([]byte("seven b")); err != nil {
				t.Fatal(err)
			}
			// Loopback hands the bytes over within the write; wait a
			// bounded while for them all the same.
			deadline := time.Now().Add(fdWait)
			for unreadBytes(below(conn)) < 7 && time.Now().Before(deadline) {
				goruntime.Gosched()
			}
			if n := unreadBytes(below(conn)); n != 7 {
				t.Fatalf("after 7 bytes came: %d unread, want 7", n)
			}
			got := make([]byte, 7)
			if _, err := io.ReadFull(conn, got); err != nil {
				t.Fatal(err)
			}
			if n := unreadBytes(below(conn)); n != 0 {
				t.Fatalf("after they were read: %d unread, want 0", n)
			}
		})
	}
	if n := unreadBytes(nil); n != 0 {
		t.Errorf("unreadBytes(nil) = %d, want 0", n)
	}
}
