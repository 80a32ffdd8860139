package wire

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"sperli/codes"
)

// The work queue's messages (workq.go): every encoder's bytes decode
// back to what was encoded, and every decoder refuses what it checks
// with H1627 and a message that names the problem.

// The queue the tests decode for: 6 items, a job of 4 slots, logs of at
// most 1 KiB, at most 512 bytes of extras, signatures of 8 bytes.
const (
	wqItems   = 6
	wqSlots   = 4
	wqMaxLog  = 1024
	wqMaxN    = 512
	wqSigSize = 8
)

var wqSum = sha256.Sum256([]byte("the queue's items"))

func wqPub(gen uint32, lease uint64, item, slot int, res string) WorkRecord {
	return WorkRecord{Kind: WorkPublished, Fence: WorkFence{Gen: gen, Lease: lease}, Item: item, Slot: slot, Sum: sha256.Sum256([]byte(res)), Result: []byte(res)}
}

func wqExec(gen uint32, lease uint64, item, slot int, res string) WorkRecord {
	return WorkRecord{Kind: WorkExecuted, Fence: WorkFence{Gen: gen, Lease: lease}, Item: item, Slot: slot, Sum: sha256.Sum256([]byte(res))}
}

func wqRecords(recs ...WorkRecord) []byte {
	var b []byte
	for _, r := range recs {
		b = AppendWorkRecord(b, r)
	}
	return b
}

// wqRefused checks that err is H1627 whose message says says.
func wqRefused(t *testing.T, what string, err error, says string) {
	t.Helper()
	e := codes.As(err)
	if e == nil || e.Code != codes.ProtocolViolation || !strings.Contains(e.Msg, says) {
		t.Fatalf("%s: error %v, want %v saying %q", what, err, codes.ProtocolViolation, says)
	}
}

// wqAllocated is the bytes f allocates.
func wqAllocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// wqEdit is a copy of b with f applied.
func wqEdit(b []byte, f func(b []byte)) []byte {
	c := bytes.Clone(b)
	f(c)
	return c
}

func TestWorkRecordLayout(t *testing.T) {
	r := wqPub(0x01020304, 0x05060708090a0b0c, 5, 3, "ab")
	want := []byte{'P', 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0, 0, 0, 5, 0, 0, 0, 3}
	want = append(want, r.Sum[:]...)
	want = append(want, 0, 0, 0, 2, 'a', 'b')
	if got := AppendWorkRecord([]byte("prefix"), r); !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Fatalf("AppendWorkRecord = %x, want %x", got, want)
	}
	if WorkRecordHead != len(want)-2 {
		t.Fatalf("WorkRecordHead = %d, want %d", WorkRecordHead, len(want)-2)
	}
}

func TestWorkRecordsRoundTrip(t *testing.T) {
	big := strings.Repeat("r", 70000)
	for _, tc := range []struct {
		name string
		recs []WorkRecord
	}{
		{"none", nil},
		{"a publication", []WorkRecord{wqPub(2, 7, 3, 1, "result")}},
		{"an execution", []WorkRecord{wqExec(1, 9, 0, 0, "other")}},
		{"a publication of an empty result", []WorkRecord{{Kind: WorkPublished, Item: 1, Slot: 2, Sum: sha256.Sum256(nil), Result: []byte{}}}},
		{"the last item and slot, the largest fence", []WorkRecord{wqPub(math.MaxUint32, math.MaxUint64, wqItems-1, wqSlots-1, "x")}},
		{"a result of 70,000 bytes", []WorkRecord{wqPub(0, 1, 2, 3, big)}},
		{"several of both kinds", []WorkRecord{wqPub(0, 1, 0, 0, "a"), wqExec(0, 2, 0, 1, "b"), wqPub(3, 4, 5, 3, "c"), wqExec(3, 5, 5, 2, "")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := wqRecords(tc.recs...)
			got, err := DecodeWorkRecords(b, wqItems, wqSlots)
			if err != nil || !reflect.DeepEqual(got, tc.recs) {
				t.Fatalf("DecodeWorkRecords = %+v, %v, want %+v", got, err, tc.recs)
			}
			if again := wqRecords(got...); !bytes.Equal(again, b) {
				t.Fatalf("the records encoded again are %x, want %x", again, b)
			}
			// The results are copies.
			for i := range b {
				b[i] ^= 0xff
			}
			if !reflect.DeepEqual(got, tc.recs) {
				t.Fatalf("the decoded records changed with the bytes: %+v", got)
			}
			// Each one alone is a log message.
			for _, r := range tc.recs {
				m, end, err := DecodeWorkLogMsg(AppendWorkRecord(nil, r), wqItems, wqSlots)
				if err != nil || end || !reflect.DeepEqual(m, r) {
					t.Fatalf("DecodeWorkLogMsg = %+v, %v, %v, want %+v", m, end, err, r)
				}
			}
		})
	}
}

