package wire

import (
	"encoding/binary"
	"fmt"
	"io"

	"sperli/codes"
)

// Limits of the wire (SPEC §5, §6).
const (
	HeaderSize = 32        // bytes of every frame header
	MaxPayload = 16 << 20  // 16,777,216 bytes: the largest payload of any frame
	MaxTag     = 1<<31 - 1 // the largest message tag
	Version    = 9         // the protocol version in every header (9: the hello carries the digests of the program and the loss policy, compared on every link; 8: a work queue's start sends every rank the log on disk rank 0 found; 7: alltoall runs by bruck for blocks up to 8 KiB and 4 MiB a rank from 33 ranks; 6: slots are u32 in layouts, agreements and work queue records; 5: a layout's ranks as runs; 4: links on demand — any slot dials, the dup flag, lost and fin frames; 3: agreement decisions are signed and confirmed; 2: the barrier became a dissemination; docs/protocol.md)
	Magic      = "SPRL"    // the first four bytes of every frame
	MaxText    = 512       // the longest text (a refusal's or abort's message) a frame carries
)

// Type is a frame type. The numbers are part of the protocol: append only.
type Type uint8

// Frame types.
const (
	Hello      Type = 1  // the token, both ways, right after the TLS handshake
	Refuse     Type = 2  // a refusal code and message, then the connection closes
	Data       Type = 3  // a point-to-point message
	Heartbeat  Type = 4  // liveness, empty
	Bye        Type = 5  // the sender finished; not a loss
	Abort      Type = 6  // the job is over: cause kind, rank, code, message
	Collective Type = 7  // a collective's contribution or result, with its call descriptor
	Checkpoint Type = 8  // checkpoint traffic (files, hashes, COMMIT)
	Credit     Type = 9  // flow-control credit returned to the sender
	Silence    Type = 10 // the sender's silence limit changed
	Agree      Type = 11 // a message of an agreement: on the next generation (SPEC §10.2), or of comm.agree (§10.3)
	Revoke     Type = 12 // the communicator whose id is the payload is revoked (SPEC §10.3)
	Lost       Type = 13 // news: the slot its reason names is lost; each slot passes it on once (SPEC §18)
	Fin        Type = 14 // the end of the job over the tree: finished, subtree done, all done (SPEC §18)
	Relay      Type = 15 // an agreement message of another slot, signed by it, passed on over the tree (SPEC §18)
	maxType         = Relay
)

var typeNames = [...]string{"", "hello", "refuse", "data", "heartbeat", "bye", "abort", "collective", "checkpoint", "credit", "silence", "agree", "revoke", "lost", "fin", "relay"}

