// Package bufpool holds the receive buffers of a rank. Every frame's
// payload is read into a buffer of its own, which the receiver then owns.
// A large fresh buffer costs more than the bytes it holds — zeroing, page
// faults on new memory, a garbage collection every few messages — so
// payloads of 4 KiB or more come from per-size-class pools (powers of two
// up to the 16 MiB frame limit), and Put hands a buffer back
// (runtime.Comm.Release for a program). Put is optional: a buffer never
// put back is collected as any other.
package bufpool

import (
	"math/bits"
	"sync"
)

const (
	poolMinShift = 12 // 4 KiB: below it a fresh buffer is cheap
	poolMaxShift = 24 // 16 MiB, the largest payload
)

var payloadPools [poolMaxShift + 1]sync.Pool

// sizeClass is the power of two a buffer of n bytes comes from, or -1.
func sizeClass(n int) int {
	if n < 1<<poolMinShift || n > 1<<poolMaxShift {
		return -1
	}
	return bits.Len(uint(n - 1))
}

// Get returns a buffer of n bytes whose contents are arbitrary.
func Get(n int) []byte {
	k := sizeClass(n)
	if k < 0 {
		return make([]byte, n)
	}
	if p, ok := payloadPools[k].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return make([]byte, n, 1<<k)
}

// Put keeps b for a later Get if it came from one. Only such a b
// costs the allocation of the pointer the pool keeps (whole is its own
// variable: were it b, every call would move b to the heap).
func Put(b []byte) {
	c := cap(b)
	k := sizeClass(c)
	if k < 0 || c != 1<<k {
		return
	}
	whole := b[:c]
	payloadPools[k].Put(&whole)
}