func TestDecodeWorkRecordsRefused(t *testing.T) {
	p := AppendWorkRecord(nil, wqPub(2, 7, 3, 1, "abc"))
	x := AppendWorkRecord(nil, wqExec(1, 9, 0, 0, "other"))
	setU32 := func(b []byte, off int, v uint32) []byte {
		return wqEdit(b, func(b []byte) { binary.BigEndian.PutUint32(b[off:], v) })
	}
	const itemAt, slotAt, sumAt, sizeAt = 13, 17, 21, 53
	for _, tc := range []struct {
		name         string
		b            []byte
		items, slots int
		says         string
	}{
		{"kind 0", wqEdit(p, func(b []byte) { b[0] = 0 }), wqItems, wqSlots, "a log record of kind 0x0"},
		{"kind Q", wqEdit(p, func(b []byte) { b[0] = 'Q' }), wqItems, wqSlots, "a log record of kind 0x51"},
		{"kind p (lower case)", wqEdit(p, func(b []byte) { b[0] = 'p' }), wqItems, wqSlots, "a log record of kind 0x70"},
		{"kind E (the end is no record)", wqEdit(p, func(b []byte) { b[0] = WorkEnd }), wqItems, wqSlots, "a log record of kind 0x45"},
		{"kind D (a done is no record)", wqEdit(x, func(b []byte) { b[0] = WorkDone }), wqItems, wqSlots, "a log record of kind 0x44"},
		{"item = items", setU32(p, itemAt, wqItems), wqItems, wqSlots, "a log record of item 6 by slot 1 (6 items, 4 slots)"},
		{"item 2³²−1", setU32(x, itemAt, math.MaxUint32), wqItems, wqSlots, "a log record of item 4294967295 by slot 0"},
		{"a queue of no items", p, 0, wqSlots, "a log record of item 3 by slot 1 (0 items, 4 slots)"},
		{"a negative count of items", x, -1, wqSlots, "a log record of item 0 by slot 0 (-1 items, 4 slots)"},
		{"slot = slots", setU32(p, slotAt, wqSlots), wqItems, wqSlots, "a log record of item 3 by slot 4 (6 items, 4 slots)"},
		{"slot 2¹⁶+1", setU32(p, slotAt, 1<<16+1), wqItems, wqSlots, "by slot 65537"},
		{"slot 2³²−1", setU32(x, slotAt, math.MaxUint32), wqItems, wqSlots, "by slot 4294967295"},
		{"a job of no slots", x, wqItems, 0, "(6 items, 0 slots)"},
		{"a result longer than the bytes", setU32(p, sizeAt, 4), wqItems, wqSlots, "a P log record with a result of 4 bytes (3 left)"},
		{"a result of 2³²−1 bytes", setU32(p, sizeAt, math.MaxUint32), wqItems, wqSlots, "a P log record with a result of 4294967295 bytes (3 left)"},
		{"an execution with a result", AppendWorkRecord(nil, WorkRecord{Kind: WorkExecuted, Item: 1, Slot: 1, Result: []byte("r")}), wqItems, wqSlots, "a X log record with a result of 1 bytes (1 left)"},
		{"an execution with a result longer than the bytes", setU32(x, sizeAt, 1<<31), wqItems, wqSlots, "a X log record with a result of 2147483648 bytes (0 left)"},
		{"a result not its SHA-256", wqEdit(p, func(b []byte) { b[len(b)-1] ^= 1 }), wqItems, wqSlots, "a log record of item 3 whose result does not match its SHA-256"},
		{"a SHA-256 not its result's", wqEdit(p, func(b []byte) { b[sumAt] ^= 0x80 }), wqItems, wqSlots, "whose result does not match its SHA-256"},
		{"a result shorter than its SHA-256's", setU32(p, sizeAt, 2), wqItems, wqSlots, "whose result does not match its SHA-256"},
		{"a good record, then a bad one", append(bytes.Clone(x), wqEdit(p, func(b []byte) { b[0] = 'Z' })...), wqItems, wqSlots, "kind 0x5a"},
		{"a good record, then a byte", append(bytes.Clone(x), 'P'), wqItems, wqSlots, "a log record cut short (1 bytes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs, err := DecodeWorkRecords(tc.b, tc.items, tc.slots)
			wqRefused(t, "DecodeWorkRecords", err, tc.says)
			if recs != nil {
				t.Fatalf("DecodeWorkRecords returned %d records with its error", len(recs))
			}
		})
	}
}

// TestDecodeWorkRecordsCut: two records cut at every length are refused
// (but at a record's end), saying what is short.
func TestDecodeWorkRecordsCut(t *testing.T) {
	first := AppendWorkRecord(nil, wqPub(2, 7, 3, 1, "abc"))
	b := append(bytes.Clone(first), AppendWorkRecord(nil, wqPub(0, 1, 1, 2, "de"))...)
	for n := 0; n <= len(b); n++ {
		recs, err := DecodeWorkRecords(b[:n], wqItems, wqSlots)
		switch {
		case n == 0 || n == len(first) || n == len(b):
			want := map[int]int{0: 0, len(first): 1, len(b): 2}[n]
			if err != nil || len(recs) != want {
				t.Fatalf("%d bytes: %d records, %v, want %d", n, len(recs), err, want)
			}
			continue
		case n < WorkRecordHead:
			wqRefused(t, fmt.Sprintf("%d bytes", n), err, fmt.Sprintf("a log record cut short (%d bytes)", n))
		case n < len(first):
			wqRefused(t, fmt.Sprintf("%d bytes", n), err, fmt.Sprintf("a P log record with a result of 3 bytes (%d left)", n-WorkRecordHead))
		case n < len(first)+WorkRecordHead:
			wqRefused(t, fmt.Sprintf("%d bytes", n), err, fmt.Sprintf("a log record cut short (%d bytes)", n-len(first)))
		default:
			wqRefused(t, fmt.Sprintf("%d bytes", n), err, fmt.Sprintf("a P log record with a result of 2 bytes (%d left)", n-len(first)-WorkRecordHead))
		}
		if recs != nil {
			t.Fatalf("%d bytes: %d records with the error", n, len(recs))
		}
	}
}

