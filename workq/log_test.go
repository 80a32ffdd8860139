package workq

import (
	"crypto/sha256"
	"strings"
	"testing"

	"sperli/wire"
)

// TestWorkLogRecords: a log's records decode back, and what no honest
// rank sends is refused with what is wrong.
func TestWorkLogRecords(t *testing.T) {
	res := []byte("result")
	p := record{Kind: 'P', Fence: fence{Gen: 2, Lease: 7}, Item: 3, Slot: 4, Sum: sha256.Sum256(res), Result: res}
	x := record{Kind: 'X', Fence: fence{Gen: 1, Lease: 9}, Item: 3, Slot: 1, Sum: sha256.Sum256([]byte("other"))}
	good := wire.AppendWorkRecord(wire.AppendWorkRecord(nil, p), x)
	recs, err := wire.DecodeWorkRecords(good, 10, 8)
	if err != nil || len(recs) != 2 || string(recs[0].Result) != "result" || recs[1].Fence != (fence{Gen: 1, Lease: 9}) || recs[1].Slot != 1 {
		t.Fatalf("parse = %+v, %v", recs, err)
	}
	bad := func(edit func(b []byte) []byte) []byte { return edit(append([]byte{}, good...)) }
	for _, tc := range []struct {
		name string
		b    []byte
		says string
	}{
		{"cut short", good[:20], "cut short"},
		{"unknown kind", bad(func(b []byte) []byte { b[0] = 'Q'; return b }), "kind"},
		{"item out of range", bad(func(b []byte) []byte { b[16] = 99; return b }), "item 99"},
		{"slot out of range", bad(func(b []byte) []byte { b[20] = 9; return b }), "slot 9"},
		{"slot past 2¹⁶", bad(func(b []byte) []byte { b[18] = 1; return b }), "slot 65540"},
		{"result not its SHA-256", bad(func(b []byte) []byte { b[wire.WorkRecordHead] ^= 1; return b }), "does not match"},
		{"result longer than the bytes", bad(func(b []byte) []byte { b[wire.WorkRecordHead-1] = 200; return b }), "result of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := wire.DecodeWorkRecords(tc.b, 10, 8); err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("error %v, want one saying %q", err, tc.says)
			}
		})
	}
}

// TestWorkLogContentAddressed: an item published twice (two fences) is
// published once, the second counted as an execution; a record seen
// twice is counted once; an execution known before its publication is
// published all the same.
func TestWorkLogContentAddressed(t *testing.T) {
	l := newLog([32]byte{})
	r := func(kind byte, gen uint32, lease uint64, id int, v string) record {
		return record{Kind: kind, Fence: fence{Gen: gen, Lease: lease}, Item: id, Sum: sha256.Sum256([]byte(v)), Result: []byte(v)}
	}
	l.add(r('P', 0, 1, 0, "a"))
	l.add(r('P', 0, 1, 0, "a")) // the same record again
	l.add(r('P', 1, 1, 0, "a")) // computed twice
	l.add(r('X', 1, 2, 1, ""))
	l.add(r('P', 1, 2, 1, "b")) // its publication
	st := l.stats(2)
	if st.Published != 2 || st.Executed != 3 || st.Duplicates != 1 || st.Generations != 2 {
		t.Fatalf("stats %+v, want 2 published of 3 executions in 2 generations", st)
	}
	if string(l.pub[1].Result) != "b" {
		t.Fatalf("item 1 = %q, want its published result", l.pub[1].Result)
	}
}
