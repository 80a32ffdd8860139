package wire

import (
	"encoding/binary"

	"sperli/codes"
)

// HelloBody is the payload of a hello frame: the sender's silence limit,
// its join token (encoded by package pki), and the digests of the program
// it runs and of its loss policy (protocol.md §3.1), which every slot
// compares with its own on every link (runtime/join.go).
type HelloBody struct {
	SilenceMS uint32
	Token     []byte
	// Program is the SHA-256 digest of the sender's program and its
	// arguments (job.ProgramDigest), or all zero when its job does not
	// say that every slot runs one program.
	Program [DigestSize]byte
	// Policy is the SHA-256 digest of its loss policy (job.PolicyDigest).
	Policy [DigestSize]byte
}

// helloVersion is the first byte of a hello payload (2: the digests).
const helloVersion = 2

// MaxToken is the largest token a hello may carry.
const MaxToken = 8192

// DigestSize is the size of a hello's digests (SHA-256).
const DigestSize = 32

// HelloFixed is a hello payload's size without its token.
const HelloFixed = 7 + 2*DigestSize

// AppendHello appends the encoded hello payload to b.
func AppendHello(b []byte, h HelloBody) []byte {
	b = append(b, helloVersion)
	b = binary.BigEndian.AppendUint32(b, h.SilenceMS)
	b = binary.BigEndian.AppendUint16(b, uint16(len(h.Token)))
	b = append(b, h.Token...)
	b = append(b, h.Program[:]...)
	return append(b, h.Policy[:]...)
}

// DecodeHello decodes a hello payload. Anything malformed is H1602. The
// token aliases p.
func DecodeHello(p []byte) (HelloBody, error) {
	var h HelloBody
	if len(p) < HelloFixed {
		return h, codes.New(codes.HelloMalformed, "hello is %d bytes, want at least %d", len(p), HelloFixed)
	}
	if p[0] != helloVersion {
		return h, codes.New(codes.HelloMalformed, "hello version is %d, want %d", p[0], helloVersion)
	}
	h.SilenceMS = binary.BigEndian.Uint32(p[1:])
	n := int(binary.BigEndian.Uint16(p[5:]))
	if n > MaxToken {
		return h, codes.New(codes.HelloMalformed, "hello token is %d bytes, limit %d", n, MaxToken)
	}
	if len(p) != HelloFixed+n {
		return h, codes.New(codes.HelloMalformed, "hello is %d bytes, its token length says %d", len(p), HelloFixed+n)
	}
	h.Token = p[7 : 7+n]
	copy(h.Program[:], p[7+n:])
	copy(h.Policy[:], p[7+n+DigestSize:])
	return h, nil
}

// Reason is the payload of a refuse or abort frame: a code, what ended the
// job, and a message (at most MaxText bytes).
type Reason struct {
	Code  codes.Code
	Cause codes.CauseKind
	Rank  int32 // the rank the cause is about, or -1
	Msg   string
}

// AppendReason appends the encoded reason to b; a longer message is cut.
func AppendReason(b []byte, r Reason) []byte {
	msg := r.Msg
	if len(msg) > MaxText {
		msg = msg[:MaxText]
	}
	b = binary.BigEndian.AppendUint16(b, uint16(r.Code))
	b = append(b, byte(r.Cause))
	b = binary.BigEndian.AppendUint32(b, uint32(r.Rank))
	return append(b, msg...)
}

// DecodeReason decodes a refuse or abort payload; malformed is H1609.
func DecodeReason(p []byte) (Reason, error) {
	var r Reason
	if len(p) < 7 || len(p) > 7+MaxText {
		return r, codes.New(codes.FrameMalformed, "reason is %d bytes, want 7 to %d", len(p), 7+MaxText)
	}
	r.Code = codes.Code(binary.BigEndian.Uint16(p))
	r.Cause = codes.CauseKind(p[2])
	r.Rank = int32(binary.BigEndian.Uint32(p[3:]))
	r.Msg = string(p[7:])
	if !r.Code.Valid() {
		return r, codes.New(codes.FrameMalformed, "reason code %d is unknown", uint16(r.Code))
	}
	if r.Cause > codes.CauseLauncher {
		return r, codes.New(codes.FrameMalformed, "reason cause %d is unknown", uint8(r.Cause))
	}
	return r, nil
}

// Call describes one collective call; every collective frame starts with it,
// so that a frame of another call is seen, not guessed (SPEC §8).
type Call struct {
	Kind   CollKind // which collective
	Type   uint8    // element type (runtime's table), 0 where none
	Op     uint8    // reduction (runtime's table), 0 where none
	Root   uint32   // the root rank as the sender called it
	Length uint32   // the sender's own data length in bytes
}

