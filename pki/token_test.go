package pki

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sperli/codes"
)

var writeSeeds = flag.Bool("write-seeds", false, "rewrite the seed corpus of FuzzParseToken in testdata/fuzz")

func testToken() Token {
	return Token{Job: "sum-1", Rank: 1, Size: 4, Incarnation: 2, Host: "node-1.example", Expires: testNow.Add(5 * time.Minute)}
}

func testExpect() Expect {
	return Expect{Job: "sum-1", Rank: 1, Size: 4, Incarnation: 2, Host: "node-1.example", Now: testNow}
}

func signToken(t testing.TB, tok Token, k *PrivateKey) []byte {
	t.Helper()
	b, err := tok.Sign(k)
	if err != nil {
		t.Fatalf("Token(%+v).Sign = %v", tok, err)
	}
	return b
}

func TestTokenRoundTrip(t *testing.T) {
	pub, priv := newTestKey(t, 1)
	tests := []Token{
		testToken(),
		{Job: "j", Rank: 0, Size: 1, Host: "127.0.0.1", Expires: time.Unix(0, 1)},
		{Job: strings.Repeat("j", 255), Rank: math.MaxInt32 - 1, Size: math.MaxInt32, Incarnation: math.MaxUint32,
			Host: strings.Repeat("h", 255), Expires: time.Unix(0, math.MaxInt64)},
		{Job: "j", Rank: 0, Size: 1, Host: "h", Expires: time.Unix(0, math.MinInt64)},
	}
	for _, tok := range tests {
		b := signToken(t, tok, priv)
		if want := tokenFixed + len(tok.Job) + len(tok.Host); len(b) != want {
			t.Errorf("len(Sign(%v)) = %d, want %d", tok, len(b), want)
		}
		got, err := ParseToken(b)
		if err != nil || !sameToken(got, tok) {
			t.Errorf("ParseToken(Sign(%v)) = %v, %v, want the token", tok, got, err)
		}
		want := Expect{Job: tok.Job, Rank: tok.Rank, Size: tok.Size, Incarnation: tok.Incarnation, Host: tok.Host, Now: tok.Expires}
		got, err = VerifyToken(b, pub, want)
		if err != nil || !sameToken(got, tok) {
			t.Errorf("VerifyToken(Sign(%v)) = %v, %v, want the token", tok, got, err)
		}
	}
}

func sameToken(a, b Token) bool {
	return a.Job == b.Job && a.Rank == b.Rank && a.Size == b.Size && a.Incarnation == b.Incarnation &&
		a.Host == b.Host && a.Expires.Equal(b.Expires)
}

func TestTokenLayout(t *testing.T) {
	_, priv := newTestKey(t, 1)
	tok := Token{Job: "ab", Rank: 1, Size: 2, Incarnation: 3, Host: "h", Expires: time.Unix(0, 0x0102030405060708)}
	b := signToken(t, tok, priv)
	want := []byte("SPTK\x01\x02ab\x00\x00\x00\x01\x00\x00\x00\x02\x00\x00\x00\x03\x01h\x01\x02\x03\x04\x05\x06\x07\x08")
	if !bytes.Equal(b[:len(want)], want) {
		t.Errorf("Sign(%v) starts % x, want % x", tok, b[:len(want)], want)
	}
	if !priv.Public().Verify(DomainToken, want, b[len(want):]) {
		t.Errorf("Sign(%v): the signature does not cover the bytes before it in DomainToken", tok)
	}
}

