package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"sperli/codes"
)

// header returns the 32 encoded bytes of h.
func header(h Header) []byte {
	b := make([]byte, HeaderSize)
	h.Put(b)
	return b
}

// with returns a copy of b with the bytes at off replaced by v.
func with(b []byte, off int, v ...byte) []byte {
	c := bytes.Clone(b)
	copy(c[off:], v)
	return c
}

func TestDecode(t *testing.T) {
	data := Header{Type: Data, Incarnation: 7, Source: 3, Tag: 42, Length: 100, Seq: 9}
	good := header(data)
	big := Header{Type: Data, Source: 3, Length: MaxPayload}
	over := big
	over.Length = MaxPayload + 1
	for _, tc := range []struct {
		name   string
		b      []byte
		source int
		want   Header     // compared when code is 0
		code   codes.Code // 0: no error
	}{
		{"data", good, 3, data, 0},
		{"data any source", good, AnySource, data, 0},
		{"longer buffer uses 32 bytes", append(bytes.Clone(good), 0xff, 0xff), 3, data, 0},

		{"nil buffer", nil, AnySource, Header{}, codes.FrameMalformed},
		{"empty buffer", []byte{}, AnySource, Header{}, codes.FrameMalformed},
		{"short buffer", good[:HeaderSize-1], 3, Header{}, codes.FrameMalformed},

		{"bad magic", with(good, 0, 'S', 'P', 'R', 'M'), 3, Header{}, codes.FrameMalformed},
		{"lower-case magic", with(good, 0, 's', 'p', 'r', 'l'), 3, Header{}, codes.FrameMalformed},
		{"zero magic", with(good, 0, 0, 0, 0, 0), 3, Header{}, codes.FrameMalformed},
		{"version 0", with(good, 4, 0), 3, Header{}, codes.FrameMalformed},
		{"version 1 (before the dissemination barrier)", with(good, 4, 1), 3, Header{}, codes.FrameMalformed},
		{"version 2 (before signed agreement decisions)", with(good, 4, 2), 3, Header{}, codes.FrameMalformed},
		{"version 3", with(good, 4, 3), 3, Header{}, codes.FrameMalformed},
		{"version 4 (before layouts as runs)", with(good, 4, 4), 3, Header{}, codes.FrameMalformed},
		{"version 5", with(good, 4, 5), 3, Header{}, codes.FrameMalformed},
		{"version 6 (before bruck's alltoall to 8 KiB blocks)", with(good, 4, 6), 3, Header{}, codes.FrameMalformed},
		{"version 7 (before the log on disk at a work queue's start)", with(good, 4, 7), 3, Header{}, codes.FrameMalformed},
		{"version 10", with(good, 4, 10), 3, Header{}, codes.FrameMalformed},
		{"version 8 (before the digests in the hello)", with(good, 4, 8), 3, Header{}, codes.FrameMalformed},
		{"version 255", with(good, 4, 255), 3, Header{}, codes.FrameMalformed},

		{"type 0", header(Header{Type: 0, Source: 3}), 3, Header{}, codes.FrameMalformed},
		{"type 13", header(Header{Type: 13, Source: 3}), 3, Header{}, codes.FrameMalformed},
		{"type 11 agree", header(Header{Type: Agree, Source: 3, Length: 40}), 3, Header{Type: Agree, Source: 3, Length: 40}, 0},
		{"agree empty", header(Header{Type: Agree, Length: 0}), 0, Header{}, codes.FrameMalformed},
		{"type 12 revoke", header(Header{Type: Revoke, Source: 3, Length: 4}), 3, Header{Type: Revoke, Source: 3, Length: 4}, 0},
		{"revoke 5", header(Header{Type: Revoke, Length: 5}), 0, Header{}, codes.FrameMalformed},
		{"type 13 lost", header(Header{Type: Lost, Source: 3, Length: 20}), 3, Header{Type: Lost, Source: 3, Length: 20}, 0},
		{"lost of 6 bytes", header(Header{Type: Lost, Length: 6}), 0, Header{}, codes.FrameMalformed},
		{"type 255", header(Header{Type: 255, Source: 3}), 3, Header{}, codes.FrameMalformed},
		{"type 10 silence", header(Header{Type: Silence, Source: 3, Length: 4}), 3, Header{Type: Silence, Source: 3, Length: 4}, 0},

		{"collective void", header(Header{Type: Collective, Flags: FlagVoid, Seq: 5, Length: 12}), 0, Header{Type: Collective, Flags: FlagVoid, Seq: 5, Length: 12}, 0},
		{"collective ack", header(Header{Type: Collective, Flags: FlagAck, Length: 12}), 0, Header{Type: Collective, Flags: FlagAck, Length: 12}, 0},
		{"collective void|ack", header(Header{Type: Collective, Flags: FlagVoid | FlagAck, Length: 12}), 0, Header{Type: Collective, Flags: FlagVoid | FlagAck, Length: 12}, 0},
		{"collective 11", header(Header{Type: Collective, Length: 11}), 0, Header{}, codes.FrameMalformed},
		{"collective bit 2", header(Header{Type: Collective, Flags: 1 << 2}), 0, Header{}, codes.FrameMalformed},
		{"collective bit 15", header(Header{Type: Collective, Flags: FlagVoid | 1<<15}), 0, Header{}, codes.FrameMalformed},
		{"checkpoint ack", header(Header{Type: Checkpoint, Flags: FlagAck}), 0, Header{Type: Checkpoint, Flags: FlagAck}, 0},
		{"checkpoint void", header(Header{Type: Checkpoint, Flags: FlagVoid}), 0, Header{}, codes.FrameMalformed},
		{"data void", header(Header{Type: Data, Flags: FlagVoid}), 0, Header{}, codes.FrameMalformed},
		{"data ack", header(Header{Type: Data, Flags: FlagAck}), 0, Header{}, codes.FrameMalformed},
		{"hello ack", header(Header{Type: Hello, Flags: FlagAck}), AnySource, Header{}, codes.FrameMalformed},
		{"silence all bits", header(Header{Type: Silence, Flags: 0xffff, Length: 4}), 0, Header{}, codes.FrameMalformed},

		{"tag max", header(Header{Type: Data, Tag: MaxTag}), 0, Header{Type: Data, Tag: MaxTag}, 0},
		{"tag max+1", header(Header{Type: Data, Tag: MaxTag + 1}), 0, Header{}, codes.FrameMalformed},
		{"tag all ones", header(Header{Type: Data, Tag: 0xffffffff}), 0, Header{}, codes.FrameMalformed},

		{"wrong source", good, 4, Header{}, codes.FrameMalformed},
		{"wrong source 0", good, 0, Header{}, codes.FrameMalformed},
		{"source all ones any", header(Header{Type: Hello, Source: 0xffffffff}), AnySource, Header{Type: Hello, Source: 0xffffffff}, 0},
		{"source all ones to rank 0", header(Header{Type: Hello, Source: 0xffffffff}), 0, Header{}, codes.FrameMalformed},

		{"payload max", header(big), 3, big, 0},
		{"payload max+1", header(over), 3, Header{}, codes.FrameTooLarge},
		{"payload max+1 any source", header(over), AnySource, Header{}, codes.FrameTooLarge},
		{"payload all ones", header(Header{Type: Collective, Length: 0xffffffff}), 0, Header{}, codes.FrameTooLarge},

		{"heartbeat 0", header(Header{Type: Heartbeat}), 0, Header{Type: Heartbeat}, 0},
		{"heartbeat 1", header(Header{Type: Heartbeat, Length: 1}), 0, Header{}, codes.FrameMalformed},
		{"bye 0", header(Header{Type: Bye}), 0, Header{Type: Bye}, 0},
		{"bye 1", header(Header{Type: Bye, Length: 1}), 0, Header{}, codes.FrameMalformed},
		{"credit 8", header(Header{Type: Credit, Length: 8}), 0, Header{Type: Credit, Length: 8}, 0},
		{"credit 0", header(Header{Type: Credit}), 0, Header{}, codes.FrameMalformed},
		{"credit 7", header(Header{Type: Credit, Length: 7}), 0, Header{}, codes.FrameMalformed},
		{"credit 9", header(Header{Type: Credit, Length: 9}), 0, Header{}, codes.FrameMalformed},
		{"silence 4", header(Header{Type: Silence, Length: 4}), 0, Header{Type: Silence, Length: 4}, 0},
		{"silence 3", header(Header{Type: Silence, Length: 3}), 0, Header{}, codes.FrameMalformed},
		{"silence 5", header(Header{Type: Silence, Length: 5}), 0, Header{}, codes.FrameMalformed},
		{"hello 0", header(Header{Type: Hello}), AnySource, Header{Type: Hello}, 0},
		{"refuse 0", header(Header{Type: Refuse}), 0, Header{}, codes.FrameMalformed},
		{"refuse 7", header(Header{Type: Refuse, Length: 7}), 0, Header{Type: Refuse, Length: 7}, 0},
		{"abort 6", header(Header{Type: Abort, Length: 6}), 0, Header{}, codes.FrameMalformed},
		{"abort 519", header(Header{Type: Abort, Length: 7 + MaxText}), 0, Header{Type: Abort, Length: 7 + MaxText}, 0},
		{"abort 520", header(Header{Type: Abort, Length: 8 + MaxText}), 0, Header{}, codes.FrameMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode(tc.b, tc.source)
			if c := codes.Of(err); c != tc.code {
				t.Fatalf("Decode(%x, %d) = %+v, %v (code %v), want code %v", tc.b, tc.source, got, err, c, tc.code)
			}
			if err != nil {
				if codes.As(err) == nil {
					t.Errorf("Decode(%x, %d) error %T is not a *codes.Error", tc.b, tc.source, err)
				}
				if !strings.HasPrefix(err.Error(), tc.code.String()+": ") {
					t.Errorf("Decode(%x, %d) error %q does not start with %q", tc.b, tc.source, err, tc.code.String()+": ")
				}
				return
			}
			if got != tc.want {
				t.Errorf("Decode(%x, %d) = %+v, want %+v", tc.b, tc.source, got, tc.want)
			}
		})
	}
}

