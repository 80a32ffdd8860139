// Package wire is the Sperli frame format (SPEC §5, docs/protocol.md): the
// fixed 32-byte header, its checks, the encodings of the small payloads
// (hello, refusal and abort reasons, collective call descriptors) and the
// kinds of collective call (CollKind). It does no I/O policy and starts no
// goroutine.
//
// Every frame is a header followed by Length payload bytes. A reader decodes
// the whole header before it reads one payload byte:
//
//	var buf [wire.HeaderSize]byte
//	h, err := wire.ReadHeader(conn, buf[:], peerRank)
//	if err != nil {
//		// *codes.Error: H1609 malformed or wrong source, H1608 too large
//	}
//	payload := make([]byte, h.Length)
//	io.ReadFull(conn, payload)
//
// All header fields are big-endian; the data of collectives is
// little-endian as SPEC §8.2 says.
package wire