// TestWorkDecodersAllocateNoClaimedLength: a length a peer claims is not
// allocated before its bytes are there.
func TestWorkDecodersAllocateNoClaimedLength(t *testing.T) {
	huge := wqEdit(AppendWorkRecord(nil, wqPub(0, 1, 1, 1, "a")), func(b []byte) { binary.BigEndian.PutUint32(b[53:], math.MaxUint32) })
	file := AppendWorkFileHead(nil, wqSum)
	file = binary.BigEndian.AppendUint32(file, math.MaxUint32)
	file = append(file, "a few bytes"...)
	var errs [2]error
	var chunks []WorkChunk
	var n int
	got := wqAllocated(func() {
		for range 10 {
			_, errs[0] = DecodeWorkRecords(huge, wqItems, wqSlots)
			_, _, errs[1] = DecodeWorkLogMsg(huge, wqItems, wqSlots)
			chunks, n, _ = DecodeWorkFile(file, wqSum, wqSigSize)
		}
	})
	wqRefused(t, "DecodeWorkRecords", errs[0], "with a result of 4294967295 bytes (1 left)")
	wqRefused(t, "DecodeWorkLogMsg", errs[1], "with a result of 4294967295 bytes (1 left)")
	if len(chunks) != 0 || n != len(WorkFileMagic)+32 {
		t.Fatalf("DecodeWorkFile of a chunk of 4 GiB = %d chunks in %d bytes, want none in %d", len(chunks), n, len(WorkFileMagic)+32)
	}
	if got > 1<<20 {
		t.Fatalf("decoding claimed lengths of 4 GiB 10 times allocated %d bytes", got)
	}
}

func TestWorkRequestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		want WorkMsg
	}{
		{"a request", []byte{WorkRequest}, WorkMsg{Kind: WorkRequest}},
		{"a done", AppendWorkDone(nil, WorkFence{Gen: 3, Lease: 9}, 5, []byte("result")), WorkMsg{Kind: WorkDone, Fence: WorkFence{Gen: 3, Lease: 9}, Item: 5, Result: []byte("result")}},
		{"a done of an empty result", AppendWorkDone(nil, WorkFence{Gen: 1, Lease: 1}, 0, nil), WorkMsg{Kind: WorkDone, Fence: WorkFence{Gen: 1, Lease: 1}, Item: 0, Result: []byte{}}},
		{"a done of the largest fence", AppendWorkDone(nil, WorkFence{Gen: math.MaxUint32, Lease: math.MaxUint64}, wqItems-1, []byte{0}), WorkMsg{Kind: WorkDone, Fence: WorkFence{Gen: math.MaxUint32, Lease: math.MaxUint64}, Item: wqItems - 1, Result: []byte{0}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := DecodeWorkRequest(tc.b, wqItems)
			if err != nil || !reflect.DeepEqual(m, tc.want) {
				t.Fatalf("DecodeWorkRequest(%x) = %+v, %v, want %+v", tc.b, m, err, tc.want)
			}
			var again []byte
			if m.Kind == WorkRequest {
				again = []byte{WorkRequest}
			} else {
				again = AppendWorkDone(nil, m.Fence, m.Item, m.Result)
				if len(m.Result) > 0 && &m.Result[0] != &tc.b[workDoneHead] {
					t.Fatalf("a done's result does not alias the bytes, as its doc says")
				}
			}
			if !bytes.Equal(again, tc.b) {
				t.Fatalf("encoded again: %x, want %x", again, tc.b)
			}
		})
	}
	if got := AppendWorkDone([]byte{1, 2}, WorkFence{Gen: 0x01020304, Lease: 0x05060708090a0b0c}, 0x0d0e0f10, []byte("r")); !bytes.Equal(got, []byte{1, 2, 'D', 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 'r'}) {
		t.Fatalf("AppendWorkDone = %x", got)
	}
}

func TestDecodeWorkRequestRefused(t *testing.T) {
	d := AppendWorkDone(nil, WorkFence{Gen: 1, Lease: 2}, 3, []byte("r"))
	cases := []struct {
		name  string
		b     []byte
		items int
		says  string
	}{
		{"nothing", nil, wqItems, "a request of 0 bytes that is no request or done"},
		{"a request with a byte after it", []byte{WorkRequest, 0}, wqItems, "a request of 2 bytes that is no request or done"},
		{"a lease", AppendWorkLease(nil, WorkFence{Gen: 1, Lease: 2}, 3), wqItems, "a request of 17 bytes that is no request or done"},
		{"the end", []byte{WorkEnd}, wqItems, "a request of 1 bytes that is no request or done"},
		{"a lower-case done", wqEdit(d, func(b []byte) { b[0] = 'd' }), wqItems, "a request of 18 bytes that is no request or done"},
		{"a done of item = items", AppendWorkDone(nil, WorkFence{Gen: 1, Lease: 2}, wqItems, nil), wqItems, "a done of item 6 with fence (1, 2), which no master gave it (6 items)"},
		{"a done of item 2³²−1", AppendWorkDone(nil, WorkFence{Gen: 4, Lease: 5}, math.MaxUint32, []byte("r")), wqItems, "a done of item 4294967295 with fence (4, 5)"},
		{"a done to a queue of no items", d, 0, "a done of item 3 with fence (1, 2), which no master gave it (0 items)"},
	}
	for n := 1; n < workDoneHead; n++ {
		cases = append(cases, struct {
			name  string
			b     []byte
			items int
			says  string
		}{fmt.Sprintf("a done cut to %d bytes", n), d[:n], wqItems, fmt.Sprintf("a request of %d bytes that is no request or done", n)})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := DecodeWorkRequest(tc.b, tc.items)
			wqRefused(t, "DecodeWorkRequest", err, tc.says)
			if !reflect.DeepEqual(m, WorkMsg{}) {
				t.Fatalf("DecodeWorkRequest returned %+v with its error", m)
			}
		})
	}
}

func TestWorkReplyRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		want WorkMsg
	}{
		{"a lease", AppendWorkLease(nil, WorkFence{Gen: 2, Lease: 3}, 4), WorkMsg{Kind: WorkLease, Fence: WorkFence{Gen: 2, Lease: 3}, Item: 4}},
		{"a lease of the largest fence and last item", AppendWorkLease(nil, WorkFence{Gen: math.MaxUint32, Lease: math.MaxUint64}, wqItems-1), WorkMsg{Kind: WorkLease, Fence: WorkFence{Gen: math.MaxUint32, Lease: math.MaxUint64}, Item: wqItems - 1}},
		{"the end", []byte{WorkEnd}, WorkMsg{Kind: WorkEnd}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := DecodeWorkReply(tc.b, wqItems)
			if err != nil || !reflect.DeepEqual(m, tc.want) {
				t.Fatalf("DecodeWorkReply(%x) = %+v, %v, want %+v", tc.b, m, err, tc.want)
			}
			again := []byte{WorkEnd}
			if m.Kind == WorkLease {
				again = AppendWorkLease(nil, m.Fence, m.Item)
			}
			if !bytes.Equal(again, tc.b) {
				t.Fatalf("encoded again: %x, want %x", again, tc.b)
			}
		})
	}
	if got := AppendWorkLease([]byte{9}, WorkFence{Gen: 0x01020304, Lease: 0x05060708090a0b0c}, 0x0d0e0f10); !bytes.Equal(got, []byte{9, 'L', 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}) || len(got)-1 != WorkLeaseSize {
		t.Fatalf("AppendWorkLease = %x", got)
	}
}

func TestDecodeWorkReplyRefused(t *testing.T) {
	l := AppendWorkLease(nil, WorkFence{Gen: 1, Lease: 2}, 3)
	type tcase struct {
		name  string
		b     []byte
		items int
		says  string
	}
	cases := []tcase{
		{"nothing", nil, wqItems, "a reply of 0 bytes that is no lease or end"},
		{"the end with a byte after it", []byte{WorkEnd, WorkEnd}, wqItems, "a reply of 2 bytes that is no lease or end"},
		{"a lease with a byte after it", append(bytes.Clone(l), 0), wqItems, "a reply of 18 bytes that is no lease or end"},
		{"a request", []byte{WorkRequest}, wqItems, "a reply of 1 bytes that is no lease or end"},
		{"a done of a lease's size", wqEdit(l, func(b []byte) { b[0] = WorkDone }), wqItems, "a reply of 17 bytes that is no lease or end"},
		{"a lease of item = items", AppendWorkLease(nil, WorkFence{Gen: 1, Lease: 2}, wqItems), wqItems, "a lease of item 6 (6 items)"},
		{"a lease of item 2³²−1", AppendWorkLease(nil, WorkFence{Gen: 1, Lease: 2}, math.MaxUint32), wqItems, "a lease of item 4294967295 (6 items)"},
		{"a lease in a queue of no items", l, 0, "a lease of item 3 (0 items)"},
	}
	for n := 1; n < WorkLeaseSize; n++ {
		cases = append(cases, tcase{fmt.Sprintf("a lease cut to %d bytes", n), l[:n], wqItems, fmt.Sprintf("a reply of %d bytes that is no lease or end", n)})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := DecodeWorkReply(tc.b, tc.items)
			wqRefused(t, "DecodeWorkReply", err, tc.says)
			if !reflect.DeepEqual(m, WorkMsg{}) {
				t.Fatalf("DecodeWorkReply returned %+v with its error", m)
			}
		})
	}
}

func TestDecodeWorkLogMsg(t *testing.T) {
	p := AppendWorkRecord(nil, wqPub(2, 7, 3, 1, "abc"))
	if r, end, err := DecodeWorkLogMsg([]byte{WorkEnd}, wqItems, wqSlots); err != nil || !end || !reflect.DeepEqual(r, WorkRecord{}) {
		t.Fatalf("DecodeWorkLogMsg(E) = %+v, %v, %v, want the end", r, end, err)
	}
	type tcase struct {
		name string
		b    []byte
		says string
	}
	cases := []tcase{
		{"nothing", nil, "a log record cut short (0 bytes)"},
		{"the end with a byte after it", []byte{WorkEnd, 0}, "a log record cut short (2 bytes)"},
		{"a record with a byte after it", append(bytes.Clone(p), 0), fmt.Sprintf("a log message of %d bytes after its record of %d", len(p)+1, len(p))},
		{"two records", append(bytes.Clone(p), p...), fmt.Sprintf("a log message of %d bytes after its record of %d", 2*len(p), len(p))},
		{"a record of another kind", wqEdit(p, func(b []byte) { b[0] = 'E' }), "a log record of kind 0x45"},
		{"a record of an item past the items", wqEdit(p, func(b []byte) { b[16] = wqItems }), "a log record of item 6 by slot 1 (6 items, 4 slots)"},
		{"a record whose result is not its SHA-256", wqEdit(p, func(b []byte) { b[len(b)-2] ^= 4 }), "does not match its SHA-256"},
	}
	for n := 1; n < len(p); n++ {
		says := fmt.Sprintf("a log record cut short (%d bytes)", n)
		if n >= WorkRecordHead {
			says = fmt.Sprintf("a P log record with a result of 3 bytes (%d left)", n-WorkRecordHead)
		}
		cases = append(cases, tcase{fmt.Sprintf("a record cut to %d bytes", n), p[:n], says})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, end, err := DecodeWorkLogMsg(tc.b, wqItems, wqSlots)
			wqRefused(t, "DecodeWorkLogMsg", err, tc.says)
			if end || !reflect.DeepEqual(r, WorkRecord{}) {
				t.Fatalf("DecodeWorkLogMsg returned %+v, end %v with its error", r, end)
			}
		})
	}
}

func TestDecodeWorkAck(t *testing.T) {
	for _, b := range [][]byte{nil, {}} {
		if err := DecodeWorkAck(b); err != nil {
			t.Fatalf("DecodeWorkAck(%x) = %v, want nil", b, err)
		}
	}
	for _, b := range [][]byte{{0}, {WorkEnd}, make([]byte, 57)} {
		wqRefused(t, fmt.Sprintf("DecodeWorkAck(%d bytes)", len(b)), DecodeWorkAck(b), fmt.Sprintf("a log acknowledgement of %d bytes", len(b)))
	}
}