// TestDecodeFlags tries every flag bit on every type, against the table of
// allowed bits written out here rather than taken from wire.go.
func TestDecodeFlags(t *testing.T) {
	allowed := map[Type]uint16{
		Hello:      FlagDup,
		Collective: FlagVoid | FlagAck,
		Checkpoint: FlagAck,
	}
	length := map[Type]uint32{Credit: 8, Silence: 4, Refuse: 7, Abort: 7, Collective: 12, Agree: 1, Revoke: 4, Lost: 7, Fin: 1}
	for typ := Hello; typ <= Fin; typ++ {
		for bit := range 16 {
			f := uint16(1) << bit
			h := Header{Type: typ, Flags: f, Length: length[typ]}
			want := codes.FrameMalformed
			if allowed[typ]&f != 0 {
				want = 0
			}
			_, err := Decode(header(h), AnySource)
			if got := codes.Of(err); got != want {
				t.Errorf("Decode(%v with flags %#04x) = %v, want code %v", typ, f, err, want)
			}
		}
	}
}

func TestPutDecode(t *testing.T) {
	for _, h := range []Header{
		{Type: Hello, Source: 0xffffffff},
		{Type: Data, Incarnation: 1, Source: 2, Tag: 3, Length: 4, Seq: 5},
		{Type: Data, Incarnation: 0xffffffff, Source: 0xfffffffe, Tag: MaxTag, Length: MaxPayload, Seq: 1<<64 - 1},
		{Type: Heartbeat, Incarnation: 2},
		{Type: Bye, Source: 1},
		{Type: Abort, Length: 7},
		{Type: Collective, Flags: FlagVoid | FlagAck, Seq: 1 << 40, Length: CallSize},
		{Type: Checkpoint, Flags: FlagAck, Tag: 1},
		{Type: Credit, Length: 8},
		{Type: Silence, Length: 4},
	} {
		b := header(h)
		if string(b[:4]) != Magic || b[4] != Version {
			t.Errorf("Put(%+v) = %x, want magic %q and version %d first", h, b, Magic, Version)
		}
		got, err := Decode(b, int(h.Source))
		if err != nil || got != h {
			t.Errorf("Decode(Put(%+v)) = %+v, %v, want the same header", h, got, err)
		}
	}
}