// CallSize is the encoded size of a Call.
const CallSize = 12

// AppendCall appends the encoded call descriptor to b.
func AppendCall(b []byte, c Call) []byte {
	b = append(b, byte(c.Kind), c.Type, c.Op, 0)
	b = binary.BigEndian.AppendUint32(b, c.Root)
	return binary.BigEndian.AppendUint32(b, c.Length)
}

// DecodeCall decodes the call descriptor at the start of a collective
// payload and returns the rest. Malformed is H1609.
func DecodeCall(p []byte) (Call, []byte, error) {
	var c Call
	if len(p) < CallSize {
		return c, nil, codes.New(codes.FrameMalformed, "collective payload is %d bytes, want at least %d", len(p), CallSize)
	}
	if p[3] != 0 {
		return c, nil, codes.New(codes.FrameMalformed, "collective descriptor reserved byte is %d, want 0", p[3])
	}
	c.Kind, c.Type, c.Op = CollKind(p[0]), p[1], p[2]
	c.Root = binary.BigEndian.Uint32(p[4:])
	c.Length = binary.BigEndian.Uint32(p[8:])
	return c, p[CallSize:], nil
}

// Relayed is a relay frame's payload (docs/protocol.md §12.7): an
// agreement frame's payload (Inner: purpose and message) from slot Origin
// for slot Dest, which has no link to it, passed on over the tree. Hops
// counts down at each slot that passes it on. Origin signs it with its
// certificate's Ed25519 key (Signed), and sends the certificate along, so
// that a slot that never linked to it can check it (to the job's CA).
type Relayed struct {
	Origin, Dest int
	Seq          uint64 // the origin's count of its relayed messages: a message sent again is a new frame, a frame repeated is not
	Hops         uint8
	Cert         []byte // DER, at most MaxRelayCert bytes
	Sig          []byte // ed25519.SignatureSize bytes
	Inner        []byte // 1 to MaxAgree bytes
}

// RelayHead is a relay payload's fixed part: origin u32, dest u32, seq
// u64, hops u8, the certificate's length u16.
const RelayHead = 19

// MaxRelayCert bounds a relayed certificate.
const MaxRelayCert = 4096

// Signed is what Origin signs: who, for whom, which, and what.
func (r Relayed) Signed() []byte {
	b := append([]byte("sperli relay\x00"), make([]byte, 16)...)
	binary.BigEndian.PutUint32(b[13:], uint32(r.Origin))
	binary.BigEndian.PutUint32(b[17:], uint32(r.Dest))
	binary.BigEndian.PutUint64(b[21:], r.Seq)
	return append(b, r.Inner...)
}

// AppendRelayed appends r's encoding to b.
func AppendRelayed(b []byte, r Relayed) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(r.Origin))
	b = binary.BigEndian.AppendUint32(b, uint32(r.Dest))
	b = binary.BigEndian.AppendUint64(b, r.Seq)
	b = append(b, r.Hops)
	b = binary.BigEndian.AppendUint16(b, uint16(len(r.Cert)))
	b = append(b, r.Cert...)
	b = append(b, r.Sig...)
	return append(b, r.Inner...)
}

// DecodeRelayed decodes a relay payload of a job of slots slots; every
// length and slot is checked, nothing is allocated (the fields alias p).
func DecodeRelayed(p []byte, slots int) (Relayed, error) {
	var r Relayed
	if len(p) < RelayHead+64+1 {
		return r, codes.New(codes.FrameMalformed, "relay of %d bytes, want at least %d", len(p), RelayHead+64+1)
	}
	o, d := binary.BigEndian.Uint32(p), binary.BigEndian.Uint32(p[4:])
	if o >= uint32(slots) || d >= uint32(slots) || o == d {
		return r, codes.New(codes.FrameMalformed, "relay from slot %d to slot %d in a job of %d slots", o, d, slots)
	}
	r.Origin, r.Dest, r.Seq, r.Hops = int(o), int(d), binary.BigEndian.Uint64(p[8:]), p[16]
	n := int(binary.BigEndian.Uint16(p[17:]))
	if n == 0 || n > MaxRelayCert || len(p) < RelayHead+n+64+1 || len(p)-RelayHead-n-64 > MaxAgree {
		return r, codes.New(codes.FrameMalformed, "relay of %d bytes with a certificate of %d", len(p), n)
	}
	r.Cert = p[RelayHead : RelayHead+n]
	r.Sig = p[RelayHead+n : RelayHead+n+64]
	r.Inner = p[RelayHead+n+64:]
	return r, nil
}