func TestTokenSignRefusals(t *testing.T) {
	_, priv := newTestKey(t, 1)
	mod := func(f func(*Token)) Token { tok := testToken(); f(&tok); return tok }
	tests := []struct {
		name string
		tok  Token
		want codes.Code
	}{
		{"ok", testToken(), 0},
		{"bad job", mod(func(t *Token) { t.Job = "a/b" }), codes.JobMalformed},
		{"empty job", mod(func(t *Token) { t.Job = "" }), codes.JobMalformed},
		{"size 0", mod(func(t *Token) { t.Size = 0 }), codes.OutOfRange},
		{"size too large", mod(func(t *Token) { t.Size = math.MaxInt32 + 1 }), codes.OutOfRange},
		{"negative rank", mod(func(t *Token) { t.Rank = -1 }), codes.OutOfRange},
		{"rank = size", mod(func(t *Token) { t.Rank = t.Size }), codes.OutOfRange},
		{"empty host", mod(func(t *Token) { t.Host = "" }), codes.OutOfRange},
		{"long host", mod(func(t *Token) { t.Host = strings.Repeat("h", 256) }), codes.OutOfRange},
		{"no expiry", mod(func(t *Token) { t.Expires = time.Time{} }), codes.OutOfRange},
		{"expiry past int64", mod(func(t *Token) { t.Expires = time.Date(2263, 1, 1, 0, 0, 0, 0, time.UTC) }), codes.OutOfRange},
	}
	for _, tt := range tests {
		b, err := tt.tok.Sign(priv)
		wantCode(t, "Sign("+tt.name+")", err, tt.want)
		if err != nil && b != nil {
			t.Errorf("Sign(%s) returned bytes with an error", tt.name)
		}
	}
	_, err := testToken().Sign(nil)
	wantCode(t, "Sign(nil key)", err, codes.OutOfRange)
}

func TestParseTokenMalformed(t *testing.T) {
	_, priv := newTestKey(t, 1)
	good := signToken(t, testToken(), priv)
	edit := func(f func([]byte) []byte) []byte { return f(bytes.Clone(good)) }
	// unsigned builds a token whose fields Sign would refuse.
	unsigned := func(tok Token) []byte {
		return append(tok.appendSigned(nil), make([]byte, SignatureSize)...)
	}
	tok := testToken()
	tests := []struct {
		name string
		b    []byte
		msg  string
	}{
		{"empty", nil, "token is 0 bytes, want at least"},
		{"short", good[:tokenFixed-1], "want at least"},
		{"cut", good[:len(good)-1], "want " + itoa(len(good))},
		{"trailing byte", append(bytes.Clone(good), 0), "want " + itoa(len(good))},
		{"magic", edit(func(b []byte) []byte { b[0] = 'X'; return b }), `does not start with "SPTK"`},
		{"version 0", edit(func(b []byte) []byte { b[4] = 0; return b }), "token version is 0, want 1"},
		{"version 2", edit(func(b []byte) []byte { b[4] = 2; return b }), "token version is 2, want 1"},
		{"job length", edit(func(b []byte) []byte { b[5]++; return b }), "bytes, want"},
		{"host length", edit(func(b []byte) []byte { b[6+len(tok.Job)+12]--; return b }), "bytes, want"},
		{"rank over int32", unsigned(Token{Job: "j", Rank: -1, Size: 4, Host: "h", Expires: testNow}), "over 2147483647"},
		{"rank = size", unsigned(Token{Job: "j", Rank: 4, Size: 4, Host: "h", Expires: testNow}), "token rank is 4, want 0 to 3"},
		{"size 0", unsigned(Token{Job: "j", Rank: 0, Size: 0, Host: "h", Expires: testNow}), "token size is 0"},
		{"empty job", unsigned(Token{Job: "", Rank: 0, Size: 1, Host: "h", Expires: testNow}), "token's job id is 0 bytes"},
		{"bad job", unsigned(Token{Job: "a b", Rank: 0, Size: 1, Host: "h", Expires: testNow}), "token's job id"},
		{"empty host", unsigned(Token{Job: "j", Rank: 0, Size: 1, Host: "", Expires: testNow}), "token host is 0 bytes"},
	}
	for _, tt := range tests {
		got, err := ParseToken(tt.b)
		wantCode(t, "ParseToken("+tt.name+")", err, codes.HelloMalformed)
		if err != nil && !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("ParseToken(%s) = %q, want it to say %q", tt.name, err, tt.msg)
		}
		if got != (Token{}) {
			t.Errorf("ParseToken(%s) = %v with an error, want the zero Token", tt.name, got)
		}
	}
}

