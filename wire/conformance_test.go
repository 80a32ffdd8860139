package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"sperli/codes"
)

// TestProtocolExamples reads the byte examples of docs/protocol.md §10 and
// checks them against this package both ways: the documented bytes decode
// to the documented fields, and encoding those fields gives the documented
// bytes. The document is the contract a second implementation is written
// from; this keeps it true.
func TestProtocolExamples(t *testing.T) {
	doc, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	sec := string(doc)
	start := strings.Index(sec, "## 10. Examples")
	end := strings.Index(sec, "## 11.")
	if start < 0 || end < start {
		t.Fatal("docs/protocol.md has no §10 Examples before §11")
	}
	blocks := codeBlocks(sec[start:end])
	if len(blocks) != 6 {
		t.Fatalf("§10 has %d examples, this test knows 6", len(blocks))
	}
	hb := hexLine(t, blocks[0][0])
	h, err := Decode(hb, 1)
	if err != nil || h != (Header{Type: Heartbeat, Source: 1}) {
		t.Errorf("heartbeat example decodes to %+v, %v", h, err)
	}
	var enc [HeaderSize]byte
	(&Header{Type: Heartbeat, Source: 1}).Put(enc[:])
	if !bytes.Equal(enc[:], hb) {
		t.Errorf("heartbeat encodes to % x, the document says % x", enc, hb)
	}

	checkColl := func(name string, block []string, want Header, call Call, data []byte) {
		t.Helper()
		hdr, payload := hexLine(t, block[0]), hexLine(t, block[1])
		h, err := Decode(hdr, int(want.Source))
		if err != nil || h != want {
			t.Errorf("%s header decodes to %+v, %v; want %+v", name, h, err, want)
		}
		if int(h.Length) != len(payload) {
			t.Errorf("%s header says %d payload bytes, the example has %d", name, h.Length, len(payload))
		}
		c, rest, err := DecodeCall(payload)
		if err != nil || c != call || !bytes.Equal(rest, data) {
			t.Errorf("%s payload decodes to %+v % x, %v; want %+v % x", name, c, rest, err, call, data)
		}
		if got := append(AppendCall(nil, call), data...); !bytes.Equal(got, payload) {
			t.Errorf("%s payload encodes to % x, the document says % x", name, got, payload)
		}
		var enc [HeaderSize]byte
		want.Put(enc[:])
		if !bytes.Equal(enc[:], hdr) {
			t.Errorf("%s header encodes to % x, the document says % x", name, enc, hdr)
		}
	}
	one := binary.LittleEndian.AppendUint64(nil, 1)
	checkColl("reduce contribution", blocks[1], Header{Type: Collective, Source: 2, Length: 20, Seq: 1}, Call{Kind: 3, Type: 3, Op: 1, Root: 0, Length: 8}, one)
	checkColl("void", blocks[4], Header{Type: Collective, Flags: FlagVoid, Incarnation: 2, Source: 1, Length: 12, Seq: 3}, Call{Kind: 4, Type: 3, Op: 1, Root: 0, Length: 7}, nil)

	abort := hexLine(t, blocks[2][0])
	r, err := DecodeReason(abort)
	want := Reason{Code: codes.JobEnded, Cause: codes.CauseAborted, Rank: 1, Msg: "aborted"}
	if err != nil || r != want {
		t.Errorf("abort example decodes to %+v, %v; want %+v", r, err, want)
	}
	if got := AppendReason(nil, want); !bytes.Equal(got, abort) {
		t.Errorf("abort encodes to % x, the document says % x", got, abort)
	}

	hello := hexLine(t, blocks[3][0])
	hl, err := DecodeHello(hello)
	var policy [DigestSize]byte
	copy(policy[:], bytes.Repeat([]byte{0x5a}, DigestSize))
	if err != nil || hl.SilenceMS != 5000 || !bytes.Equal(hl.Token, []byte{0xaa, 0xbb}) || hl.Program != ([DigestSize]byte{}) || hl.Policy != policy {
		t.Errorf("hello example decodes to %+v, %v", hl, err)
	}
	if got := AppendHello(nil, HelloBody{SilenceMS: 5000, Token: []byte{0xaa, 0xbb}, Policy: policy}); !bytes.Equal(got, hello) {
		t.Errorf("hello encodes to % x, the document says % x", got, hello)
	}

	ch, cp := hexLine(t, blocks[5][0]), hexLine(t, blocks[5][1])
	h, err = Decode(ch, 0)
	if err != nil || h != (Header{Type: Credit, Length: 8}) {
		t.Errorf("credit header decodes to %+v, %v", h, err)
	}
	if n := binary.BigEndian.Uint64(cp); n != 8<<20 {
		t.Errorf("credit payload is %d, the document says 8 MiB", n)
	}
}

// codeBlocks returns the lines of every ``` block in s.
func codeBlocks(s string) [][]string {
	var out [][]string
	var cur []string
	in := false
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "```") {
			if in {
				out = append(out, cur)
				cur = nil
			}
			in = !in
			continue
		}
		if in {
			cur = append(cur, l)
		}
	}
	return out
}

// hexLine reads the bytes of one example line: hex pairs, after an
// optional "header:" or "payload:" label, up to the end of the line.
func hexLine(t *testing.T, l string) []byte {
	t.Helper()
	if i := strings.Index(l, ":"); i >= 0 {
		l = l[i+1:]
	}
	b, err := hex.DecodeString(strings.Join(strings.Fields(l), ""))
	if err != nil {
		t.Fatalf("example line %q is not hex: %v", l, err)
	}
	return b
}