func TestWorkStartRoundTrip(t *testing.T) {
	for _, s := range []WorkStart{
		{},
		{Sum: wqSum},
		{Sum: wqSum, Code: codes.CheckpointStorage, Writes: true},
		{Code: codes.CommitSignature, Found: true},
		{Sum: [32]byte{31: 0xff}, Code: codes.ProtocolViolation, Writes: true, Found: true},
	} {
		b := AppendWorkStart(nil, s)
		if len(b) != WorkStartSize {
			t.Fatalf("AppendWorkStart(%+v) is %d bytes, want %d", s, len(b), WorkStartSize)
		}
		got, err := DecodeWorkStart(b)
		if err != nil || got != s {
			t.Fatalf("DecodeWorkStart(AppendWorkStart(%+v)) = %+v, %v", s, got, err)
		}
		if again := AppendWorkStart(nil, got); !bytes.Equal(again, b) {
			t.Fatalf("encoded again: %x, want %x", again, b)
		}
	}
	want := append(append([]byte{}, wqSum[:]...), 0x06, 0x5b, 1, 0)
	if got := AppendWorkStart(nil, WorkStart{Sum: wqSum, Code: codes.ProtocolViolation, Writes: true}); !bytes.Equal(got, want) {
		t.Fatalf("AppendWorkStart = %x, want %x", got, want)
	}
}

func TestDecodeWorkStartRefused(t *testing.T) {
	good := AppendWorkStart(nil, WorkStart{Sum: wqSum, Code: codes.CheckpointStorage, Writes: true, Found: true})
	type tcase struct {
		name string
		b    []byte
		says string
	}
	cases := []tcase{
		{"a byte more", append(bytes.Clone(good), 0), "a start of 37 bytes, want 36"},
		{"code 1", wqEdit(good, func(b []byte) { b[32], b[33] = 0, 1 }), "a start with code 1"},
		{"code 1600", wqEdit(good, func(b []byte) { binary.BigEndian.PutUint16(b[32:], 1600) }), "a start with code 1600"},
		{"code 65535", wqEdit(good, func(b []byte) { b[32], b[33] = 0xff, 0xff }), "a start with code 65535"},
		{"writes 2", wqEdit(good, func(b []byte) { b[34] = 2 }), "a start with disk flags of 2 and 1"},
		{"found 255", wqEdit(good, func(b []byte) { b[35] = 255 }), "a start with disk flags of 1 and 255"},
	}
	for n := 0; n < WorkStartSize; n++ {
		cases = append(cases, tcase{fmt.Sprintf("cut to %d bytes", n), good[:n], fmt.Sprintf("a start of %d bytes, want 36", n)})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeWorkStart(tc.b)
			wqRefused(t, "DecodeWorkStart", err, tc.says)
		})
	}
}

func TestWorkHeadRoundTrip(t *testing.T) {
	for _, tc := range []struct{ published, length uint64 }{{0, 0}, {1, 57}, {wqItems, wqMaxLog}} {
		b := AppendWorkHead(nil, tc.published, tc.length)
		if len(b) != WorkHeadSize {
			t.Fatalf("AppendWorkHead is %d bytes, want %d", len(b), WorkHeadSize)
		}
		p, l, err := DecodeWorkHead(b, wqItems, wqMaxLog)
		if err != nil || p != tc.published || l != tc.length {
			t.Fatalf("DecodeWorkHead(AppendWorkHead(%d, %d)) = %d, %d, %v", tc.published, tc.length, p, l, err)
		}
		if again := AppendWorkHead(nil, p, l); !bytes.Equal(again, b) {
			t.Fatalf("encoded again: %x, want %x", again, b)
		}
	}
	if got := AppendWorkHead([]byte{7}, 0x0102030405060708, 0x090a0b0c0d0e0f10); !bytes.Equal(got, []byte{7, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}) {
		t.Fatalf("AppendWorkHead = %x", got)
	}
}

func TestDecodeWorkHeadRefused(t *testing.T) {
	type tcase struct {
		name  string
		b     []byte
		items int
		says  string
	}
	good := AppendWorkHead(nil, 2, 100)
	cases := []tcase{
		{"a byte more", append(bytes.Clone(good), 0), wqItems, "a log's head of 17 bytes, want 16"},
		{"a log past maxLog", AppendWorkHead(nil, 2, wqMaxLog+1), wqItems, "a log of 2 published items in 1025 bytes (6 items, at most 1024 bytes)"},
		{"a log of 2⁶⁴−1 bytes", AppendWorkHead(nil, 0, math.MaxUint64), wqItems, "in 18446744073709551615 bytes"},
		{"more published than items", AppendWorkHead(nil, wqItems+1, 100), wqItems, "a log of 7 published items in 100 bytes (6 items, at most 1024 bytes)"},
		{"2⁶⁴−1 published", AppendWorkHead(nil, math.MaxUint64, 0), wqItems, "a log of 18446744073709551615 published items"},
		{"published items of no items", AppendWorkHead(nil, 1, 0), 0, "a log of 1 published items in 0 bytes (0 items"},
		{"published items of a negative count", AppendWorkHead(nil, 1, 0), -3, "(-3 items"},
	}
	for n := 0; n < WorkHeadSize; n++ {
		cases = append(cases, tcase{fmt.Sprintf("cut to %d bytes", n), good[:n], wqItems, fmt.Sprintf("a log's head of %d bytes, want 16", n)})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, l, err := DecodeWorkHead(tc.b, tc.items, wqMaxLog)
			wqRefused(t, "DecodeWorkHead", err, tc.says)
			if p != 0 || l != 0 {
				t.Fatalf("DecodeWorkHead returned %d, %d with its error", p, l)
			}
		})
	}
}

func TestWorkExtrasRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		n    int
		more bool
	}{{0, false}, {0, true}, {57, false}, {wqMaxN, true}} {
		b := AppendWorkExtras(nil, tc.n, tc.more)
		if len(b) != WorkExtrasSize {
			t.Fatalf("AppendWorkExtras is %d bytes, want %d", len(b), WorkExtrasSize)
		}
		n, more, err := DecodeWorkExtras(b, wqMaxN)
		if err != nil || n != tc.n || more != tc.more {
			t.Fatalf("DecodeWorkExtras(AppendWorkExtras(%d, %v)) = %d, %v, %v", tc.n, tc.more, n, more, err)
		}
		if again := AppendWorkExtras(nil, n, more); !bytes.Equal(again, b) {
			t.Fatalf("encoded again: %x, want %x", again, b)
		}
	}
	if got := AppendWorkExtras([]byte{7}, 0x01020304, true); !bytes.Equal(got, []byte{7, 1, 2, 3, 4, 1}) {
		t.Fatalf("AppendWorkExtras = %x", got)
	}
}

func TestDecodeWorkExtrasRefused(t *testing.T) {
	type tcase struct {
		name string
		b    []byte
		maxN int
		says string
	}
	good := AppendWorkExtras(nil, 3, true)
	cases := []tcase{
		{"a byte more", append(bytes.Clone(good), 0), wqMaxN, "a start's extras of 6 bytes, want 5"},
		{"past maxN", AppendWorkExtras(nil, wqMaxN+1, false), wqMaxN, "513 bytes of executions beyond the log, and a flag of 0"},
		{"2³²−1 bytes", AppendWorkExtras(nil, math.MaxUint32, false), wqMaxN, "4294967295 bytes of executions beyond the log"},
		{"any bytes when maxN is negative", AppendWorkExtras(nil, 1, false), -1, "1 bytes of executions beyond the log"},
		{"a flag of 2", wqEdit(good, func(b []byte) { b[4] = 2 }), wqMaxN, "3 bytes of executions beyond the log, and a flag of 2"},
	}
	for n := 0; n < WorkExtrasSize; n++ {
		cases = append(cases, tcase{fmt.Sprintf("cut to %d bytes", n), good[:n], wqMaxN, fmt.Sprintf("a start's extras of %d bytes, want 5", n)})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, more, err := DecodeWorkExtras(tc.b, tc.maxN)
			wqRefused(t, "DecodeWorkExtras", err, tc.says)
			if n != 0 || more {
				t.Fatalf("DecodeWorkExtras returned %d, %v with its error", n, more)
			}
		})
	}
}

func TestWorkLengthRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, wqMaxLog} {
		b := AppendWorkLength(nil, n)
		got, err := DecodeWorkLength(b, wqMaxLog)
		if err != nil || got != uint64(n) || len(b) != 8 {
			t.Fatalf("DecodeWorkLength(AppendWorkLength(%d)) = %d, %v (%d bytes)", n, got, err, len(b))
		}
		if again := AppendWorkLength(nil, int(got)); !bytes.Equal(again, b) {
			t.Fatalf("encoded again: %x, want %x", again, b)
		}
	}
	type tcase struct {
		name string
		b    []byte
		says string
	}
	cases := []tcase{
		{"a byte more", append(AppendWorkLength(nil, 1), 0), "a log's length in 9 bytes"},
		{"past maxLog", AppendWorkLength(nil, wqMaxLog+1), "a log of 1025 bytes, at most 1024"},
		{"2⁶⁴−1", binary.BigEndian.AppendUint64(nil, math.MaxUint64), "a log of 18446744073709551615 bytes, at most 1024"},
	}
	for n := 0; n < 8; n++ {
		cases = append(cases, tcase{fmt.Sprintf("cut to %d bytes", n), AppendWorkLength(nil, 1)[:n], fmt.Sprintf("a log's length in %d bytes", n)})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, err := DecodeWorkLength(tc.b, wqMaxLog)
			wqRefused(t, "DecodeWorkLength", err, tc.says)
			if n != 0 {
				t.Fatalf("DecodeWorkLength returned %d with its error", n)
			}
		})
	}
}

// wqFile is a log file of the chunks (records, signature).
func wqFile(chunks ...WorkChunk) []byte {
	b := AppendWorkFileHead(nil, wqSum)
	for _, c := range chunks {
		b = AppendWorkChunk(b, c.Records, c.Sig)
	}
	return b
}