// TestVerifyTokenRefusals gives each check of VerifyToken one token that
// fails only it, and checks the exact message.
func TestVerifyTokenRefusals(t *testing.T) {
	pub, priv := newTestKey(t, 1)
	otherPub, otherPriv := newTestKey(t, 2)
	good := signToken(t, testToken(), priv)
	mod := func(f func(*Token)) []byte { tok := testToken(); f(&tok); return signToken(t, tok, priv) }
	exp := func(f func(*Expect)) Expect { e := testExpect(); f(&e); return e }
	flipped := bytes.Clone(good)
	flipped[len(flipped)-1] ^= 1
	tests := []struct {
		name string
		b    []byte
		pub  *PublicKey
		want Expect
		code codes.Code
		msg  string // the whole message, or "" to check the code only
	}{
		{"good", good, pub, testExpect(), 0, ""},
		{"host case and trailing dot", good, pub, exp(func(e *Expect) { e.Host = "NODE-1.Example." }), 0, ""},
		{"token host with trailing dot", mod(func(t *Token) { t.Host = "Node-1.example." }), pub, testExpect(), 0, ""},
		{"now is expiry", good, pub, exp(func(e *Expect) { e.Now = testNow.Add(5 * time.Minute) }), 0, ""},
		{"malformed", good[:100], pub, testExpect(), codes.HelloMalformed, ""},
		{"flipped signature", flipped, pub, testExpect(), codes.TokenSignature,
			"H1603: token signature does not verify, want one by the job key"},
		{"other job key", signToken(t, testToken(), otherPriv), pub, testExpect(), codes.TokenSignature, ""},
		{"verified with other key", good, otherPub, testExpect(), codes.TokenSignature, ""},
		{"no key", good, nil, testExpect(), codes.TokenSignature, ""},
		{"job", mod(func(t *Token) { t.Job = "sum-2" }), pub, testExpect(), codes.TokenJob,
			`H1605: token is for job "sum-2", want job "sum-1"`},
		{"rank", mod(func(t *Token) { t.Rank = 2 }), pub, exp(func(e *Expect) { e.Rank = 1 }), codes.TokenRank,
			"H1606: token is for rank 2, want rank 1"},
		{"size", mod(func(t *Token) { t.Size = 5 }), pub, testExpect(), codes.TokenMismatch,
			"H1607: token is for size 5, want size 4"},
		{"incarnation", mod(func(t *Token) { t.Incarnation = 1 }), pub, testExpect(), codes.TokenMismatch,
			"H1607: token is for incarnation 1, want incarnation 2"},
		{"host", mod(func(t *Token) { t.Host = "node-2.example" }), pub, testExpect(), codes.TokenMismatch,
			`H1607: token is for host "node-2.example", want host "node-1.example"`},
		{"host is not a prefix", mod(func(t *Token) { t.Host = "node-1.example.org" }), pub, testExpect(), codes.TokenMismatch, ""},
		{"expired", good, pub, exp(func(e *Expect) { e.Now = testNow.Add(5*time.Minute + 1) }), codes.TokenExpired,
			"H1604: token expired at 2026-03-01T12:05:00Z, want it valid now (2026-03-01T12:05:00.000000001Z)"},
		{"now zero means the clock", mod(func(t *Token) { t.Expires = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC) }), pub,
			exp(func(e *Expect) { e.Now = time.Time{} }), codes.TokenExpired, ""},
		{"now zero, future token", mod(func(t *Token) { t.Expires = time.Now().Add(time.Hour) }), pub,
			exp(func(e *Expect) { e.Now = time.Time{} }), 0, ""},
	}
	for _, tt := range tests {
		got, err := VerifyToken(tt.b, tt.pub, tt.want)
		wantCode(t, "VerifyToken("+tt.name+")", err, tt.code)
		if err != nil {
			if tt.msg != "" && err.Error() != tt.msg {
				t.Errorf("VerifyToken(%s) = %q, want %q", tt.name, err, tt.msg)
			}
			if got != (Token{}) {
				t.Errorf("VerifyToken(%s) = %v with an error, want the zero Token", tt.name, got)
			}
			checkNoTokenBytes(t, err, tt.b)
		}
	}
}

