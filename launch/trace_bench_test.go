package launch

import (
	"bytes"
	"path/filepath"
	"testing"
)

// BenchmarkTraceRecords: what the launcher spends on one trace record of a
// rank, from its standard error to the spool (the file written at the end
// aside).
func BenchmarkTraceRecords(b *testing.B) {
	o := &outputs{}
	tl, err := openTrace(filepath.Join(b.TempDir(), "t.json"), &o.memUsed)
	if err != nil {
		b.Fatal(err)
	}
	o.trace = tl
	s := newStream(o, 0, true, 0, nil, nil)
	s.tp = tl.proc(0, 0, "rank 0", false)
	rec := []byte("\x1esperli-trace {\"ph\":\"X\",\"name\":\"send\",\"ts\":1764750000123456789,\"dur\":1000,\"tid\":1,\"args\":{\"to\":1,\"tag\":7,\"bytes\":64}}\n")
	batch := bytes.Repeat(rec, 30)
	b.SetBytes(int64(len(rec)))
	b.ResetTimer()
	for i := 0; i < b.N; i += 30 {
		s.Write(batch)
	}
}