func TestPutFields(t *testing.T) {
	h := Header{Type: Collective, Flags: 0x0102, Incarnation: 0x03040506, Source: 0x0708090a, Tag: 0x0b0c0d0e, Length: 0x0f101112, Seq: 0x131415161718191a}
	want := []byte{
		'S', 'P', 'R', 'L', 9, 7, 0x01, 0x02,
		0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a,
		0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12,
		0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a,
	}
	b := make([]byte, HeaderSize+4)
	h.Put(b)
	if !bytes.Equal(b[:HeaderSize], want) {
		t.Errorf("Put(%+v) = %x, want %x", h, b[:HeaderSize], want)
	}
	if !bytes.Equal(b[HeaderSize:], make([]byte, 4)) {
		t.Errorf("Put(%+v) wrote past the header: %x", h, b[HeaderSize:])
	}
}

func TestTypeString(t *testing.T) {
	for _, tc := range []struct {
		t    Type
		want string
	}{
		{0, "type(0)"}, {Hello, "hello"}, {Data, "data"}, {Collective, "collective"},
		{Silence, "silence"}, {Agree, "agree"}, {Revoke, "revoke"}, {Lost, "lost"}, {Fin, "fin"}, {Relay, "relay"}, {16, "type(16)"}, {255, "type(255)"},
	} {
		if got := tc.t.String(); got != tc.want {
			t.Errorf("Type(%d).String() = %q, want %q", uint8(tc.t), got, tc.want)
		}
	}
}

