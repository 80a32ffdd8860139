package pki

import (
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"sync/atomic"

	"github.com/cloudflare/circl/sign/mldsa/mldsa44"

	"sperli/codes"
)

// The composite job key pairs ML-DSA-44 (FIPS 204) with Ed25519 (RFC 8032),
// so that a signature stands as long as either scheme does.
//
// A composite signature over msg in a domain is made over the message
//
//	M = "sperli-composite-v1" || 0x00 || len(domain) (1 byte) || domain || msg
//
// and is the concatenation
//
//	sig = ML-DSA-44.Sign(sk, M, ctx = "sperli")   2420 bytes, deterministic variant
//	   || Ed25519.Sign(sk, M)                      64 bytes, pure Ed25519
//
// SignatureSize bytes in all. It is valid only when its length is exactly
// SignatureSize and both halves verify over the same M; Verify always
// checks both. Domains are 1 to 255 bytes; the project's are DomainToken,
// DomainCommit and DomainWorkLog.
//
// A public key is encoded as the packed ML-DSA-44 public key (1312 bytes)
// followed by the 32-byte Ed25519 public key. A private key is encoded as the
// 32-byte ML-DSA-44 seed (FIPS 204 ξ) followed by the 32-byte Ed25519 seed
// (RFC 8032 private key); both halves are derived from their seeds.
const (
	// SignatureSize is the length of a composite signature.
	SignatureSize = mldsa44.SignatureSize + ed25519.SignatureSize
	// PublicKeySize is the length of an encoded job public key.
	PublicKeySize = mldsa44.PublicKeySize + ed25519.PublicKeySize
	// PrivateKeySize is the length of an encoded job private key.
	PrivateKeySize = mldsa44.SeedSize + ed25519.SeedSize
)

// The domains of the composite signatures of the project. A signature made
// in one domain never verifies in another.
const (
	DomainToken   = "sperli token v1"    // join tokens (SPEC §4.3)
	DomainCommit  = "sperli commit v1"   // checkpoint COMMITs (SPEC §9.3)
	DomainWorkLog = "sperli work log v1" // a work queue's log under --checkpoint-dir (SPEC §19)
)

const (
	compositePrefix = "sperli-composite-v1"
	mldsaContext    = "sperli"
)

// PublicKey is the public half of a job key. It is immutable and safe for
// concurrent use.
type PublicKey struct {
	ml *mldsa44.PublicKey
	ed ed25519.PublicKey
}

// PrivateKey is the secret half of a job key. It is immutable and safe for
// concurrent use. Only rank 0 and the launcher hold it.
type PrivateKey struct {
	mlSeed [mldsa44.SeedSize]byte
	edSeed [ed25519.SeedSize]byte
	ml     *mldsa44.PrivateKey
	ed     ed25519.PrivateKey
	pub    *PublicKey
}

// GenerateJobKey makes a job key from PrivateKeySize bytes of rand (nil
// means crypto/rand): the first 32 seed the ML-DSA-44 half, the next 32 the
// Ed25519 half. It returns an H1615 error if rand fails.
func GenerateJobKey(rand io.Reader) (*PublicKey, *PrivateKey, error) {
	if rand == nil {
		rand = cryptoRand
	}
	var seeds [PrivateKeySize]byte
	if _, err := io.ReadFull(rand, seeds[:]); err != nil {
		return nil, nil, codes.Wrap(codes.JobMalformed, err, "job key: cannot read randomness: %v", err)
	}
	k := newPrivateKey(seeds[:])
	return k.pub, k, nil
}

var cryptoRand = rand.Reader

func newPrivateKey(seeds []byte) *PrivateKey {
	k := new(PrivateKey)
	copy(k.mlSeed[:], seeds[:mldsa44.SeedSize])
	copy(k.edSeed[:], seeds[mldsa44.SeedSize:])
	mlPub, mlPriv := mldsa44.NewKeyFromSeed(&k.mlSeed)
	k.ml = mlPriv
	k.ed = ed25519.NewKeyFromSeed(k.edSeed[:])
	k.pub = &PublicKey{ml: mlPub, ed: k.ed.Public().(ed25519.PublicKey)}
	return k
}

// Public returns the key's public half. It is shared, not copied.
func (k *PrivateKey) Public() *PublicKey { return k.pub }

