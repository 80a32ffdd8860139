package wire

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"

	"sperli/codes"
)

// The work queue's messages (SPEC §19, docs/workqueue.md "The messages"):
// requests and dones (tag 1), leases and the end (tag 2), log records and
// the master's end (tags 3 and 5), the buddy's acknowledgement (tag 4),
// the log file's chunks, and the fixed parts of the queue's start. Every
// decoder checks lengths and ranges against what the caller knows (the
// queue's items, the job's slots) and allocates nothing for a length a
// peer sent before its bytes are there. A refusal is H1627 (the caller
// names the peer); its Msg says what was got and what was wanted.

// The first byte of a work queue message, part of the protocol: append
// only.
const (
	WorkRequest   = 'R' // worker → master: the next task, please
	WorkDone      = 'D' // worker → master: a result, and a request
	WorkLease     = 'L' // master → worker: a lease
	WorkEnd       = 'E' // master → worker, buddy or rank 0: the end
	WorkPublished = 'P' // a log record: a result published
	WorkExecuted  = 'X' // a log record: an execution not published
)

// WorkFence is a lease's fence: the generation it was made in and its
// number there.
type WorkFence struct {
	Gen   uint32
	Lease uint64
}

// WorkRecord is one record of a queue's log: a result published
// (WorkPublished, with its bytes) or an execution that was not
// (WorkExecuted: a duplicate or a stale fence), with its fence, item, the
// slot that computed it and its result's SHA-256.
type WorkRecord struct {
	Kind   byte
	Fence  WorkFence
	Item   int
	Slot   int
	Sum    [32]byte
	Result []byte
}

// WorkRecordHead is a record's size without its result.
const WorkRecordHead = 1 + 4 + 8 + 4 + 4 + 32 + 4

// workDoneHead is a done's size without its result.
const workDoneHead = 1 + 4 + 8 + 4

// WorkLeaseSize is a lease's size.
const WorkLeaseSize = 1 + 4 + 8 + 4

func workErr(format string, args ...any) error {
	return codes.New(codes.ProtocolViolation, format, args...)
}

// AppendWorkRecord appends r encoded.
func AppendWorkRecord(b []byte, r WorkRecord) []byte {
	b = append(b, r.Kind)
	b = binary.BigEndian.AppendUint32(b, r.Fence.Gen)
	b = binary.BigEndian.AppendUint64(b, r.Fence.Lease)
	b = binary.BigEndian.AppendUint32(b, uint32(r.Item))
	b = binary.BigEndian.AppendUint32(b, uint32(r.Slot))
	b = append(b, r.Sum[:]...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.Result)))
	return append(b, r.Result...)
}

// DecodeWorkRecords decodes the records b of the log of a queue of items
// items in a job of slots slots. A record of an unknown kind, of an item
// or slot out of range, with a result longer than the bytes left, an
// execution with a result, or a publication whose result does not match
// its SHA-256 is refused. The results are copies: they do not alias b.
func DecodeWorkRecords(b []byte, items, slots int) ([]WorkRecord, error) {
	var out []WorkRecord
	for len(b) > 0 {
		r, n, err := decodeWorkRecord(b, items, slots)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
		b = b[n:]
	}
	return out, nil
}