// headerOnlyReader serves a header and then more bytes, and records any Read
// that asks for a byte past the header.
type headerOnlyReader struct {
	data  []byte
	off   int
	chunk int // most bytes served by one Read
	past  []string
}

func (r *headerOnlyReader) Read(p []byte) (int, error) {
	if r.off+len(p) > HeaderSize {
		r.past = append(r.past, fmt.Sprintf("Read of %d bytes at offset %d", len(p), r.off))
	}
	if r.off >= len(r.data) {
		return 0, io.EOF
	}
	n := min(len(p), r.chunk)
	n = copy(p[:n], r.data[r.off:])
	r.off += n
	return n, nil
}

func TestReadHeaderReadsNoPayload(t *testing.T) {
	huge := header(Header{Type: Data, Source: 1, Length: 17 << 20})
	malformed := with(header(Header{Type: Data, Source: 1, Length: 10}), 4, 10) // version 10
	for _, tc := range []struct {
		name  string
		hdr   []byte
		chunk int
		code  codes.Code
	}{
		{"17 MiB payload", huge, 1 << 20, codes.FrameTooLarge},
		{"17 MiB payload, 5-byte reads", huge, 5, codes.FrameTooLarge},
		{"malformed header", malformed, 1 << 20, codes.FrameMalformed},
		{"malformed header, 1-byte reads", malformed, 1, codes.FrameMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &headerOnlyReader{data: append(bytes.Clone(tc.hdr), bytes.Repeat([]byte{0xaa}, 4096)...), chunk: tc.chunk}
			buf := make([]byte, HeaderSize)
			h, err := ReadHeader(r, buf, 1)
			if c := codes.Of(err); c != tc.code {
				t.Errorf("ReadHeader(%x...) = %+v, %v, want code %v", tc.hdr, h, err, tc.code)
			}
			if r.off != HeaderSize {
				t.Errorf("ReadHeader consumed %d bytes, want %d", r.off, HeaderSize)
			}
			for _, p := range r.past {
				t.Errorf("ReadHeader asked past the header: %s", p)
			}
		})
	}
}

