package pki

import (
	"encoding/binary"
	"math"
	"time"

	"sperli/codes"
)

// A token is encoded, all integers big-endian, as
//
//	"SPTK"                 4 bytes, magic
//	version                1 byte, 1
//	job length, job        1 byte, then that many bytes
//	rank                   4 bytes
//	size                   4 bytes
//	incarnation            4 bytes
//	host length, host      1 byte, then that many bytes
//	expires                8 bytes, signed Unix time in nanoseconds
//	signature              SignatureSize bytes, composite, domain DomainToken,
//	                       over every byte before it
const (
	tokenMagic   = "SPTK"
	tokenVersion = 1
	// tokenFixed is the length of a token with an empty job and host.
	tokenFixed = len(tokenMagic) + 1 + 1 + 4 + 4 + 4 + 1 + 8 + SignatureSize
)

// Token is a join token (SPEC §4.3): the launcher's word, signed with the
// job key, that one rank of one incarnation of a job runs on one host. A
// valid token has a job id as NewCA takes, 0 <= Rank < Size <= 2147483647,
// a Host of 1 to 255 bytes, and an Expires that Unix nanoseconds in an int64
// can hold.
type Token struct {
	Job         string
	Rank, Size  int
	Incarnation uint32
	Host        string    // the rank's host as the job's host table names it
	Expires     time.Time // the token is good up to and including this instant
}

// Sign encodes the token and signs it with the job key k, returning bytes
// the caller owns. It refuses with H1615 a malformed job id and with H1616
// any other field out of its range (see Token), returning nil.
func (t Token) Sign(k *PrivateKey) ([]byte, error) {
	if err := t.check(codes.OutOfRange); err != nil {
		return nil, err
	}
	body := t.appendSigned(make([]byte, 0, tokenFixed+len(t.Job)+len(t.Host)))
	sig, err := k.Sign(DomainToken, body)
	if err != nil {
		return nil, err
	}
	return append(body, sig...), nil
}

// appendSigned appends the signed part of the token's encoding to b. It
// does not check the fields; check does.
func (t Token) appendSigned(b []byte) []byte {
	b = append(b, tokenMagic...)
	b = append(b, tokenVersion, byte(len(t.Job)))
	b = append(b, t.Job...)
	b = binary.BigEndian.AppendUint32(b, uint32(t.Rank))
	b = binary.BigEndian.AppendUint32(b, uint32(t.Size))
	b = binary.BigEndian.AppendUint32(b, t.Incarnation)
	b = append(b, byte(len(t.Host)))
	b = append(b, t.Host...)
	return binary.BigEndian.AppendUint64(b, uint64(t.Expires.UnixNano()))
}

var (
	minExpires = time.Unix(0, math.MinInt64)
	maxExpires = time.Unix(0, math.MaxInt64)
)

// check refuses a token that does not meet Token's rules: with H1615 a bad
// job id, and with code c anything else. ParseToken applies the same rules
// (as H1602), so that every token it accepts is one Sign could have made.
func (t Token) check(c codes.Code) error {
	if err := checkJob(t.Job); err != nil {
		if c == codes.HelloMalformed {
			return codes.Wrap(c, err, "token's %s", err.(*codes.Error).Msg)
		}
		return err
	}
	switch {
	case t.Size < 1 || t.Size > math.MaxInt32:
		return codes.New(c, "token size is %d, want 1 to %d", t.Size, math.MaxInt32)
	case t.Rank < 0 || t.Rank >= t.Size:
		return codes.New(c, "token rank is %d, want 0 to %d (size %d)", t.Rank, t.Size-1, t.Size)
	case t.Host == "" || len(t.Host) > 255:
		return codes.New(c, "token host is %d bytes, want 1 to 255", len(t.Host))
	case t.Expires.Before(minExpires) || t.Expires.After(maxExpires):
		return codes.New(c, "token expiry %s is outside what int64 nanoseconds hold, want %s to %s", stamp(t.Expires), stamp(minExpires), stamp(maxExpires))
	}
	return nil
}

// ParseToken decodes an encoded token without checking its signature;
// VerifyToken is what a receiver calls. It refuses with H1602 bytes that are
// short, have the wrong magic or version, have bytes left over, or hold a
// token that breaks Token's rules. It does not keep b.
func ParseToken(b []byte) (Token, error) {
	t, _, err := parseToken(b)
	return t, err
}

