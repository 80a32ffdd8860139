package mesh

import (
	"bytes"
	"io"
	"net"
	"testing"
)

// srcConn serves reads from data, at most chunk bytes each (a socket that
// holds chunk bytes at a time), recording the size of each read asked of
// it, and returns io.EOF at the end.
type srcConn struct {
	net.Conn
	data  []byte
	chunk int
	asks  []int
}

func (s *srcConn) Read(b []byte) (int, error) {
	s.asks = append(s.asks, len(b))
	if len(s.data) == 0 {
		return 0, io.EOF
	}
	n := copy(b[:min(len(b), s.chunk)], s.data)
	s.data = s.data[n:]
	return n, nil
}

// TestGulpFewReadsBelow: while gulping, reads of a record's size are served
// from one read below of gulpSize, the bytes unchanged and in order, and
// what waits in the buffer is counted (Unread); once gulping ends and the
// buffer is drained, the buffer goes back and reads pass through as asked.
func TestGulpFewReadsBelow(t *testing.T) {
	data := pattern(3*gulpSize + 1000)
	src := &srcConn{data: data, chunk: 1 << 30}
	c := &corkConn{Conn: src}
	var got []byte
	b := make([]byte, 16384+5)

	c.setGulp(true)
	for len(got) < 2*gulpSize {
		n, err := c.Read(b)
		if err != nil {
			t.Fatalf("gulping read: %v", err)
		}
		got = append(got, b[:n]...)
		if want := int64(gulpSize - len(got)%gulpSize); len(got)%gulpSize != 0 && c.gulped() != want {
			t.Fatalf("after %d bytes gulped() = %d, want %d", len(got), c.gulped(), want)
		}
	}
	if len(src.asks) != 2 || src.asks[0] != gulpSize || src.asks[1] != gulpSize {
		t.Fatalf("reads below while gulping: %v, want two of %d", src.asks, gulpSize)
	}
	// A third gulp, then the end of gulping midway: the rest of the
	// buffer is still handed out first, then the buffer goes back.
	n, err := c.Read(b)
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, b[:n]...)
	c.setGulp(false)
	if c.rbuf == nil || c.gulped() != int64(gulpSize-n) {
		t.Fatalf("gulping ended with %d bytes unread: rbuf %v, gulped %d", gulpSize-n, c.rbuf != nil, c.gulped())
	}
	for c.gulped() > 0 {
		n, err := c.Read(b)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, b[:n]...)
	}
	if c.rbuf != nil {
		t.Fatal("the drained buffer was kept after gulping ended")
	}
	asked := len(src.asks)
	for {
		n, err := c.Read(b)
		got = append(got, b[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range src.asks[asked:] {
		if a != len(b) {
			t.Fatalf("a read not gulping asked below for %d bytes, want the caller's %d", a, len(b))
		}
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, not the %d written (or not in order)", len(got), len(data))
	}
}

// TestGulpShortSocket: a socket that holds less than gulpSize gives what
// it holds; a read larger than gulpSize goes below directly.
func TestGulpShortSocket(t *testing.T) {
	data := pattern(3 * gulpSize)
	src := &srcConn{data: data, chunk: 40000}
	c := &corkConn{Conn: src}
	c.setGulp(true)
	b := make([]byte, 16384)
	n, err := c.Read(b)
	if err != nil || n != len(b) || c.gulped() != 40000-int64(len(b)) {
		t.Fatalf("Read = %d, %v, gulped %d; want %d, nil, %d", n, err, c.gulped(), len(b), 40000-len(b))
	}
	got := append([]byte(nil), b[:n]...)
	for c.gulped() > 0 {
		n, _ := c.Read(b)
		got = append(got, b[:n]...)
	}
	big := make([]byte, gulpSize)
	asked := len(src.asks)
	n, err = c.Read(big)
	if err != nil || n != 40000 || len(src.asks) != asked+1 || src.asks[asked] != gulpSize {
		t.Fatalf("a read of gulpSize: %d, %v, asks %v", n, err, src.asks[asked:])
	}
	got = append(got, big[:n]...)
	if !bytes.Equal(got, data[:len(got)]) {
		t.Fatal("the bytes changed on the way")
	}
}