// checkNoTokenBytes fails if an error message holds anything but printable
// ASCII or any 16-byte run of the signature (SPEC §4.5).
func checkNoTokenBytes(t *testing.T, err error, b []byte) {
	t.Helper()
	s := err.Error()
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			t.Errorf("message %q has byte %#x, want printable ASCII", s, s[i])
			return
		}
	}
	if len(b) >= SignatureSize {
		sig := b[len(b)-SignatureSize:]
		for i := 0; i+16 <= len(sig); i += 16 {
			if strings.Contains(s, string(sig[i:i+16])) || strings.Contains(s, fmt.Sprintf("%x", sig[i:i+16])) {
				t.Errorf("message %q holds signature bytes", s)
				return
			}
		}
	}
}

// TestVerifyTokenOrder proves the order of SPEC §4.3: a token wrong in
// several ways is refused with the code of the first failing check.
func TestVerifyTokenOrder(t *testing.T) {
	pub, priv := newTestKey(t, 1)
	_, otherPriv := newTestKey(t, 2)
	expired := testNow.Add(-time.Minute)
	tests := []struct {
		name string
		tok  Token
		key  *PrivateKey
		cut  bool // truncate the encoding by one byte
		want codes.Code
	}{
		{"malformed + bad signature + wrong job", Token{Job: "other", Rank: 1, Size: 4, Incarnation: 2, Host: "node-1.example", Expires: expired}, otherPriv, true, codes.HelloMalformed},
		{"bad signature + wrong job + rank + expired", Token{Job: "other", Rank: 3, Size: 4, Incarnation: 2, Host: "node-1.example", Expires: expired}, otherPriv, false, codes.TokenSignature},
		{"bad signature + expired", Token{Job: "sum-1", Rank: 1, Size: 4, Incarnation: 2, Host: "node-1.example", Expires: expired}, otherPriv, false, codes.TokenSignature},
		{"wrong job + rank + size + host + expired", Token{Job: "other", Rank: 3, Size: 5, Incarnation: 9, Host: "elsewhere", Expires: expired}, priv, false, codes.TokenJob},
		{"wrong job + rank + expired", Token{Job: "other", Rank: 2, Size: 4, Incarnation: 2, Host: "node-1.example", Expires: expired}, priv, false, codes.TokenJob},
		{"wrong rank + size + expired", Token{Job: "sum-1", Rank: 2, Size: 5, Incarnation: 2, Host: "node-1.example", Expires: expired}, priv, false, codes.TokenRank},
		{"wrong rank + host", Token{Job: "sum-1", Rank: 0, Size: 4, Incarnation: 2, Host: "elsewhere", Expires: testNow.Add(time.Minute)}, priv, false, codes.TokenRank},
		{"wrong size + expired", Token{Job: "sum-1", Rank: 1, Size: 5, Incarnation: 2, Host: "node-1.example", Expires: expired}, priv, false, codes.TokenMismatch},
		{"wrong incarnation + expired", Token{Job: "sum-1", Rank: 1, Size: 4, Incarnation: 3, Host: "node-1.example", Expires: expired}, priv, false, codes.TokenMismatch},
		{"wrong host + expired", Token{Job: "sum-1", Rank: 1, Size: 4, Incarnation: 2, Host: "elsewhere", Expires: expired}, priv, false, codes.TokenMismatch},
		{"only expired", Token{Job: "sum-1", Rank: 1, Size: 4, Incarnation: 2, Host: "node-1.example", Expires: expired}, priv, false, codes.TokenExpired},
	}
	for _, tt := range tests {
		b := signToken(t, tt.tok, tt.key)
		if tt.cut {
			b = b[:len(b)-1]
		}
		_, err := VerifyToken(b, pub, testExpect())
		wantCode(t, "VerifyToken("+tt.name+")", err, tt.want)
	}

	// A signed body edited after signing fails the signature, not the field.
	b := signToken(t, testToken(), priv)
	b[6+len("sum-1")+3] = 3 // rank 1 -> 3
	_, err := VerifyToken(b, pub, testExpect())
	wantCode(t, "VerifyToken(rank edited after signing)", err, codes.TokenSignature)
}

