package bufpool

import "testing"

// TestSizeClass: buffers from 4 KiB to the 16 MiB limit come from the
// power of two at or above their size; others are not pooled.
func TestSizeClass(t *testing.T) {
	for _, tc := range []struct{ n, want int }{
		{0, -1}, {4095, -1}, {4096, 12}, {4097, 13}, {1 << 20, 20}, {1<<20 + 1, 21},
		{16 << 20, 24}, {16<<20 + 1, -1},
	} {
		if got := sizeClass(tc.n); got != tc.want {
			t.Errorf("sizeClass(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
}

// TestBufPool: Get gives exactly n bytes; a released buffer is reused
// for a size of its class and never for a larger one; buffers not from
// the pool (odd capacity, too small) are never kept.
func TestBufPool(t *testing.T) {
	b := Get(5000)
	if len(b) != 5000 || cap(b) != 8192 {
		t.Fatalf("Get(5000): len %d cap %d, want 5000 and 8192", len(b), cap(b))
	}
	b[0] = 'x'
	Put(b)
	// sync.Pool may drop what it holds (on a collection), so take until the
	// buffer comes back, a bounded number of times.
	found := false
	for i := 0; i < 100 && !found; i++ {
		c := Get(6000)
		if len(c) != 6000 || cap(c) != 8192 {
			t.Fatalf("Get(6000): len %d cap %d", len(c), cap(c))
		}
		found = &c[0] == &b[0]
		if !found {
			Put(b)
		}
	}
	if !found {
		t.Error("a released 8 KiB buffer was never handed out again")
	}
	odd := make([]byte, 5000, 6000)
	Put(odd)
	small := make([]byte, 100, 1024)
	Put(small)
	for i := 0; i < 50; i++ {
		if c := Get(5000); cap(c) != 8192 {
			t.Fatalf("Get(5000) gave capacity %d: a foreign buffer was pooled", cap(c))
		}
		if c := Get(100); cap(c) == 1024 && &c[0] == &small[0] {
			t.Fatal("a buffer below the pooled sizes was reused")
		}
	}
	big := Get(16 << 20)
	if len(big) != 16<<20 {
		t.Fatalf("Get(16 MiB) len %d", len(big))
	}
	if over := Get(16<<20 + 1); len(over) != 16<<20+1 {
		t.Fatalf("Get(16 MiB + 1) len %d", len(over))
	}
}

// TestPutBufForeignAllocatesNothing: handing back a buffer the pool does
// not keep (every collective frame of a few bytes is released) costs no
// allocation.
func TestPutBufForeignAllocatesNothing(t *testing.T) {
	small := make([]byte, 12)
	if n := testing.AllocsPerRun(100, func() { Put(small) }); n != 0 {
		t.Errorf("Put of a 12-byte buffer: %v allocations, want 0", n)
	}
}