func TestReadHeader(t *testing.T) {
	want := Header{Type: Credit, Source: 2, Length: 8, Seq: 3}
	b := header(want)
	r := bytes.NewReader(append(bytes.Clone(b), 1, 2, 3, 4, 5, 6, 7, 8))
	buf := make([]byte, HeaderSize)
	got, err := ReadHeader(r, buf, 2)
	if err != nil || got != want {
		t.Errorf("ReadHeader(%x) = %+v, %v, want %+v, nil", b, got, err, want)
	}
	if r.Len() != 8 {
		t.Errorf("ReadHeader left %d bytes, want 8", r.Len())
	}
	if !bytes.Equal(buf, b) {
		t.Errorf("ReadHeader buffer = %x, want %x", buf, b)
	}
}

func TestReadHeaderIOError(t *testing.T) {
	b := header(Header{Type: Heartbeat})
	broken := errors.New("connection reset")
	for _, tc := range []struct {
		name string
		r    io.Reader
		want error
	}{
		{"empty", bytes.NewReader(nil), io.EOF},
		{"short", bytes.NewReader(b[:10]), io.ErrUnexpectedEOF},
		{"one short", bytes.NewReader(b[:HeaderSize-1]), io.ErrUnexpectedEOF},
		{"broken", io.MultiReader(bytes.NewReader(b[:3]), iotestErr{broken}), broken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ReadHeader(tc.r, make([]byte, HeaderSize), 0)
			if err != tc.want {
				t.Errorf("ReadHeader(%s) = %+v, %v, want %v as it came", tc.name, h, err, tc.want)
			}
			if codes.Of(err) != 0 {
				t.Errorf("ReadHeader(%s) error %v has code %v, want an I/O error without code", tc.name, err, codes.Of(err))
			}
		})
	}
}

// iotestErr is a reader that always fails with err.
type iotestErr struct{ err error }

func (r iotestErr) Read([]byte) (int, error) { return 0, r.err }

func BenchmarkDecode(b *testing.B) {
	buf := header(Header{Type: Collective, Flags: FlagAck, Incarnation: 1, Source: 5, Tag: 7, Length: 4096, Seq: 99})
	b.SetBytes(HeaderSize)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(buf, 5); err != nil {
			b.Fatal(err)
		}
	}
}

func TestHelloRoundTrip(t *testing.T) {
	var prog, pol [DigestSize]byte
	for i := range prog {
		prog[i], pol[i] = byte(i), byte(0xff-i)
	}
	for _, h := range []HelloBody{
		{SilenceMS: 0, Token: []byte{}},
		{SilenceMS: 5000, Token: []byte("token"), Policy: pol},
		{SilenceMS: 0xffffffff, Token: bytes.Repeat([]byte{0x5a}, MaxToken), Program: prog, Policy: pol},
	} {
		p := AppendHello(nil, h)
		if len(p) != HelloFixed+len(h.Token) {
			t.Errorf("AppendHello(%d-byte token) is %d bytes, want %d", len(h.Token), len(p), HelloFixed+len(h.Token))
		}
		got, err := DecodeHello(p)
		if err != nil || got.SilenceMS != h.SilenceMS || !bytes.Equal(got.Token, h.Token) || got.Program != h.Program || got.Policy != h.Policy {
			t.Errorf("DecodeHello(AppendHello(%d, %d-byte token, %x, %x)) = %d, %d bytes, %x, %x, %v, want the same", h.SilenceMS, len(h.Token), h.Program, h.Policy, got.SilenceMS, len(got.Token), got.Program, got.Policy, err)
		}
	}
	// AppendHello appends, the digests after the token.
	p := AppendHello([]byte("xy"), HelloBody{SilenceMS: 1, Token: []byte{9}, Program: prog, Policy: pol})
	want := append([]byte{'x', 'y', 2, 0, 0, 0, 1, 0, 1, 9}, prog[:]...)
	want = append(want, pol[:]...)
	if !bytes.Equal(p, want) {
		t.Errorf("AppendHello(xy, {1, [9], prog, pol}) = %x, want %x", p, want)
	}
}

