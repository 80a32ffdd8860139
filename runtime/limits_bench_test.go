package runtime_test

import (
	"crypto/aes"
	"crypto/cipher"
	"testing"
)

// The machine's limits that docs/benchmarks.md sets beside the collectives'
// figures: AES-GCM sealing and opening one TLS record (16 KiB) on one
// core — every byte a Sperli rank sends is sealed once and opened once —
// and a copy in cache (a record) and out of it (16 MiB).
//
//	go test -run '^$' -bench 'AESGCM|Copy' -count 3 ./runtime/

func gcm(b *testing.B) cipher.AEAD {
	blk, err := aes.NewCipher(make([]byte, 16))
	if err != nil {
		b.Fatal(err)
	}
	g, err := cipher.NewGCM(blk)
	if err != nil {
		b.Fatal(err)
	}
	return g
}

func BenchmarkAESGCMSeal16K(b *testing.B) {
	g := gcm(b)
	nonce, p := make([]byte, g.NonceSize()), make([]byte, 16<<10)
	out := make([]byte, 0, len(p)+g.Overhead())
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		out = g.Seal(out[:0], nonce, p, nil)
	}
}

func BenchmarkAESGCMOpen16K(b *testing.B) {
	g := gcm(b)
	nonce, p := make([]byte, g.NonceSize()), make([]byte, 16<<10)
	ct := g.Seal(nil, nonce, p, nil)
	out := make([]byte, 0, len(p))
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		var err error
		if out, err = g.Open(out[:0], nonce, ct, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func benchCopy(b *testing.B, n int) {
	src, dst := make([]byte, n), make([]byte, n)
	b.SetBytes(int64(n))
	for b.Loop() {
		copy(dst, src)
	}
}

func BenchmarkCopy16K(b *testing.B)   { benchCopy(b, 16<<10) }
func BenchmarkCopy16MiB(b *testing.B) { benchCopy(b, 16<<20) }
