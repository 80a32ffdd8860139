package runtime

import (
	"math/bits"
	"sync"
)

// Receive buffers. Every frame's payload is read into a buffer of its own,
// which the receiver then owns. A large fresh buffer costs more than the
// bytes it holds — zeroing, page faults on new memory, a garbage collection
// every few messages — so payloads of poolMin bytes or more come from
// per-size-class pools (powers of two up to the frame limit), and Release
// hands a buffer back. Release is optional: a buffer never released is
// collected as any other.
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

// getBuf returns a buffer of n bytes whose contents are arbitrary.
func getBuf(n int) []byte {
	k := sizeClass(n)
	if k < 0 {
		return make([]byte, n)
	}
	if p, ok := payloadPools[k].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return make([]byte, n, 1<<k)
}

// putBuf keeps b for a later getBuf if it came from one. Only such a b
// costs the allocation of the pointer the pool keeps (whole is its own
// variable: were it b, every call would move b to the heap).
func putBuf(b []byte) {
	c := cap(b)
	k := sizeClass(c)
	if k < 0 || c != 1<<k {
		return
	}
	whole := b[:c]
	payloadPools[k].Put(&whole)
}

// Release hands a message this rank received (from Recv, FinishRecv or a
// collective's result) back to the runtime, which may reuse its memory for
// a later message: the caller must not use msg, or any slice of it, after
// the call. It is optional and never required for correctness; a program
// that receives many large messages runs faster with it, as an MPI program
// receives into the same buffer again.
func (c *Comm) Release(msg []byte) { putBuf(msg) }