// seedTokens are the valid tokens of the committed seed corpus.
func seedTokens(t testing.TB) map[string][]byte {
	_, priv := newTestKey(t, 1)
	return map[string][]byte{
		"valid-basic":   signToken(t, testToken(), priv),
		"valid-minimal": signToken(t, Token{Job: "j", Rank: 0, Size: 1, Host: "h", Expires: time.Unix(0, 0)}, priv),
		"valid-ipv4":    signToken(t, Token{Job: "sum-2026.03_01", Rank: 7, Size: 8, Incarnation: 3, Host: "127.0.0.1", Expires: testNow}, priv),
		"valid-ipv6":    signToken(t, Token{Job: "j", Rank: 1, Size: 2, Incarnation: math.MaxUint32, Host: "::1", Expires: time.Unix(0, math.MaxInt64)}, priv),
		"valid-negtime": signToken(t, Token{Job: "j", Rank: 0, Size: 1, Host: "h.", Expires: time.Unix(0, math.MinInt64)}, priv),
	}
}

// A fuzz input of FuzzParseToken is a token without its signature, the
// part that has structure; the target appends fuzzSig. ParseToken reads
// nothing of the signature but its length, so no path is lost, and inputs
// stay some 30 bytes instead of 2,500: the fuzzer's minimiser, quadratic
// in the input's length, would otherwise spend the whole run on one input.
var fuzzSig = bytes.Repeat([]byte{0xa5}, SignatureSize)

// TestFuzzSeeds keeps the committed seed corpus in step with the format:
// every valid-* file must hold the signed part of what seedTokens makes
// today. Rewrite the files with go test -run TestFuzzSeeds ./pki/ -args -write-seeds.
func TestFuzzSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzParseToken")
	for name, b := range seedTokens(t) {
		body := b[:len(b)-SignatureSize]
		if _, err := ParseToken(append(bytes.Clone(body), fuzzSig...)); err != nil {
			t.Errorf("ParseToken(seed %s) = %v, want a token", name, err)
		}
		path := filepath.Join(dir, name)
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%+q)\n", body)
		if *writeSeeds {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("seed %s: %v (rewrite with -write-seeds)", name, err)
			continue
		}
		if string(got) != want {
			t.Errorf("seed %s differs from the token it should hold (rewrite with -write-seeds)", name)
		}
	}
}

func FuzzParseToken(f *testing.F) {
	for _, b := range seedTokens(f) {
		body := b[:len(b)-SignatureSize]
		f.Add(body)
		f.Add(body[:len(body)-1])
		f.Add(append(bytes.Clone(body), 0))
	}
	f.Add([]byte("SPTK\x01"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		b := append(bytes.Clone(body), fuzzSig...)
		tok, err := ParseToken(b)
		if err != nil {
			if codes.Of(err) != codes.HelloMalformed {
				t.Fatalf("ParseToken = %v, want nil or H1602", err)
			}
			return
		}
		if again := tok.appendSigned(nil); !bytes.Equal(again, body) {
			t.Fatalf("encode(ParseToken(b)) = %x, want %x", again, body)
		}
		if err := tok.check(codes.OutOfRange); err != nil {
			t.Fatalf("ParseToken accepted %v, which Sign refuses: %v", tok, err)
		}
	})
}

func BenchmarkSign(b *testing.B) {
	_, priv := newTestKey(b, 1)
	tok := testToken()
	body := tok.appendSigned(nil)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := priv.Sign(DomainToken, body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	pub, priv := newTestKey(b, 1)
	body := testToken().appendSigned(nil)
	sig, _ := priv.Sign(DomainToken, body)
	b.ReportAllocs()
	for b.Loop() {
		if !pub.Verify(DomainToken, body, sig) {
			b.Fatal("Verify = false")
		}
	}
}

func BenchmarkVerifyToken(b *testing.B) {
	pub, priv := newTestKey(b, 1)
	tok := signToken(b, testToken(), priv)
	want := testExpect()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := VerifyToken(tok, pub, want); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkIssue(b *testing.B) {
	ca := newTestCA(b, "j", 1)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ca.Issue("j", 1, "127.0.0.1", testNow.Add(time.Hour)); err != nil {
			b.Fatal(err)
		}
	}
}
