package wire

import (
	"bytes"
	"testing"

	"sperli/codes"
)

// The seed corpora are in testdata/fuzz/<Target>/; f.Add adds a few more
// built from the encoders so the seeds follow the format if it changes.

func FuzzDecode(f *testing.F) {
	f.Add(header(Header{Type: Data, Source: 1, Tag: 2, Length: 3}))
	f.Add(header(Header{Type: Collective, Flags: FlagVoid, Length: MaxPayload + 1}))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := Decode(b, AnySource)
		if err != nil {
			if c := codes.Of(err); c != codes.FrameMalformed && c != codes.FrameTooLarge {
				t.Fatalf("Decode(%x) = %v, want code %v or %v", b, err, codes.FrameMalformed, codes.FrameTooLarge)
			}
			return
		}
		if h.Type < Hello || h.Type > Fin || h.Tag > MaxTag || h.Length > MaxPayload {
			t.Fatalf("Decode(%x) = %+v, which it should have refused", b, h)
		}
		out := make([]byte, HeaderSize)
		h.Put(out)
		if !bytes.Equal(out, b[:HeaderSize]) {
			t.Fatalf("Put(Decode(%x)) = %x, want the same bytes", b[:HeaderSize], out)
		}
		// The same header from its own source is accepted; from another is H1609.
		if g, err := Decode(b, int(h.Source)); err != nil || g != h {
			t.Fatalf("Decode(%x, %d) = %+v, %v, want %+v, nil", b, h.Source, g, err, h)
		}
		if _, err := Decode(b, int(h.Source^1)); codes.Of(err) != codes.FrameMalformed {
			t.Fatalf("Decode(%x, %d) = %v, want code %v", b, h.Source^1, err, codes.FrameMalformed)
		}
	})
}

func FuzzHello(f *testing.F) {
	f.Add(AppendHello(nil, HelloBody{SilenceMS: 5000, Token: []byte("tok")}))
	f.Add(AppendHello(nil, HelloBody{SilenceMS: 1, Token: []byte("t"), Program: [DigestSize]byte{1}, Policy: [DigestSize]byte{2}}))
	f.Fuzz(func(t *testing.T, p []byte) {
		h, err := DecodeHello(p)
		if err != nil {
			if c := codes.Of(err); c != codes.HelloMalformed {
				t.Fatalf("DecodeHello(%x) = %v, want code %v", p, err, codes.HelloMalformed)
			}
			return
		}
		if len(h.Token) > MaxToken {
			t.Fatalf("DecodeHello(%x) token is %d bytes, over %d", p, len(h.Token), MaxToken)
		}
		if out := AppendHello(nil, h); !bytes.Equal(out, p) {
			t.Fatalf("AppendHello(DecodeHello(%x)) = %x, want the same bytes", p, out)
		}
	})
}

func FuzzReason(f *testing.F) {
	f.Add(AppendReason(nil, Reason{Code: codes.PeerLost, Cause: codes.CauseLost, Rank: 2, Msg: "no frame for 5000 ms"}))
	f.Fuzz(func(t *testing.T, p []byte) {
		r, err := DecodeReason(p)
		if err != nil {
			if c := codes.Of(err); c != codes.FrameMalformed {
				t.Fatalf("DecodeReason(%x) = %v, want code %v", p, err, codes.FrameMalformed)
			}
			return
		}
		if !r.Code.Valid() || r.Cause > codes.CauseLauncher || len(r.Msg) > MaxText {
			t.Fatalf("DecodeReason(%x) = %+v, which it should have refused", p, r)
		}
		if out := AppendReason(nil, r); !bytes.Equal(out, p) {
			t.Fatalf("AppendReason(DecodeReason(%x)) = %x, want the same bytes", p, out)
		}
	})
}

func FuzzCall(f *testing.F) {
	f.Add(append(AppendCall(nil, Call{Kind: 1, Type: 2, Op: 3, Root: 0, Length: 8}), 1, 2, 3, 4, 5, 6, 7, 8))
	f.Fuzz(func(t *testing.T, p []byte) {
		c, rest, err := DecodeCall(p)
		if err != nil {
			if code := codes.Of(err); code != codes.FrameMalformed {
				t.Fatalf("DecodeCall(%x) = %v, want code %v", p, err, codes.FrameMalformed)
			}
			return
		}
		if out := append(AppendCall(nil, c), rest...); !bytes.Equal(out, p) {
			t.Fatalf("AppendCall(DecodeCall(%x)) = %x, want the same bytes", p, out)
		}
	})
}