func decodeWorkRecord(b []byte, items, slots int) (WorkRecord, int, error) {
	if len(b) < WorkRecordHead {
		return WorkRecord{}, 0, workErr("a log record cut short (%d bytes)", len(b))
	}
	r := WorkRecord{Kind: b[0], Fence: WorkFence{binary.BigEndian.Uint32(b[1:]), binary.BigEndian.Uint64(b[5:])}}
	item, slot := uint64(binary.BigEndian.Uint32(b[13:])), uint64(binary.BigEndian.Uint32(b[17:]))
	copy(r.Sum[:], b[21:53])
	size := uint64(binary.BigEndian.Uint32(b[53:]))
	rest := b[WorkRecordHead:]
	switch {
	case r.Kind != WorkPublished && r.Kind != WorkExecuted:
		return WorkRecord{}, 0, workErr("a log record of kind %#x", r.Kind)
	case item >= uint64(max(items, 0)) || slot >= uint64(max(slots, 0)):
		return WorkRecord{}, 0, workErr("a log record of item %d by slot %d (%d items, %d slots)", item, slot, items, slots)
	case size > uint64(len(rest)) || (r.Kind == WorkExecuted && size != 0):
		return WorkRecord{}, 0, workErr("a %c log record with a result of %d bytes (%d left)", r.Kind, size, len(rest))
	}
	r.Item, r.Slot = int(item), int(slot)
	if r.Kind == WorkPublished {
		r.Result = append([]byte{}, rest[:size]...)
		if sha256.Sum256(r.Result) != r.Sum {
			return WorkRecord{}, 0, workErr("a log record of item %d whose result does not match its SHA-256", r.Item)
		}
	}
	return r, WorkRecordHead + int(size), nil
}

// WorkMsg is a decoded request, done, lease or end. For a done Result
// aliases the decoded bytes.
type WorkMsg struct {
	Kind   byte
	Fence  WorkFence
	Item   int
	Result []byte
}

// AppendWorkDone appends a done of item with fence f and its result.
func AppendWorkDone(b []byte, f WorkFence, item int, result []byte) []byte {
	b = append(b, WorkDone)
	b = binary.BigEndian.AppendUint32(b, f.Gen)
	b = binary.BigEndian.AppendUint64(b, f.Lease)
	b = binary.BigEndian.AppendUint32(b, uint32(item))
	return append(b, result...)
}

// DecodeWorkRequest decodes a worker's message of a queue of items items:
// a request (one byte) or a done of an item in range.
func DecodeWorkRequest(p []byte, items int) (WorkMsg, error) {
	switch {
	case len(p) == 1 && p[0] == WorkRequest:
		return WorkMsg{Kind: WorkRequest}, nil
	case len(p) >= workDoneHead && p[0] == WorkDone:
		m := WorkMsg{Kind: WorkDone, Fence: WorkFence{binary.BigEndian.Uint32(p[1:]), binary.BigEndian.Uint64(p[5:])}, Result: p[workDoneHead:]}
		item := uint64(binary.BigEndian.Uint32(p[13:]))
		if item >= uint64(max(items, 0)) {
			return WorkMsg{}, workErr("a done of item %d with fence (%d, %d), which no master gave it (%d items)", item, m.Fence.Gen, m.Fence.Lease, items)
		}
		m.Item = int(item)
		return m, nil
	}
	return WorkMsg{}, workErr("a request of %d bytes that is no request or done", len(p))
}

// AppendWorkLease appends a lease of item with fence f.
func AppendWorkLease(b []byte, f WorkFence, item int) []byte {
	b = append(b, WorkLease)
	b = binary.BigEndian.AppendUint32(b, f.Gen)
	b = binary.BigEndian.AppendUint64(b, f.Lease)
	return binary.BigEndian.AppendUint32(b, uint32(item))
}

// DecodeWorkReply decodes a master's reply of a queue of items items: a
// lease of an item in range, or the end (one byte).
func DecodeWorkReply(p []byte, items int) (WorkMsg, error) {
	switch {
	case len(p) == WorkLeaseSize && p[0] == WorkLease:
		m := WorkMsg{Kind: WorkLease, Fence: WorkFence{binary.BigEndian.Uint32(p[1:]), binary.BigEndian.Uint64(p[5:])}}
		item := uint64(binary.BigEndian.Uint32(p[13:]))
		if item >= uint64(max(items, 0)) {
			return WorkMsg{}, workErr("a lease of item %d (%d items)", item, items)
		}
		m.Item = int(item)
		return m, nil
	case len(p) == 1 && p[0] == WorkEnd:
		return WorkMsg{Kind: WorkEnd}, nil
	}
	return WorkMsg{}, workErr("a reply of %d bytes that is no lease or end", len(p))
}