func TestWorkFileRoundTrip(t *testing.T) {
	head := len(WorkFileMagic) + 32
	if b := AppendWorkFileHead([]byte{1}, wqSum); !bytes.Equal(b, append(append([]byte{1}, "SPRLWQ3\x00"...), wqSum[:]...)) {
		t.Fatalf("AppendWorkFileHead = %x", b)
	}
	if b := AppendWorkChunk([]byte{1}, []byte("rec"), []byte("sig")); !bytes.Equal(b, []byte{1, 0, 0, 0, 3, 'r', 'e', 'c', 's', 'i', 'g'}) {
		t.Fatalf("AppendWorkChunk = %x", b)
	}
	sig := func(c byte) []byte { return bytes.Repeat([]byte{c}, wqSigSize) }
	for _, tc := range []struct {
		name   string
		chunks []WorkChunk
	}{
		{"no chunk", nil},
		{"one chunk", []WorkChunk{{Records: wqRecords(wqPub(0, 1, 2, 3, "a")), Sig: sig(1)}}},
		{"an empty chunk, then two", []WorkChunk{{Records: []byte{}, Sig: sig(1)}, {Records: wqRecords(wqExec(0, 1, 0, 0, "x"), wqPub(1, 1, 1, 1, "b")), Sig: sig(2)}, {Records: []byte("any bytes"), Sig: sig(3)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := wqFile(tc.chunks...)
			chunks, n, err := DecodeWorkFile(b, wqSum, wqSigSize)
			if err != nil || n != len(b) || len(chunks) != len(tc.chunks) {
				t.Fatalf("DecodeWorkFile = %d chunks in %d bytes, %v, want %d in %d", len(chunks), n, err, len(tc.chunks), len(b))
			}
			for i, c := range chunks {
				if !bytes.Equal(c.Records, tc.chunks[i].Records) || !bytes.Equal(c.Sig, tc.chunks[i].Sig) {
					t.Fatalf("chunk %d = %q %x, want %q %x", i, c.Records, c.Sig, tc.chunks[i].Records, tc.chunks[i].Sig)
				}
			}
			if again := wqFile(chunks...); !bytes.Equal(again, b) {
				t.Fatalf("encoded again: %x, want %x", again, b)
			}
			// Cut at every length: the whole chunks before the cut, and
			// the bytes that hold them.
			ends := []int{head}
			for _, c := range tc.chunks {
				ends = append(ends, ends[len(ends)-1]+4+len(c.Records)+wqSigSize)
			}
			for cut := head; cut <= len(b); cut++ {
				whole := 0
				for whole+1 < len(ends) && ends[whole+1] <= cut {
					whole++
				}
				chunks, n, err := DecodeWorkFile(b[:cut], wqSum, wqSigSize)
				if err != nil || len(chunks) != whole || n != ends[whole] {
					t.Fatalf("cut to %d bytes: %d chunks in %d bytes, %v, want %d in %d", cut, len(chunks), n, err, whole, ends[whole])
				}
			}
		})
	}
}

func TestDecodeWorkFileRefused(t *testing.T) {
	good := wqFile(WorkChunk{Records: []byte("r"), Sig: make([]byte, wqSigSize)})
	other := sha256.Sum256([]byte("other items"))
	type tcase struct {
		name string
		b    []byte
		says string
	}
	cases := []tcase{
		{"version 2", wqEdit(good, func(b []byte) { b[6] = '2' }), fmt.Sprintf("not a work queue's log (%d bytes)", len(good))},
		{"another magic", wqEdit(good, func(b []byte) { copy(b, "SPRLCK3\x00") }), "not a work queue's log"},
		{"a magic without its 0", wqEdit(good, func(b []byte) { b[7] = ' ' }), "not a work queue's log"},
		{"of other items", AppendWorkChunk(AppendWorkFileHead(nil, other), []byte("r"), make([]byte, wqSigSize)), "it is of other items"},
	}
	for n := 0; n < len(WorkFileMagic)+32; n++ {
		cases = append(cases, tcase{fmt.Sprintf("cut to %d bytes", n), good[:n], fmt.Sprintf("not a work queue's log (%d bytes)", n)})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			chunks, n, err := DecodeWorkFile(tc.b, wqSum, wqSigSize)
			wqRefused(t, "DecodeWorkFile", err, tc.says)
			if chunks != nil || n != 0 {
				t.Fatalf("DecodeWorkFile returned %d chunks, %d bytes with its error", len(chunks), n)
			}
		})
	}
}

func TestWorkChunkMsg(t *testing.T) {
	records, prev := []byte("records"), []byte("the signature before")
	h := sha256.Sum256(records)
	want := append(append(append(append([]byte{}, wqSum[:]...), 0, 0, 1, 2), h[:]...), prev...)
	if got := WorkChunkMsg(wqSum, 0x0102, records, prev); !bytes.Equal(got, want) {
		t.Fatalf("WorkChunkMsg = %x, want %x", got, want)
	}
	first := WorkChunkMsg(wqSum, 0, records, nil)
	if len(first) != 32+4+32 || bytes.Equal(first, WorkChunkMsg(wqSum, 1, records, nil)) || bytes.Equal(first, WorkChunkMsg(wqSum, 0, []byte("other"), nil)) {
		t.Fatalf("WorkChunkMsg does not tell chunks, numbers or records apart: %x", first)
	}
}