func TestDecodeHello(t *testing.T) {
	// hello builds a payload by hand: version, silence, stated token
	// length, token, then the digests (program 0x11…, policy 0x22…).
	digests := append(bytes.Repeat([]byte{0x11}, DigestSize), bytes.Repeat([]byte{0x22}, DigestSize)...)
	hello := func(version byte, n uint16, token []byte) []byte {
		p := append([]byte{version, 0, 0, 0x13, 0x88, byte(n >> 8), byte(n)}, token...)
		return append(p, digests...)
	}
	for _, tc := range []struct {
		name  string
		p     []byte
		code  codes.Code
		token []byte
	}{
		{"empty token", hello(2, 0, nil), 0, nil},
		{"token", hello(2, 3, []byte("abc")), 0, []byte("abc")},
		{"token MaxToken", hello(2, MaxToken, make([]byte, MaxToken)), 0, make([]byte, MaxToken)},
		{"nil", nil, codes.HelloMalformed, nil},
		{"short 70", hello(2, 0, nil)[:70], codes.HelloMalformed, nil},
		{"no digests", hello(2, 0, nil)[:7], codes.HelloMalformed, nil},
		{"policy cut", hello(2, 3, []byte("abc"))[:7+3+DigestSize+5], codes.HelloMalformed, nil},
		{"short 1", []byte{2}, codes.HelloMalformed, nil},
		{"version 0", hello(0, 0, nil), codes.HelloMalformed, nil},
		{"version 1", hello(1, 3, []byte("abc")), codes.HelloMalformed, nil},
		{"version 1 without digests", []byte{1, 0, 0, 0x13, 0x88, 0, 1, 'a'}, codes.HelloMalformed, nil},
		{"version 3", hello(3, 3, []byte("abc")), codes.HelloMalformed, nil},
		{"token shorter than said", hello(2, 4, []byte("abc")), codes.HelloMalformed, nil},
		{"token longer than said", hello(2, 2, []byte("abc")), codes.HelloMalformed, nil},
		{"token said 0, 1 byte", hello(2, 0, []byte{0}), codes.HelloMalformed, nil},
		{"token MaxToken+1", hello(2, MaxToken+1, make([]byte, MaxToken+1)), codes.HelloMalformed, nil},
		{"token 65535 said, none sent", hello(2, 0xffff, nil), codes.HelloMalformed, nil},
	} {
		got, err := DecodeHello(tc.p)
		if c := codes.Of(err); c != tc.code {
			t.Errorf("DecodeHello(%s) = %+v, %v, want code %v", tc.name, got, err, tc.code)
			continue
		}
		if err != nil {
			continue
		}
		if got.SilenceMS != 5000 || !bytes.Equal(got.Token, tc.token) || !bytes.Equal(got.Program[:], digests[:DigestSize]) || !bytes.Equal(got.Policy[:], digests[DigestSize:]) {
			t.Errorf("DecodeHello(%s) = %d, %x, %x, %x, want 5000, %x and the digests", tc.name, got.SilenceMS, got.Token, got.Program, got.Policy, tc.token)
		}
	}
}