// DecodeWorkLogMsg decodes a master's message to its buddy or to rank 0
// (tags 3 and 5): the end (one byte; end is true) or exactly one record.
func DecodeWorkLogMsg(p []byte, items, slots int) (rec WorkRecord, end bool, err error) {
	if len(p) == 1 && p[0] == WorkEnd {
		return WorkRecord{}, true, nil
	}
	r, n, err := decodeWorkRecord(p, items, slots)
	if err != nil {
		return WorkRecord{}, false, err
	}
	if n != len(p) {
		return WorkRecord{}, false, workErr("a log message of %d bytes after its record of %d", len(p), n)
	}
	return r, false, nil
}

// DecodeWorkAck checks a buddy's acknowledgement: it is empty.
func DecodeWorkAck(p []byte) error {
	if len(p) != 0 {
		return workErr("a log acknowledgement of %d bytes", len(p))
	}
	return nil
}

// WorkStartSize is a rank's part of the queue's first allgather.
const WorkStartSize = 32 + 2 + 1 + 1

// WorkStart is a rank's part of a queue's first allgather: the SHA-256
// of its name, options and items, the code of its disk error (rank 0),
// whether it writes the log and whether it found one on disk.
type WorkStart struct {
	Sum           [32]byte
	Code          codes.Code
	Writes, Found bool
}

// AppendWorkStart appends s encoded.
func AppendWorkStart(b []byte, s WorkStart) []byte {
	b = append(b, s.Sum[:]...)
	b = binary.BigEndian.AppendUint16(b, uint16(s.Code))
	return append(b, flag(s.Writes), flag(s.Found))
}

func flag(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// DecodeWorkStart decodes a rank's part of the first allgather. A code
// that is unknown or a flag that is not 0 or 1 is refused.
func DecodeWorkStart(p []byte) (WorkStart, error) {
	var s WorkStart
	if len(p) != WorkStartSize {
		return s, workErr("a start of %d bytes, want %d", len(p), WorkStartSize)
	}
	copy(s.Sum[:], p)
	s.Code = codes.Code(binary.BigEndian.Uint16(p[32:]))
	if s.Code != 0 && !s.Code.Valid() {
		return s, workErr("a start with code %d", s.Code)
	}
	if p[34] > 1 || p[35] > 1 {
		return s, workErr("a start with disk flags of %d and %d", p[34], p[35])
	}
	s.Writes, s.Found = p[34] == 1, p[35] == 1
	return s, nil
}

// WorkHeadSize is a rank's part of the start's second allgather: how many
// items it holds published (u64) and its log's length (u64).
const WorkHeadSize = 16

// AppendWorkHead appends a log's head.
func AppendWorkHead(b []byte, published, length uint64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(b, published), length)
}

// DecodeWorkHead decodes a log's head of a queue of items items whose log
// travels in at most maxLog bytes.
func DecodeWorkHead(p []byte, items int, maxLog uint64) (published, length uint64, err error) {
	if len(p) != WorkHeadSize {
		return 0, 0, workErr("a log's head of %d bytes, want %d", len(p), WorkHeadSize)
	}
	published, length = binary.BigEndian.Uint64(p), binary.BigEndian.Uint64(p[8:])
	if length > maxLog || published > uint64(max(items, 0)) {
		return 0, 0, workErr("a log of %d published items in %d bytes (%d items, at most %d bytes)", published, length, items, maxLog)
	}
	return published, length, nil
}

// WorkExtrasSize is a rank's part of the start's third allgather: the
// length of the executions it knows beyond the log (u32) and whether it
// holds publications beyond it (a byte).
const WorkExtrasSize = 5

// AppendWorkExtras appends the part.
func AppendWorkExtras(b []byte, n int, more bool) []byte {
	return append(binary.BigEndian.AppendUint32(b, uint32(n)), flag(more))
}