// Sign returns the composite signature of msg in domain, SignatureSize
// bytes that the caller owns. Signing is deterministic: the same key, domain
// and msg give the same bytes. It refuses with H1616 a domain that is empty
// or longer than 255 bytes, returning nil. Sign does not keep msg.
func (k *PrivateKey) Sign(domain string, msg []byte) ([]byte, error) {
	if k == nil {
		return nil, codes.New(codes.OutOfRange, "no job key to sign with, want one")
	}
	if len(domain) == 0 || len(domain) > 255 {
		return nil, codes.New(codes.OutOfRange, "signature domain is %d bytes, want 1 to 255", len(domain))
	}
	m := compositeMessage(domain, msg)
	sig := make([]byte, SignatureSize)
	// randomized=false: circl's SignTo draws its randomness from crypto/rand
	// itself, which a caller cannot fix, so we use FIPS 204's deterministic
	// variant rather than hedge with a source tests cannot control.
	if err := mldsa44.SignTo(k.ml, m, []byte(mldsaContext), false, sig[:mldsa44.SignatureSize]); err != nil {
		return nil, codes.Wrap(codes.OutOfRange, err, "ml-dsa-44 signature cannot be made: %v", err)
	}
	copy(sig[mldsa44.SignatureSize:], ed25519.Sign(k.ed, m))
	return sig, nil
}

// Verify reports whether sig is a composite signature of msg in domain by
// this key: exactly SignatureSize bytes, and both the ML-DSA-44 and the
// Ed25519 half valid. Both halves are always checked. A nil key verifies
// nothing.
func (k *PublicKey) Verify(domain string, msg, sig []byte) bool {
	if k == nil || len(sig) != SignatureSize || len(domain) == 0 || len(domain) > 255 {
		return false
	}
	m := compositeMessage(domain, msg)
	mlOK := mldsa44.Verify(k.ml, m, []byte(mldsaContext), sig[:mldsa44.SignatureSize])
	edOK := ed25519.Verify(k.ed, m, sig[mldsa44.SignatureSize:])
	return mlOK && edOK
}

// compositeMessage builds M (see SignatureSize's comment).
func compositeMessage(domain string, msg []byte) []byte {
	m := make([]byte, 0, len(compositePrefix)+2+len(domain)+len(msg))
	m = append(m, compositePrefix...)
	m = append(m, 0, byte(len(domain)))
	m = append(m, domain...)
	return append(m, msg...)
}

// Equal reports whether k and other are the same public key.
func (k *PublicKey) Equal(other *PublicKey) bool {
	if k == nil || other == nil {
		return k == other
	}
	return k.ml.Equal(other.ml) && k.ed.Equal(other.ed)
}

// MarshalBinary returns the key's PublicKeySize bytes, which the caller
// owns. It never fails.
func (k *PublicKey) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, PublicKeySize)
	b = append(b, k.ml.Bytes()...)
	return append(b, k.ed...), nil
}

// UnmarshalPublicKey decodes a public key from MarshalBinary's bytes,
// refusing with H1615 any other length. It does not keep b.
func UnmarshalPublicKey(b []byte) (*PublicKey, error) {
	if len(b) != PublicKeySize {
		return nil, codes.New(codes.JobMalformed, "job public key is %d bytes, want %d", len(b), PublicKeySize)
	}
	if last := lastPublic.Load(); last != nil && string(last.raw[:]) == string(b) {
		return last.key, nil
	}
	ml := new(mldsa44.PublicKey)
	if err := ml.UnmarshalBinary(b[:mldsa44.PublicKeySize]); err != nil {
		return nil, codes.Wrap(codes.JobMalformed, err, "job public key's ml-dsa-44 half is malformed: %v", err)
	}
	ed := make(ed25519.PublicKey, ed25519.PublicKeySize)
	copy(ed, b[mldsa44.PublicKeySize:])
	k := &PublicKey{ml: ml, ed: ed}
	last := &parsedPublic{key: k}
	copy(last.raw[:], b)
	lastPublic.Store(last)
	return k, nil
}

// lastPublic is the public key UnmarshalPublicKey decoded last. A key is
// never changed once made, so every decoding of the same bytes in this
// process shares it: the unpacked ML-DSA half is 16 KiB (its expanded
// matrix), which every Comm of a process of many (the simulation of
// 100,000 slots, a Go tool embedding several) would hold once each.
var lastPublic atomic.Pointer[parsedPublic]

type parsedPublic struct {
	raw [PublicKeySize]byte
	key *PublicKey
}

// MarshalBinary returns the key's PrivateKeySize bytes of seeds, which the
// caller owns and must keep secret (SPEC §4.5). It never fails.
func (k *PrivateKey) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, PrivateKeySize)
	b = append(b, k.mlSeed[:]...)
	return append(b, k.edSeed[:]...), nil
}

// UnmarshalPrivateKey decodes a private key from MarshalBinary's bytes,
// refusing with H1615 any other length. It does not keep b.
func UnmarshalPrivateKey(b []byte) (*PrivateKey, error) {
	if len(b) != PrivateKeySize {
		return nil, codes.New(codes.JobMalformed, "job private key is %d bytes, want %d", len(b), PrivateKeySize)
	}
	return newPrivateKey(b), nil
}