func TestReasonRoundTrip(t *testing.T) {
	long := strings.Repeat("abcdefgh", 80) // 640 bytes
	for _, tc := range []struct {
		r    Reason
		want Reason
	}{
		{Reason{Code: codes.PeerLost, Cause: codes.CauseLost, Rank: 2, Msg: "rank 2 lost: no frame for 5000 ms"}, Reason{Code: codes.PeerLost, Cause: codes.CauseLost, Rank: 2, Msg: "rank 2 lost: no frame for 5000 ms"}},
		{Reason{Code: codes.TokenRank, Rank: -1}, Reason{Code: codes.TokenRank, Rank: -1}},
		{Reason{Code: codes.JobEnded, Cause: codes.CauseLauncher, Rank: -1, Msg: "ended"}, Reason{Code: codes.JobEnded, Cause: codes.CauseLauncher, Rank: -1, Msg: "ended"}},
		{Reason{Code: codes.CheckpointStorage, Cause: codes.CauseFailed, Rank: 1<<31 - 1, Msg: long[:MaxText]}, Reason{Code: codes.CheckpointStorage, Cause: codes.CauseFailed, Rank: 1<<31 - 1, Msg: long[:MaxText]}},
		{Reason{Code: codes.JobEnded, Cause: codes.CauseAborted, Rank: 0, Msg: long}, Reason{Code: codes.JobEnded, Cause: codes.CauseAborted, Rank: 0, Msg: long[:MaxText]}},
	} {
		p := AppendReason(nil, tc.r)
		if want := 7 + len(tc.want.Msg); len(p) != want {
			t.Errorf("AppendReason(%v, %d-byte message) is %d bytes, want %d", tc.r.Code, len(tc.r.Msg), len(p), want)
		}
		got, err := DecodeReason(p)
		if err != nil || got != tc.want {
			t.Errorf("DecodeReason(AppendReason(%+v)) = %+v, %v, want %+v", tc.r, got, err, tc.want)
		}
	}
	p := AppendReason([]byte{0xee}, Reason{Code: codes.FrameTooLarge, Cause: codes.CauseFailed, Rank: -1, Msg: "x"})
	if want := []byte{0xee, 0x06, 0x48, 2, 0xff, 0xff, 0xff, 0xff, 'x'}; !bytes.Equal(p, want) {
		t.Errorf("AppendReason(ee, {H1608, failed, -1, x}) = %x, want %x", p, want)
	}
}

func TestDecodeReason(t *testing.T) {
	// reason builds a payload by hand.
	reason := func(code uint16, cause byte, msg string) []byte {
		return append([]byte{byte(code >> 8), byte(code), cause, 0, 0, 0, 3}, msg...)
	}
	for _, tc := range []struct {
		name string
		p    []byte
		code codes.Code
	}{
		{"H1601", reason(1601, 0, ""), 0},
		{"H1625 launcher", reason(1625, 4, "full"), 0},
		{"message MaxText", reason(1612, 1, strings.Repeat("m", MaxText)), 0},
		{"nil", nil, codes.FrameMalformed},
		{"short 6", reason(1601, 0, "")[:6], codes.FrameMalformed},
		{"message MaxText+1", reason(1612, 1, strings.Repeat("m", MaxText+1)), codes.FrameMalformed},
		{"code 0", reason(0, 0, ""), codes.FrameMalformed},
		{"code 1600", reason(1600, 0, ""), codes.FrameMalformed},
		{"code 1627", reason(1627, 0, ""), 0},
		{"code 1629", reason(1629, 0, ""), codes.FrameMalformed},
		{"code 65535", reason(0xffff, 0, ""), codes.FrameMalformed},
		{"cause 5", reason(1611, 5, ""), codes.FrameMalformed},
		{"cause 255", reason(1611, 255, ""), codes.FrameMalformed},
	} {
		got, err := DecodeReason(tc.p)
		if c := codes.Of(err); c != tc.code {
			t.Errorf("DecodeReason(%s) = %+v, %v, want code %v", tc.name, got, err, tc.code)
			continue
		}
		if err == nil && (got.Rank != 3 || got.Msg != string(tc.p[7:])) {
			t.Errorf("DecodeReason(%s) = %+v, want rank 3 and message %q", tc.name, got, tc.p[7:])
		}
	}
}