// DecodeWorkExtras decodes the part; n is at most maxN.
func DecodeWorkExtras(p []byte, maxN int) (n int, more bool, err error) {
	if len(p) != WorkExtrasSize {
		return 0, false, workErr("a start's extras of %d bytes, want %d", len(p), WorkExtrasSize)
	}
	got := uint64(binary.BigEndian.Uint32(p))
	if got > uint64(max(maxN, 0)) || p[4] > 1 {
		return 0, false, workErr("%d bytes of executions beyond the log, and a flag of %d", got, p[4])
	}
	return int(got), p[4] == 1, nil
}

// AppendWorkLength appends the length (u64) a broadcast of a log sends
// first.
func AppendWorkLength(b []byte, n int) []byte { return binary.BigEndian.AppendUint64(b, uint64(n)) }

// DecodeWorkLength decodes a log's length, at most maxLog.
func DecodeWorkLength(p []byte, maxLog uint64) (uint64, error) {
	if len(p) != 8 {
		return 0, workErr("a log's length in %d bytes", len(p))
	}
	n := binary.BigEndian.Uint64(p)
	if n > maxLog {
		return 0, workErr("a log of %d bytes, at most %d", n, maxLog)
	}
	return n, nil
}

// WorkFileMagic begins a queue's log file (3: slots are u32; a file of
// version 2, whose slots were u16, is refused).
const WorkFileMagic = "SPRLWQ3\x00"

// WorkChunk is one chunk of a log file: its records' bytes and the job
// key's signature of them (WorkChunkMsg).
type WorkChunk struct {
	Records, Sig []byte
}

// AppendWorkFileHead appends a log file's head: the magic and the SHA-256
// of the queue's name and items.
func AppendWorkFileHead(b []byte, sum [32]byte) []byte {
	return append(append(b, WorkFileMagic...), sum[:]...)
}

// AppendWorkChunk appends a chunk: its records' length (u32), the records
// and the signature.
func AppendWorkChunk(b, records, sig []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(records)))
	return append(append(b, records...), sig...)
}

// WorkChunkMsg is what chunk k's signature signs: the items' SHA-256, k,
// the records' SHA-256 and the signature of the chunk before (none for
// the first).
func WorkChunkMsg(sum [32]byte, k uint32, records, prev []byte) []byte {
	h := sha256.Sum256(records)
	b := binary.BigEndian.AppendUint32(append([]byte{}, sum[:]...), k)
	return append(append(b, h[:]...), prev...)
}

// DecodeWorkFile splits the bytes b of a log file of the queue whose
// items' SHA-256 is sum into its whole chunks (each signature sigSize
// bytes), and returns the length of the bytes that hold them: a chunk cut
// short at the end (a crash while it was written) is left out. The chunks
// alias b; their signatures are the caller's to check.
func DecodeWorkFile(b []byte, sum [32]byte, sigSize int) ([]WorkChunk, int, error) {
	head := len(WorkFileMagic) + 32
	if len(b) < head || string(b[:len(WorkFileMagic)]) != WorkFileMagic {
		return nil, 0, workErr("not a work queue's log (%d bytes)", len(b))
	}
	if !bytes.Equal(b[len(WorkFileMagic):head], sum[:]) {
		return nil, 0, workErr("it is of other items")
	}
	var out []WorkChunk
	rest := b[head:]
	for len(rest) >= 4 {
		n := uint64(binary.BigEndian.Uint32(rest))
		if uint64(len(rest)) < 4+n+uint64(sigSize) {
			break // cut short by a crash while it was written
		}
		out = append(out, WorkChunk{Records: rest[4 : 4+n], Sig: rest[4+n : 4+n+uint64(sigSize)]})
		rest = rest[4+n+uint64(sigSize):]
	}
	return out, len(b) - len(rest), nil
}
