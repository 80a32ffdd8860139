package mesh

import (
	"bytes"
	"errors"
	"net"
	"testing"
)

// recConn records every Write it gets, and fails them once failAfter
// writes went through (failAfter < 0: never).
type recConn struct {
	net.Conn
	writes    [][]byte
	failAfter int
}

var errRec = errors.New("recConn: write refused")

func (r *recConn) Write(b []byte) (int, error) {
	if r.failAfter >= 0 && len(r.writes) >= r.failAfter {
		return 0, errRec
	}
	r.writes = append(r.writes, append([]byte(nil), b...))
	return len(b), nil
}

func (r *recConn) sizes() []int {
	var s []int
	for _, w := range r.writes {
		s = append(s, len(w))
	}
	return s
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

// TestCorkGathers: uncorked, every write goes through as it is; corked,
// records gather into writes of corkSize and the rest at uncork, the bytes
// unchanged and in order.
func TestCorkGathers(t *testing.T) {
	rec := &recConn{failAfter: -1}
	c := &corkConn{Conn: rec}
	if n, err := c.Write([]byte("small")); n != 5 || err != nil || len(rec.writes) != 1 {
		t.Fatalf("uncorked write = %d, %v, %d writes below; want 5, nil, 1", n, err, len(rec.writes))
	}
	data := pattern(40*16384 + 100) // 40 full records and a short one
	c.cork()
	for off := 0; off < len(data); off += 16384 {
		end := min(off+16384, len(data))
		if n, err := c.Write(data[off:end]); n != end-off || err != nil {
			t.Fatalf("corked write = %d, %v", n, err)
		}
	}
	if got := rec.sizes(); len(got) != 3 || got[1] != corkSize || got[2] != corkSize {
		t.Fatalf("before uncork the writes below were %v, want [5 %d %d]", got, corkSize, corkSize)
	}
	if err := c.uncork(); err != nil {
		t.Fatal(err)
	}
	if err := c.uncork(); err != nil || len(rec.writes) != 4 {
		t.Fatalf("a second uncork wrote again or failed: %v, %v", rec.sizes(), err)
	}
	if got := bytes.Join(rec.writes[1:], nil); !bytes.Equal(got, data) {
		t.Fatalf("the corked bytes arrived changed (%d bytes, want %d)", len(got), len(data))
	}
	if _, err := c.Write([]byte("after")); err != nil || string(rec.writes[4]) != "after" {
		t.Fatalf("after uncork a write is not passed through: %v %v", rec.sizes(), err)
	}
}

// TestCorkErrors: a failing write below is returned by the corked Write
// that filled the buffer, or by uncork; the buffer does not keep the bytes
// for a later write.
func TestCorkErrors(t *testing.T) {
	rec := &recConn{failAfter: 0}
	c := &corkConn{Conn: rec}
	c.cork()
	if n, err := c.Write(pattern(corkSize + 10)); !errors.Is(err, errRec) || n != corkSize {
		t.Fatalf("Write filling the buffer = %d, %v; want %d and the error below", n, err, corkSize)
	}
	c.cork()
	if _, err := c.Write([]byte("tail")); err != nil {
		t.Fatalf("a write that fits gathers: %v", err)
	}
	if err := c.uncork(); !errors.Is(err, errRec) {
		t.Fatalf("uncork = %v, want the error below", err)
	}
	if len(c.buf) != 0 {
		t.Fatalf("after a failed flush the buffer keeps %d bytes", len(c.buf))
	}
}