func TestCallRoundTrip(t *testing.T) {
	for _, c := range []Call{
		{},
		{Kind: 1, Type: 2, Op: 3, Root: 4, Length: 5},
		{Kind: 255, Type: 255, Op: 255, Root: 0xffffffff, Length: MaxPayload},
	} {
		for _, rest := range [][]byte{{}, []byte("payload")} {
			p := append(AppendCall(nil, c), rest...)
			if len(p) != CallSize+len(rest) {
				t.Errorf("AppendCall(%+v) is %d bytes, want %d", c, len(p)-len(rest), CallSize)
			}
			got, gotRest, err := DecodeCall(p)
			if err != nil || got != c || !bytes.Equal(gotRest, rest) {
				t.Errorf("DecodeCall(AppendCall(%+v)+%q) = %+v, %q, %v, want the same", c, rest, got, gotRest, err)
			}
		}
	}
	p := AppendCall([]byte{0xee}, Call{Kind: 1, Type: 2, Op: 3, Root: 0x01020304, Length: 0x05060708})
	if want := []byte{0xee, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 8}; !bytes.Equal(p, want) {
		t.Errorf("AppendCall(ee, ...) = %x, want %x", p, want)
	}
}

func TestDecodeCall(t *testing.T) {
	good := AppendCall(nil, Call{Kind: 1, Root: 2, Length: 3})
	for _, tc := range []struct {
		name string
		p    []byte
		code codes.Code
	}{
		{"exact", good, 0},
		{"nil", nil, codes.FrameMalformed},
		{"short 11", good[:CallSize-1], codes.FrameMalformed},
		{"reserved 1", with(good, 3, 1), codes.FrameMalformed},
		{"reserved 255", with(good, 3, 255), codes.FrameMalformed},
	} {
		got, rest, err := DecodeCall(tc.p)
		if c := codes.Of(err); c != tc.code {
			t.Errorf("DecodeCall(%s) = %+v, %x, %v, want code %v", tc.name, got, rest, err, tc.code)
		}
	}
}

// TestRelayed: a relay payload decodes to what was encoded, its fields
// within the payload; origin and destination outside the job or equal,
// a certificate of no bytes or past the payload, no message, are
// refused with H1609.
func TestRelayed(t *testing.T) {
	r := Relayed{Origin: 7, Dest: 900, Seq: 3, Hops: 31, Cert: []byte("cert"), Sig: bytes.Repeat([]byte{9}, 64), Inner: []byte{0, 1, 2}}
	b := AppendRelayed(nil, r)
	got, err := DecodeRelayed(b, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if got.Origin != 7 || got.Dest != 900 || got.Seq != 3 || got.Hops != 31 || string(got.Cert) != "cert" || !bytes.Equal(got.Sig, r.Sig) || !bytes.Equal(got.Inner, r.Inner) {
		t.Fatalf("decoded %+v, want %+v", got, r)
	}
	if !bytes.Equal(got.Signed(), r.Signed()) {
		t.Fatal("the decoded frame signs other bytes than the encoded one")
	}
	other := r
	other.Seq = 4
	if bytes.Equal(other.Signed(), r.Signed()) {
		t.Fatal("the sequence is not signed")
	}
	bad := func(name string, b []byte, slots int) {
		t.Helper()
		if _, err := DecodeRelayed(b, slots); codes.Of(err) != codes.FrameMalformed {
			t.Errorf("%s: %v, want H1609", name, err)
		}
	}
	bad("origin outside the job", b, 8)
	bad("destination outside the job", b, 900)
	self := r
	self.Dest = 7
	bad("to its origin", AppendRelayed(nil, self), 1000)
	noCert := r
	noCert.Cert = nil
	bad("no certificate", AppendRelayed(nil, noCert), 1000)
	bad("no message", b[:len(b)-3], 1000)
	long := append([]byte(nil), b...)
	long[17], long[18] = 0xff, 0xff
	bad("a certificate past the payload", long, 1000)
	bad("cut short", b[:RelayHead], 1000)
}