func (t Type) String() string {
	if t >= 1 && t <= maxType {
		return typeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Flags of a frame. Which bits a type allows is fixed per type; any other bit
// set is a malformed header.
const (
	FlagVoid uint16 = 1 << 0 // collective: the sender declares this call void (H1618)
	FlagAck  uint16 = 1 << 1 // collective/checkpoint: a reply from the root
	FlagDup  uint16 = 1 << 2 // hello of a listener: this connection is not the link, the listener's own dial is (protocol.md §1.6)
)

var allowedFlags = [...]uint16{
	Hello:      FlagDup,
	Collective: FlagVoid | FlagAck,
	Checkpoint: FlagAck,
}

// lenRange is the payload lengths each type allows, checked on the header
// so that no payload a type cannot have is ever read: fixed lengths, the
// reason's 7 … 7+MaxText of refuse and abort, a collective's descriptor.
var lenRange = [...][2]uint32{
	Hello: {0, MaxPayload}, Refuse: {7, 7 + MaxText}, Data: {0, MaxPayload},
	Heartbeat: {0, 0}, Bye: {0, 0}, Abort: {7, 7 + MaxText},
	Collective: {CallSize, MaxPayload}, Checkpoint: {0, MaxPayload},
	Credit: {8, 8}, Silence: {4, 4}, Agree: {1, MaxAgree}, Revoke: {4, 4},
	Lost: {7, 7 + MaxText}, Fin: {1, 1}, Relay: {RelayHead + 64 + 1, RelayHead + MaxRelayCert + 64 + MaxAgree},
}

// MaxAgree is the longest agreement message: a few layouts of at most
// 4096 slots each.
const MaxAgree = 1 << 16

// Header is a decoded frame header. Seq is the collective call number for
// collective frames and is zero otherwise unless a type says so.
type Header struct {
	Type        Type
	Flags       uint16
	Incarnation uint32
	Source      uint32
	Tag         uint32
	Length      uint32
	Seq         uint64
}

// Put writes h into b, which must be at least HeaderSize bytes.
func (h *Header) Put(b []byte) {
	_ = b[HeaderSize-1]
	copy(b[0:4], Magic)
	b[4] = Version
	b[5] = byte(h.Type)
	binary.BigEndian.PutUint16(b[6:], h.Flags)
	binary.BigEndian.PutUint32(b[8:], h.Incarnation)
	binary.BigEndian.PutUint32(b[12:], h.Source)
	binary.BigEndian.PutUint32(b[16:], h.Tag)
	binary.BigEndian.PutUint32(b[20:], h.Length)
	binary.BigEndian.PutUint64(b[24:], h.Seq)
}

// AnySource lets Decode accept a header of any source rank (the hello, whose
// sender is not yet known).
const AnySource = -1

// Decode checks and decodes a whole header from b (HeaderSize bytes). It
// returns an *codes.Error: H1609 for an unknown magic, version, type or flag
// bit, a payload length a type does not allow, a tag out of range, or a
// source other than source (unless source is AnySource); H1608 for a payload
// over MaxPayload. Nothing about the payload is read or assumed beyond
// the lengths its type allows.
func Decode(b []byte, source int) (Header, error) {
	var h Header
	if len(b) < HeaderSize {
		return h, codes.New(codes.FrameMalformed, "frame header is %d bytes, want %d", len(b), HeaderSize)
	}
	if string(b[0:4]) != Magic {
		return h, codes.New(codes.FrameMalformed, "frame magic is %q, want %q", b[0:4], Magic)
	}
	if b[4] != Version {
		return h, codes.New(codes.FrameMalformed, "frame version is %d, want %d", b[4], Version)
	}
	h.Type = Type(b[5])
	h.Flags = binary.BigEndian.Uint16(b[6:])
	h.Incarnation = binary.BigEndian.Uint32(b[8:])
	h.Source = binary.BigEndian.Uint32(b[12:])
	h.Tag = binary.BigEndian.Uint32(b[16:])
	h.Length = binary.BigEndian.Uint32(b[20:])
	h.Seq = binary.BigEndian.Uint64(b[24:])
	if h.Type < 1 || h.Type > maxType {
		return h, codes.New(codes.FrameMalformed, "frame type %d is unknown", uint8(h.Type))
	}
	var allowed uint16
	if int(h.Type) < len(allowedFlags) {
		allowed = allowedFlags[h.Type]
	}
	if h.Flags&^allowed != 0 {
		return h, codes.New(codes.FrameMalformed, "%s frame has unknown flag bits %#04x", h.Type, h.Flags&^allowed)
	}
	if h.Tag > MaxTag {
		return h, codes.New(codes.FrameMalformed, "%s frame has tag %d, want at most %d", h.Type, h.Tag, MaxTag)
	}
	if source != AnySource && h.Source != uint32(source) {
		return h, codes.New(codes.FrameMalformed, "%s frame says it is from rank %d, the peer is rank %d", h.Type, h.Source, source)
	}
	if h.Length > MaxPayload {
		return h, codes.New(codes.FrameTooLarge, "%s frame payload is %d bytes, limit %d", h.Type, h.Length, MaxPayload)
	}
	if r := lenRange[h.Type]; h.Length < r[0] || h.Length > r[1] {
		if r[0] == r[1] {
			return h, codes.New(codes.FrameMalformed, "%s frame payload is %d bytes, want %d", h.Type, h.Length, r[0])
		}
		return h, codes.New(codes.FrameMalformed, "%s frame payload is %d bytes, want %d to %d", h.Type, h.Length, r[0], r[1])
	}
	return h, nil
}

// ReadHeader reads exactly HeaderSize bytes from r into buf (HeaderSize
// bytes, reused by the caller) and decodes them. It never reads a byte past
// the header. An I/O error is returned as it came.
func ReadHeader(r io.Reader, buf []byte, source int) (Header, error) {
	if _, err := io.ReadFull(r, buf[:HeaderSize]); err != nil {
		return Header{}, err
	}
	return Decode(buf[:HeaderSize], source)
}
