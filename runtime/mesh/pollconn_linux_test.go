//go:build linux

package mesh

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	ossignal "os/signal"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pollOf wraps c in a pollConn, failing the test if it is not one.
func pollOf(t *testing.T, c *net.TCPConn) *pollConn {
	t.Helper()
	pc, ok := pollOwn(c).(*pollConn)
	if !ok {
		t.Fatalf("pollOwn(%T) is not a *pollConn", c)
	}
	return pc
}

// TestPollConn: a pollConn (raw reads and writes, waits in Go's poller)
// behaves as the net.TCPConn it wraps: data both ways, large writes that
// wait for the reader, deadlines that end a waiting read or write, Close
// ending a waiting op with net.ErrClosed, exactly io.EOF after the peer's
// close, ECONNRESET after its reset and EPIPE, never SIGPIPE, for a write
// after it.
func TestPollConn(t *testing.T) {
	t.Run("data", func(t *testing.T) {
		a, b := tcpPair(t)
		pa, pb := pollOf(t, a), pollOf(t, b)
		for i := 1; i <= 100; i++ {
			msg := strings.Repeat(string(rune('a'+i%26)), i)
			send(t, pa, pb, msg)
			send(t, pb, pa, msg)
		}
		shrink(t, a, b) // an 8 MiB write then waits for the reader many times
		ab, ba := make([]byte, 8<<20), make([]byte, 8<<20)
		rand.Read(ab)
		rand.Read(ba)
		gotAB, gotBA := make([]byte, len(ab)), make([]byte, len(ba))
		errs := make(chan error, 4)
		for _, f := range []func() error{
			func() error { _, err := pa.Write(ab); return err },
			func() error { _, err := pb.Write(ba); return err },
			func() error { _, err := io.ReadFull(pb, gotAB); return err },
			func() error { _, err := io.ReadFull(pa, gotBA); return err },
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
	t.Run("read deadline", func(t *testing.T) {
		a, b := tcpPair(t)
		pa := pollOf(t, a)
		res := waiting(t, false, readOp(pa))
		if err := pa.SetReadDeadline(time.Unix(1, 0)); err != nil {
			t.Fatal(err)
		}
		wantDeadline(t, "interrupted Read", await(t, res, "interrupted Read").err)
		if err := pa.SetReadDeadline(time.Time{}); err != nil {
			t.Fatal(err)
		}
		send(t, b, pa, "after the deadline was cleared")
	})
	t.Run("write deadline", func(t *testing.T) {
		a, b := tcpPair(t)
		shrink(t, a, b)
		pa := pollOf(t, a)
		data := make([]byte, 16<<20)
		rand.Read(data)
		r := within(t, "Write", func() ioResult {
			if err := pa.SetWriteDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
				return ioResult{-1, err}
			}
			n, err := pa.Write(data)
			return ioResult{n, err}
		})
		wantDeadline(t, "Write to a peer that does not read", r.err)
		if r.n <= 0 || r.n >= len(data) {
			t.Fatalf("Write to a peer that does not read = %d bytes, want some but fewer than %d", r.n, len(data))
		}
		if err := pa.Close(); err != nil {
			t.Fatal(err)
		}
		got, err := readAll(t, b)
		if err != io.EOF || len(got) != r.n || !bytes.HasPrefix(data, got) {
			t.Fatalf("the peer read %d bytes (a prefix: %v), then %v; want the %d bytes Write reported, then EOF", len(got), bytes.HasPrefix(data, got), err, r.n)
		}
	})
	for _, tc := range []struct {
		name string
		op   func(c net.Conn) func() (int, error)
	}{
		{"close a read", readOp},
		{"close a write", func(c net.Conn) func() (int, error) {
			return func() (int, error) { return c.Write(make([]byte, 16<<20)) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := tcpPair(t)
			shrink(t, a, b)
			pa := pollOf(t, a)
			res := waiting(t, false, tc.op(pa))
			if err := pa.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			wantClosed(t, tc.name, await(t, res, tc.name).err)
			_, err := pa.Read(make([]byte, 1))
			wantClosed(t, "Read after Close", err)
			_, err = pa.Write([]byte{1})
			wantClosed(t, "Write after Close", err)
		})
	}
	t.Run("peer close", func(t *testing.T) {
		a, b := tcpPair(t)
		pa := pollOf(t, a)
		res := waiting(t, false, readOp(pa))
		b.Close()
		for _, r := range []ioResult{await(t, res, "Read"), within(t, "next Read", func() ioResult { n, err := readOp(pa)(); return ioResult{n, err} })} {
			if r.n != 0 || r.err != io.EOF {
				t.Fatalf("Read after the peer closed = (%d, %v), want (0, io.EOF) unwrapped", r.n, r.err)
			}
		}
	})
	t.Run("peer reset", func(t *testing.T) {
		a, b := tcpPair(t)
		pa := pollOf(t, a)
		res := waiting(t, false, readOp(pa))
		if err := b.SetLinger(0); err != nil {
			t.Fatal(err)
		}
		b.Close()
		if r := await(t, res, "Read after the peer reset"); !errors.Is(r.err, syscall.ECONNRESET) {
			t.Fatalf("Read after the peer reset = (%d, %v), want ECONNRESET", r.n, r.err)
		}
		sigs := make(chan os.Signal, 2)
		ossignal.Notify(sigs, syscall.SIGPIPE, syscall.SIGWINCH)
		defer ossignal.Stop(sigs)
		if _, err := pa.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("Write after the peer reset: err = %v, want EPIPE or ECONNRESET", err)
		}
		if err := syscall.Kill(os.Getpid(), syscall.SIGWINCH); err != nil {
			t.Fatal(err)
		}
		if s := await(t, sigs, "SIGWINCH"); s != syscall.SIGWINCH {
			t.Fatalf("Write after the peer reset raised %v", s)
		}
	})
}

// TestWrapWithoutSpin: a connection that does not spin is a pollConn
// below its cork; one that spins an fdConn.
func TestWrapWithoutSpin(t *testing.T) {
	a, b := tcpPair(t)
	ca, err := Wrap(a, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := below(ca).(*pollConn); !ok {
		t.Fatalf("Wrap(conn, 0) is %T below its cork, want *pollConn", below(ca))
	}
	cb, err := Wrap(b, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cb.Close() })
	if _, ok := below(cb).(*fdConn); !ok {
		t.Fatalf("Wrap(conn, 1ms) is %T below its cork, want *fdConn", below(cb))
	}
	send(t, ca, cb, "through both")
	send(t, cb, ca, "and back")
}
