package pki

import (
	"bytes"
	"crypto/ed25519"
	mrand "math/rand/v2"
	"strings"
	"testing"

	"github.com/cloudflare/circl/sign/mldsa/mldsa44"

	"sperli/codes"
)

func newTestKey(t testing.TB, seed byte) (*PublicKey, *PrivateKey) {
	t.Helper()
	pub, priv, err := GenerateJobKey(mrand.NewChaCha8([32]byte{seed}))
	if err != nil {
		t.Fatalf("GenerateJobKey = %v", err)
	}
	return pub, priv
}

func TestCompositeSignVerify(t *testing.T) {
	pub, priv := newTestKey(t, 1)
	otherPub, otherPriv := newTestKey(t, 2)
	msg := []byte("job j epoch 3 size 4")
	sig, err := priv.Sign(DomainCommit, msg)
	if err != nil {
		t.Fatalf("Sign(%q) = %v", DomainCommit, err)
	}
	if len(sig) != SignatureSize {
		t.Fatalf("len(Sign) = %d, want %d", len(sig), SignatureSize)
	}
	if again, _ := priv.Sign(DomainCommit, msg); !bytes.Equal(again, sig) {
		t.Errorf("Sign twice gave different bytes, want the same (deterministic)")
	}
	other, _ := priv.Sign(DomainCommit, []byte("another message"))
	otherKeySig, _ := otherPriv.Sign(DomainCommit, msg)
	splice := func(ml, ed []byte) []byte {
		return append(bytes.Clone(ml[:mldsa44.SignatureSize]), ed[mldsa44.SignatureSize:]...)
	}
	flip := func(i int) []byte {
		s := bytes.Clone(sig)
		s[i] ^= 0x01
		return s
	}
	tests := []struct {
		name   string
		pub    *PublicKey
		domain string
		msg    []byte
		sig    []byte
		want   bool
	}{
		{"valid", pub, DomainCommit, msg, sig, true},
		{"ml-dsa half flipped (first byte)", pub, DomainCommit, msg, flip(0), false},
		{"ml-dsa half flipped (last byte)", pub, DomainCommit, msg, flip(mldsa44.SignatureSize - 1), false},
		{"ed25519 half flipped (first byte)", pub, DomainCommit, msg, flip(mldsa44.SignatureSize), false},
		{"ed25519 half flipped (last byte)", pub, DomainCommit, msg, flip(SignatureSize - 1), false},
		{"ml-dsa half of another message", pub, DomainCommit, msg, splice(other, sig), false},
		{"ed25519 half of another message", pub, DomainCommit, msg, splice(sig, other), false},
		{"ml-dsa half of another key", pub, DomainCommit, msg, splice(otherKeySig, sig), false},
		{"ed25519 half of another key", pub, DomainCommit, msg, splice(sig, otherKeySig), false},
		{"another key", otherPub, DomainCommit, msg, sig, false},
		{"wrong domain", pub, DomainToken, msg, sig, false},
		{"empty domain", pub, "", msg, sig, false},
		{"wrong message", pub, DomainCommit, []byte("job j epoch 4 size 4"), sig, false},
		{"short", pub, DomainCommit, msg, sig[:SignatureSize-1], false},
		{"long", pub, DomainCommit, msg, append(bytes.Clone(sig), 0), false},
		{"ml-dsa half only", pub, DomainCommit, msg, sig[:mldsa44.SignatureSize], false},
		{"empty", pub, DomainCommit, msg, nil, false},
		{"nil key", nil, DomainCommit, msg, sig, false},
	}
	for _, tt := range tests {
		if got := tt.pub.Verify(tt.domain, tt.msg, tt.sig); got != tt.want {
			t.Errorf("Verify(%s) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestCompositeLayout checks the documented byte layout against the two
// schemes directly, so that another implementation can rely on it.
func TestCompositeLayout(t *testing.T) {
	pub, priv := newTestKey(t, 1)
	msg := []byte{1, 2, 3}
	sig, err := priv.Sign(DomainToken, msg)
	if err != nil {
		t.Fatal(err)
	}
	m := append([]byte("sperli-composite-v1\x00\x0f"+DomainToken), msg...)
	if !mldsa44.Verify(pub.ml, m, []byte("sperli"), sig[:mldsa44.SignatureSize]) {
		t.Errorf("mldsa44.Verify(M, ctx \"sperli\", first %d bytes) = false, want true", mldsa44.SignatureSize)
	}
	if !ed25519.Verify(pub.ed, m, sig[mldsa44.SignatureSize:]) {
		t.Errorf("ed25519.Verify(M, last 64 bytes) = false, want true")
	}
	b, _ := pub.MarshalBinary()
	if !bytes.Equal(b[:mldsa44.PublicKeySize], pub.ml.Bytes()) || !bytes.Equal(b[mldsa44.PublicKeySize:], pub.ed) {
		t.Errorf("PublicKey.MarshalBinary is not ml-dsa-44 key || ed25519 key")
	}
	p, _ := priv.MarshalBinary()
	if !bytes.Equal(p[:32], priv.ml.Seed()) || !bytes.Equal(p[32:], priv.ed.Seed()) {
		t.Errorf("PrivateKey.MarshalBinary is not ml-dsa-44 seed || ed25519 seed")
	}
}

func TestSignDomains(t *testing.T) {
	_, priv := newTestKey(t, 1)
	tests := []struct {
		domain string
		want   codes.Code
	}{
		{DomainToken, 0},
		{DomainCommit, 0},
		{"x", 0},
		{strings.Repeat("d", 255), 0},
		{"", codes.OutOfRange},
		{strings.Repeat("d", 256), codes.OutOfRange},
	}
	for _, tt := range tests {
		sig, err := priv.Sign(tt.domain, []byte("m"))
		wantCode(t, "Sign(domain of "+itoa(len(tt.domain))+" bytes)", err, tt.want)
		if err == nil && !priv.Public().Verify(tt.domain, []byte("m"), sig) {
			t.Errorf("Verify(Sign(domain of %d bytes)) = false, want true", len(tt.domain))
		}
	}
	var nilKey *PrivateKey
	_, err := nilKey.Sign(DomainToken, nil)
	wantCode(t, "(*PrivateKey)(nil).Sign", err, codes.OutOfRange)
}

func TestDomainsDoNotCollide(t *testing.T) {
	// "ab" || "c" and "a" || "bc" must not sign the same M: the length byte
	// keeps them apart.
	pub, priv := newTestKey(t, 1)
	sig, _ := priv.Sign("ab", []byte("c"))
	if pub.Verify("a", []byte("bc"), sig) {
		t.Errorf("Verify(\"a\", \"bc\", Sign(\"ab\", \"c\")) = true, want false")
	}
}

func TestKeyMarshal(t *testing.T) {
	pub, priv := newTestKey(t, 1)
	pb, err := pub.MarshalBinary()
	if err != nil || len(pb) != PublicKeySize {
		t.Fatalf("PublicKey.MarshalBinary = %d bytes, %v, want %d bytes", len(pb), err, PublicKeySize)
	}
	pub2, err := UnmarshalPublicKey(pb)
	if err != nil {
		t.Fatalf("UnmarshalPublicKey(MarshalBinary) = %v", err)
	}
	if pb2, _ := pub2.MarshalBinary(); !bytes.Equal(pb, pb2) || !pub.Equal(pub2) {
		t.Errorf("UnmarshalPublicKey(MarshalBinary(k)) != k")
	}
	sb, err := priv.MarshalBinary()
	if err != nil || len(sb) != PrivateKeySize {
		t.Fatalf("PrivateKey.MarshalBinary = %d bytes, %v, want %d bytes", len(sb), err, PrivateKeySize)
	}
	priv2, err := UnmarshalPrivateKey(sb)
	if err != nil {
		t.Fatalf("UnmarshalPrivateKey(MarshalBinary) = %v", err)
	}
	if sb2, _ := priv2.MarshalBinary(); !bytes.Equal(sb, sb2) || !priv2.Public().Equal(pub) {
		t.Errorf("UnmarshalPrivateKey(MarshalBinary(k)) != k")
	}
	sig1, _ := priv.Sign(DomainCommit, []byte("m"))
	sig2, _ := priv2.Sign(DomainCommit, []byte("m"))
	if !bytes.Equal(sig1, sig2) || !pub2.Verify(DomainCommit, []byte("m"), sig1) {
		t.Errorf("a round-tripped key signs or verifies differently")
	}
	// The seeds are the key: GenerateJobKey reads exactly them.
	seeds := make([]byte, PrivateKeySize)
	mrand.NewChaCha8([32]byte{1}).Read(seeds)
	if !bytes.Equal(seeds, sb) {
		t.Errorf("PrivateKey.MarshalBinary is not the %d bytes GenerateJobKey read", PrivateKeySize)
	}
	otherPub, _ := newTestKey(t, 2)
	if pub.Equal(otherPub) || !pub.Equal(pub) {
		t.Errorf("Equal does not tell keys apart")
	}

	tests := []struct {
		name string
		f    func([]byte) error
		n    int
		want codes.Code
	}{
		{"UnmarshalPublicKey", func(b []byte) error { _, err := UnmarshalPublicKey(b); return err }, PublicKeySize, 0},
		{"UnmarshalPublicKey", func(b []byte) error { _, err := UnmarshalPublicKey(b); return err }, PublicKeySize - 1, codes.JobMalformed},
		{"UnmarshalPublicKey", func(b []byte) error { _, err := UnmarshalPublicKey(b); return err }, PublicKeySize + 1, codes.JobMalformed},
		{"UnmarshalPublicKey", func(b []byte) error { _, err := UnmarshalPublicKey(b); return err }, 0, codes.JobMalformed},
		{"UnmarshalPrivateKey", func(b []byte) error { _, err := UnmarshalPrivateKey(b); return err }, PrivateKeySize, 0},
		{"UnmarshalPrivateKey", func(b []byte) error { _, err := UnmarshalPrivateKey(b); return err }, PrivateKeySize - 1, codes.JobMalformed},
		{"UnmarshalPrivateKey", func(b []byte) error { _, err := UnmarshalPrivateKey(b); return err }, 0, codes.JobMalformed},
	}
	for _, tt := range tests {
		wantCode(t, tt.name+"("+itoa(tt.n)+" bytes)", tt.f(make([]byte, tt.n)), tt.want)
	}
}

func TestGenerateJobKey(t *testing.T) {
	a, _ := newTestKey(t, 7)
	b, _ := newTestKey(t, 7)
	if !a.Equal(b) {
		t.Errorf("GenerateJobKey(same source) gave two keys, want one")
	}
	pub, priv, err := GenerateJobKey(nil)
	if err != nil || pub == nil || priv == nil || priv.Public() != pub {
		t.Errorf("GenerateJobKey(nil) = %v, %v, %v, want a key pair", pub, priv, err)
	}
	_, _, err = GenerateJobKey(strings.NewReader("short"))
	wantCode(t, "GenerateJobKey(short source)", err, codes.JobMalformed)
}

// Decoding the same key again gives the key decoded before (a process of
// many Comms holds it once); another key's bytes never get it.
func TestUnmarshalPublicKeyShared(t *testing.T) {
	pubA, privA := newTestKey(t, 31)
	pubB, _ := newTestKey(t, 32)
	a, _ := pubA.MarshalBinary()
	b, _ := pubB.MarshalBinary()
	k1, err := UnmarshalPublicKey(a)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := UnmarshalPublicKey(a)
	if err != nil {
		t.Fatal(err)
	}
	if k1 != k2 {
		t.Error("the same bytes decoded twice gave two keys")
	}
	kb, err := UnmarshalPublicKey(b)
	if err != nil {
		t.Fatal(err)
	}
	if kb == k1 || !kb.Equal(pubB) || kb.Equal(pubA) {
		t.Error("another key's bytes gave the key decoded before")
	}
	msg := []byte("sperli shared key")
	sig, err := privA.Sign(DomainToken, msg)
	if err != nil {
		t.Fatal(err)
	}
	if k, _ := UnmarshalPublicKey(a); !k.Verify(DomainToken, msg, sig) {
		t.Error("the key decoded again does not verify its private half's signature")
	}
	if kb.Verify(DomainToken, msg, sig) {
		t.Error("another key verifies the signature")
	}
}