// FuzzWorkMsgs feeds the same bytes to every decoder of the work queue's
// messages: none panics, every refusal is H1627 with a message, what
// decodes is in range, and (every format being canonical) encodes again
// to the same bytes; a log file's tail left out is a chunk cut short.
func FuzzWorkMsgs(f *testing.F) {
	rec := wqRecords(wqPub(2, 7, 3, 1, "abc"), wqExec(1, 9, 0, 0, "x"))
	for _, b := range [][]byte{
		nil, {WorkRequest}, {WorkEnd},
		rec,
		AppendWorkRecord(nil, wqPub(0, 1, 5, 3, "")),
		AppendWorkDone(nil, WorkFence{Gen: 1, Lease: 2}, 3, []byte("result")),
		AppendWorkLease(nil, WorkFence{Gen: 1, Lease: 2}, 3),
		AppendWorkStart(nil, WorkStart{Sum: wqSum, Code: codes.CheckpointStorage, Writes: true}),
		AppendWorkHead(nil, 3, 400),
		AppendWorkExtras(nil, 100, true),
		AppendWorkLength(nil, 1000),
		wqFile(WorkChunk{Records: rec, Sig: make([]byte, wqSigSize)}),
		AppendWorkChunk(AppendWorkChunk(nil, rec, make([]byte, wqSigSize)), nil, []byte("12345678")),
	} {
		f.Add(b, int8(wqItems), int8(wqSlots))
	}
	f.Add(rec, int8(0), int8(-1))
	f.Fuzz(func(t *testing.T, b []byte, items8, slots8 int8) {
		items, slots := int(items8), int(slots8)
		refused := func(what string, err error) {
			t.Helper()
			if e := codes.As(err); e == nil || e.Code != codes.ProtocolViolation || e.Msg == "" {
				t.Fatalf("%s(%x) = %v, want %v with a message", what, b, err, codes.ProtocolViolation)
			}
		}
		valid := func(what string, r WorkRecord) {
			t.Helper()
			ok := r.Item >= 0 && r.Item < items && r.Slot >= 0 && r.Slot < slots
			switch r.Kind {
			case WorkPublished:
				ok = ok && r.Result != nil && sha256.Sum256(r.Result) == r.Sum
			case WorkExecuted:
				ok = ok && r.Result == nil
			default:
				ok = false
			}
			if !ok {
				t.Fatalf("%s(%x, %d, %d) gave %+v, which it should have refused", what, b, items, slots, r)
			}
		}

		in := bytes.Clone(b)
		if recs, err := DecodeWorkRecords(in, items, slots); err != nil {
			refused("DecodeWorkRecords", err)
		} else {
			for i := range in {
				in[i] ^= 0xff // the results are copies
			}
			for _, r := range recs {
				valid("DecodeWorkRecords", r)
			}
			if again := wqRecords(recs...); !bytes.Equal(again, b) {
				t.Fatalf("DecodeWorkRecords(%x) encoded again: %x", b, again)
			}
		}

		if m, err := DecodeWorkRequest(b, items); err != nil {
			refused("DecodeWorkRequest", err)
		} else {
			again := []byte{WorkRequest}
			if m.Kind == WorkDone {
				if m.Item < 0 || m.Item >= items {
					t.Fatalf("DecodeWorkRequest(%x, %d) = %+v", b, items, m)
				}
				again = AppendWorkDone(nil, m.Fence, m.Item, m.Result)
			} else if m.Kind != WorkRequest {
				t.Fatalf("DecodeWorkRequest(%x) = %+v", b, m)
			}
			if !bytes.Equal(again, b) {
				t.Fatalf("DecodeWorkRequest(%x) encoded again: %x", b, again)
			}
		}

		if m, err := DecodeWorkReply(b, items); err != nil {
			refused("DecodeWorkReply", err)
		} else {
			again := []byte{WorkEnd}
			if m.Kind == WorkLease {
				if m.Item < 0 || m.Item >= items {
					t.Fatalf("DecodeWorkReply(%x, %d) = %+v", b, items, m)
				}
				again = AppendWorkLease(nil, m.Fence, m.Item)
			} else if m.Kind != WorkEnd {
				t.Fatalf("DecodeWorkReply(%x) = %+v", b, m)
			}
			if !bytes.Equal(again, b) {
				t.Fatalf("DecodeWorkReply(%x) encoded again: %x", b, again)
			}
		}

		if r, end, err := DecodeWorkLogMsg(b, items, slots); err != nil {
			refused("DecodeWorkLogMsg", err)
		} else if end {
			if !bytes.Equal(b, []byte{WorkEnd}) {
				t.Fatalf("DecodeWorkLogMsg(%x) is the end", b)
			}
		} else {
			valid("DecodeWorkLogMsg", r)
			if again := AppendWorkRecord(nil, r); !bytes.Equal(again, b) {
				t.Fatalf("DecodeWorkLogMsg(%x) encoded again: %x", b, again)
			}
		}

		if err := DecodeWorkAck(b); err != nil {
			refused("DecodeWorkAck", err)
		} else if len(b) != 0 {
			t.Fatalf("DecodeWorkAck(%x) = nil", b)
		}

		if s, err := DecodeWorkStart(b); err != nil {
			refused("DecodeWorkStart", err)
		} else if again := AppendWorkStart(nil, s); !bytes.Equal(again, b) || (s.Code != 0 && !s.Code.Valid()) {
			t.Fatalf("DecodeWorkStart(%x) = %+v, encoded again: %x", b, s, again)
		}

		if p, l, err := DecodeWorkHead(b, items, wqMaxLog); err != nil {
			refused("DecodeWorkHead", err)
		} else if again := AppendWorkHead(nil, p, l); !bytes.Equal(again, b) || l > wqMaxLog || p > uint64(max(items, 0)) {
			t.Fatalf("DecodeWorkHead(%x, %d) = %d, %d, encoded again: %x", b, items, p, l, again)
		}

		maxN := int(slots8) * 8
		if n, more, err := DecodeWorkExtras(b, maxN); err != nil {
			refused("DecodeWorkExtras", err)
		} else if again := AppendWorkExtras(nil, n, more); !bytes.Equal(again, b) || n < 0 || n > max(maxN, 0) {
			t.Fatalf("DecodeWorkExtras(%x, %d) = %d, %v, encoded again: %x", b, maxN, n, more, again)
		}

		if n, err := DecodeWorkLength(b, wqMaxLog); err != nil {
			refused("DecodeWorkLength", err)
		} else if again := AppendWorkLength(nil, int(n)); !bytes.Equal(again, b) || n > wqMaxLog {
			t.Fatalf("DecodeWorkLength(%x) = %d, encoded again: %x", b, n, again)
		}

		// A log file: b as a whole file, and b after a good head.
		for _, file := range [][]byte{b, append(AppendWorkFileHead(nil, wqSum), b...)} {
			chunks, n, err := DecodeWorkFile(file, wqSum, wqSigSize)
			if err != nil {
				refused("DecodeWorkFile", err)
				continue
			}
			if again := wqFile(chunks...); n < len(WorkFileMagic)+32 || n > len(file) || !bytes.Equal(again, file[:n]) {
				t.Fatalf("DecodeWorkFile(%x) = %d chunks in %d bytes, encoded again: %x", file, len(chunks), n, again)
			}
			if rest := file[n:]; len(rest) >= 4 && uint64(len(rest)) >= 4+uint64(binary.BigEndian.Uint32(rest))+wqSigSize {
				t.Fatalf("DecodeWorkFile(%x) left out a whole chunk: %x", file, rest)
			}
		}
	})
}
