package wire

import (
	"encoding/binary"

	"sperli/codes"
)

// HelloBody is the payload of a hello frame: the sender's silence limit and
// its join token (encoded by package pki).
type HelloBody struct {
	SilenceMS uint32
	Token     []byte
}

// helloVersion is the first byte of a hello payload.
const helloVersion = 1

// MaxToken is the largest token a hello may carry.
const MaxToken = 8192

// AppendHello appends the encoded hello payload to b.
func AppendHello(b []byte, h HelloBody) []byte {
	b = append(b, helloVersion)
	b = binary.BigEndian.AppendUint32(b, h.SilenceMS)
	b = binary.BigEndian.AppendUint16(b, uint16(len(h.Token)))
	return append(b, h.Token...)
}

// DecodeHello decodes a hello payload. Anything malformed is H1602. The
// token aliases p.
func DecodeHello(p []byte) (HelloBody, error) {
	var h HelloBody
	if len(p) < 7 {
		return h, codes.New(codes.HelloMalformed, "hello is %d bytes, want at least 7", len(p))
	}
	if p[0] != helloVersion {
		return h, codes.New(codes.HelloMalformed, "hello version is %d, want %d", p[0], helloVersion)
	}
	h.SilenceMS = binary.BigEndian.Uint32(p[1:])
	n := int(binary.BigEndian.Uint16(p[5:]))
	if n > MaxToken {
		return h, codes.New(codes.HelloMalformed, "hello token is %d bytes, limit %d", n, MaxToken)
	}
	if len(p) != 7+n {
		return h, codes.New(codes.HelloMalformed, "hello is %d bytes, its token length says %d", len(p), 7+n)
	}
	h.Token = p[7:]
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
	Kind   uint8  // which collective (runtime's table)
	Type   uint8  // element type (runtime's table), 0 where none
	Op     uint8  // reduction (runtime's table), 0 where none
	Root   uint32 // the root rank as the sender called it
	Length uint32 // the sender's own data length in bytes
}

// CallSize is the encoded size of a Call.
const CallSize = 12

// AppendCall appends the encoded call descriptor to b.
func AppendCall(b []byte, c Call) []byte {
	b = append(b, c.Kind, c.Type, c.Op, 0)
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
	c.Kind, c.Type, c.Op = p[0], p[1], p[2]
	c.Root = binary.BigEndian.Uint32(p[4:])
	c.Length = binary.BigEndian.Uint32(p[8:])
	return c, p[CallSize:], nil
}