// parseToken is ParseToken that also returns the length of the signed part.
func parseToken(b []byte) (Token, int, error) {
	if len(b) < tokenFixed {
		return Token{}, 0, codes.New(codes.HelloMalformed, "token is %d bytes, want at least %d", len(b), tokenFixed)
	}
	if string(b[:len(tokenMagic)]) != tokenMagic {
		return Token{}, 0, codes.New(codes.HelloMalformed, "token does not start with %q, want that magic", tokenMagic)
	}
	if v := b[4]; v != tokenVersion {
		return Token{}, 0, codes.New(codes.HelloMalformed, "token version is %d, want %d", v, tokenVersion)
	}
	jobLen := int(b[5])
	// The host length byte is in range: a job is at most 255 bytes and
	// tokenFixed counts the whole signature after it.
	hostAt := 6 + jobLen + 12
	hostLen := int(b[hostAt])
	want := tokenFixed + jobLen + hostLen
	if len(b) != want {
		return Token{}, 0, codes.New(codes.HelloMalformed, "token is %d bytes, want %d for a job of %d and a host of %d bytes", len(b), want, jobLen, hostLen)
	}
	p := 6 + jobLen
	rank := binary.BigEndian.Uint32(b[p:])
	size := binary.BigEndian.Uint32(b[p+4:])
	if rank > math.MaxInt32 || size > math.MaxInt32 {
		return Token{}, 0, codes.New(codes.HelloMalformed, "token rank %d or size %d is over %d, want both at most that", rank, size, math.MaxInt32)
	}
	hostEnd := hostAt + 1 + hostLen
	t := Token{
		Job:         string(b[6 : 6+jobLen]),
		Rank:        int(rank),
		Size:        int(size),
		Incarnation: binary.BigEndian.Uint32(b[p+8:]),
		Host:        string(b[hostAt+1 : hostEnd]),
		Expires:     time.Unix(0, int64(binary.BigEndian.Uint64(b[hostEnd:]))).UTC(),
	}
	if err := t.check(codes.HelloMalformed); err != nil {
		return Token{}, 0, err
	}
	return t, hostEnd + 8, nil
}

// Expect is what a receiver knows of the peer it expects on a connection.
type Expect struct {
	Job         string
	Rank, Size  int
	Incarnation uint32
	Host        string    // that rank's host in the job's host table
	Now         time.Time // the zero value means time.Now()
}

// VerifyToken decodes the token b, checks it against the job key pub and
// what the receiver expects, and returns it. It makes the checks of SPEC
// §4.3 in this order and returns the first failure:
//
//	H1602  b is not a well-formed token (ParseToken)
//	H1603  the signature does not verify with pub (or pub is nil)
//	H1605  the job is not want.Job
//	H1606  the rank is not want.Rank
//	H1607  the size, incarnation or host (case-insensitive, without a
//	       trailing dot) is not want's
//	H1604  want.Now is after Expires
//
// On error the returned Token is the zero Token. VerifyToken does not keep b
// and is safe for concurrent use.
func VerifyToken(b []byte, pub *PublicKey, want Expect) (Token, error) {
	t, n, err := parseToken(b)
	if err != nil {
		return Token{}, err
	}
	if pub == nil {
		return Token{}, codes.New(codes.TokenSignature, "token cannot be checked without the job key, want one")
	}
	if !pub.Verify(DomainToken, b[:n], b[n:]) {
		return Token{}, codes.New(codes.TokenSignature, "token signature does not verify, want one by the job key")
	}
	switch {
	case t.Job != want.Job:
		return Token{}, codes.New(codes.TokenJob, "token is for job %q, want job %q", truncate(t.Job), truncate(want.Job))
	case t.Rank != want.Rank:
		return Token{}, codes.New(codes.TokenRank, "token is for rank %d, want rank %d", t.Rank, want.Rank)
	case t.Size != want.Size:
		return Token{}, codes.New(codes.TokenMismatch, "token is for size %d, want size %d", t.Size, want.Size)
	case t.Incarnation != want.Incarnation:
		return Token{}, codes.New(codes.TokenMismatch, "token is for incarnation %d, want incarnation %d", t.Incarnation, want.Incarnation)
	case !sameHost(t.Host, want.Host):
		return Token{}, codes.New(codes.TokenMismatch, "token is for host %q, want host %q", truncate(t.Host), truncate(want.Host))
	}
	now := want.Now
	if now.IsZero() {
		now = time.Now()
	}
	if now.After(t.Expires) {
		return Token{}, codes.New(codes.TokenExpired, "token expired at %s, want it valid now (%s)", stamp(t.Expires), stamp(now))
	}
	return t, nil
}

// sameHost compares host names as SPEC §4.4 does: ASCII case-insensitively
// and without a trailing dot.
func sameHost(a, b string) bool {
	a, b = trimDot(a), trimDot(b)
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lower(a[i]) != lower(b[i]) {
			return false
		}
	}
	return true
}

func trimDot(s string) string {
	if len(s) > 0 && s[len(s)-1] == '.' {
		return s[:len(s)-1]
	}
	return s
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
