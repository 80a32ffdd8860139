package runtime_test

import (
	"encoding/binary"
	"testing"

	"sperli/runtime"
	"sperli/wire"
)

// The hostile peer: a rank that joined with the credentials of its slot
// and then writes frames by hand. Frames are built from the layout of
// docs/protocol.md §2.1 byte by byte, not with package wire, so a test
// also checks that the document and the code agree.

// Frame types and flags of docs/protocol.md §2.3.
const (
	tHello      = 1
	tRefuse     = 2
	tData       = 3
	tHeartbeat  = 4
	tBye        = 5
	tAbort      = 6
	tCollective = 7
	tCheckpoint = 8
	tCredit     = 9
	tSilence    = 10

	fVoid = 0x0001
	fAck  = 0x0002
)

// rawFrame is one frame's header fields as protocol.md §2.1 lists them.
type rawFrame struct {
	Type        byte
	Flags       uint16
	Incarnation uint32
	Source      uint32
	Tag         uint32
	Length      uint32 // with lengthSet, sent as is; else len(Payload)
	lengthSet   bool
	Seq         uint64
	Payload     []byte
}

// bytes lays the frame out: magic "SPRL", the version, type, flags,
// incarnation, source, tag, length, seq, all big-endian, then the payload.
func (f rawFrame) bytes() []byte {
	b := make([]byte, 32, 32+len(f.Payload))
	copy(b, "SPRL")
	b[4] = wire.Version
	b[5] = f.Type
	binary.BigEndian.PutUint16(b[6:], f.Flags)
	binary.BigEndian.PutUint32(b[8:], f.Incarnation)
	binary.BigEndian.PutUint32(b[12:], f.Source)
	binary.BigEndian.PutUint32(b[16:], f.Tag)
	n := uint32(len(f.Payload))
	if f.lengthSet {
		n = f.Length
	}
	binary.BigEndian.PutUint32(b[20:], n)
	binary.BigEndian.PutUint64(b[24:], f.Seq)
	return append(b, f.Payload...)
}

// hostile writes frames as rank from of the job to rank to.
type hostile struct {
	t    *testing.T
	c    *runtime.Comm
	from int
}

func newHostile(t *testing.T, c *runtime.Comm) *hostile {
	return &hostile{t: t, c: c, from: c.Slot()} // a rank of generation 0 or a spare
}

// write sends the frames, stamped with the hostile rank's source and
// incarnation unless the frame sets them.
func (h *hostile) write(to int, frames ...rawFrame) {
	h.t.Helper()
	var b []byte
	for _, f := range frames {
		if f.Source == 0 {
			f.Source = uint32(h.from)
		}
		if f.Incarnation == 0 {
			f.Incarnation = h.c.Incarnation()
		}
		b = append(b, f.bytes()...)
	}
	if err := runtime.RawWriteForTest(h.c, to, b); err != nil {
		h.t.Logf("hostile write to rank %d: %v", to, err)
	}
}
