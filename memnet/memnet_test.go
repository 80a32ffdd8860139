package memnet

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

func pair(t *testing.T, size int) (*Conn, *Conn) {
	t.Helper()
	a, b := Pipe(size, addrOf("127.0.0.1", 1), addrOf("127.0.0.1", 2))
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// Bytes written arrive whole and in order, whatever the buffer and the
// pieces, with a writer that blocks while the buffer is full.
func TestBytesInOrder(t *testing.T) {
	data := make([]byte, 3<<20+17)
	rand.Read(data)
	for _, size := range []int{1, 7, 4096, DefaultBuffer} {
		a, b := pair(t, size)
		data := data
		if size < 4096 {
			data = data[:64<<10+3]
		}
		done := make(chan error, 1)
		go func() {
			for rest := data; len(rest) > 0; {
				n := min(len(rest), 65537)
				if _, err := a.Write(rest[:n]); err != nil {
					done <- err
					return
				}
				rest = rest[n:]
			}
			done <- a.CloseWrite()
		}()
		got, err := io.ReadAll(b)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("buffer %d: read %d bytes (%v), want the %d written, equal", size, len(got), err, len(data))
		}
		if err := <-done; err != nil {
			t.Fatalf("buffer %d: write: %v", size, err)
		}
	}
}

// A deadline set while a read waits ends it with a timeout; a deadline in
// the past ends the next read at once, even with nothing to read; a
// cleared deadline lets reads wait again.
func TestReadDeadline(t *testing.T) {
	a, b := pair(t, 64)
	errc := make(chan error, 1)
	go func() {
		_, err := b.Read(make([]byte, 8))
		errc <- err
	}()
	b.SetReadDeadline(time.Unix(1, 0))
	err := <-errc
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after the deadline: %v, want a timeout", err)
	}
	b.SetReadDeadline(time.Time{})
	a.Write([]byte("hi"))
	buf := make([]byte, 8)
	if n, err := b.Read(buf); err != nil || string(buf[:n]) != "hi" {
		t.Fatalf("read after the deadline was cleared: %q, %v", buf[:n], err)
	}
}

// A write that waits for room ends at its deadline with what it wrote.
func TestWriteDeadline(t *testing.T) {
	a, _ := pair(t, 4)
	a.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
	n, err := a.Write([]byte("0123456789"))
	if n != 4 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write into a full buffer = %d, %v; want 4 and a timeout", n, err)
	}
}

// Close: the peer reads what was written, then EOF; its writes fail with
// EPIPE; waiting calls of the closed end return ErrClosed.
func TestClose(t *testing.T) {
	a, b := pair(t, 64)
	errc := make(chan error, 1)
	go func() {
		_, err := a.Read(make([]byte, 1))
		errc <- err
	}()
	a.Write([]byte("last"))
	a.Close()
	if err := <-errc; !errors.Is(err, net.ErrClosed) {
		t.Errorf("a waiting read of the closed end: %v, want ErrClosed", err)
	}
	got, err := io.ReadAll(b)
	if err != nil || string(got) != "last" {
		t.Errorf("the peer read %q, %v; want \"last\" then EOF", got, err)
	}
	if _, err := b.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
		t.Errorf("write to a closed peer: %v, want EPIPE", err)
	}
	if err := a.Close(); err == nil {
		t.Errorf("a second Close returned nil")
	}
}

// Listen, Dial, Accept: a dial nobody listens for is refused; a second
// listener at an address is EADDRINUSE; a wildcard listener takes dials
// to its port of any host; a closed listener refuses.
func TestListenDial(t *testing.T) {
	n := New()
	if _, err := n.Dial("127.0.0.1:9"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial with no listener: %v, want ECONNREFUSED", err)
	}
	ln, err := n.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if _, err := n.Listen(ln.Addr().String()); !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("listen at a taken address: %v, want EADDRINUSE", err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := ln.Accept()
		if err != nil {
			t.Error(err)
			return
		}
		io.Copy(c, c)
		c.Close()
	}()
	c, err := n.Dial(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("echo"))
	c.(*Conn).CloseWrite()
	if got, err := io.ReadAll(c); err != nil || string(got) != "echo" {
		t.Errorf("echo: %q, %v", got, err)
	}
	wg.Wait()
	ln.Close()
	if _, err := n.Dial(ln.Addr().String()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial to a closed listener: %v, want ECONNREFUSED", err)
	}
	any, err := n.Listen(":7000")
	if err != nil {
		t.Fatal(err)
	}
	defer any.Close()
	if _, err := n.Listen("10.1.2.3:7000"); !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("listen at a host's port a wildcard holds: %v, want EADDRINUSE", err)
	}
	go func() {
		if c, err := any.Accept(); err == nil {
			c.Close()
		}
	}()
	if c, err := n.Dial("host-b:7000"); err != nil {
		t.Errorf("dial to a wildcard's port: %v", err)
	} else {
		c.Close()
	}
	if port < firstPort {
		t.Errorf("port 0 gave %d, want one from %d", port, firstPort)
	}
}

// A dial waits while the backlog is full and ends with its context.
func TestDialBacklog(t *testing.T) {
	n := New()
	ln, err := n.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for i := 0; i < backlog; i++ {
		if _, err := n.Dial(ln.Addr().String()); err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := n.DialContext(ctx, ln.Addr().String())
		errc <- err
	}()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("dial into a full backlog, cancelled: %v", err)
	}
}

// With a latency, bytes written at t are read at t+latency, in order and
// whole, also when writes come faster than the latency; a close is read
// after the bytes before it. The clock is testing/synctest's.
func TestLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lat = 3 * time.Millisecond
		n := New()
		n.Latency = lat
		ln, err := n.Listen("127.0.0.1:7000")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		a, err := n.Dial("127.0.0.1:7000")
		if err != nil {
			t.Fatal(err)
		}
		b, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		go func() {
			for i := range 5 {
				a.Write([]byte{byte(i)})
				time.Sleep(time.Millisecond)
			}
			a.Close()
		}()
		buf := make([]byte, 8)
		for i := range 5 {
			k, err := b.Read(buf)
			if err != nil || k != 1 || buf[0] != byte(i) {
				t.Fatalf("read %d: %d bytes %v, %v; want byte %d", i, k, buf[:k], err, i)
			}
			if got, want := time.Since(start), lat+time.Duration(i)*time.Millisecond; got != want {
				t.Fatalf("byte %d read at %v, want %v", i, got, want)
			}
		}
		if _, err := b.Read(buf); err != io.EOF {
			t.Fatalf("after the bytes: %v, want io.EOF", err)
		}
		b.Close()
	})
}
