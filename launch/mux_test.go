package launch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

// header is a frame header as bytes, payload not included.
func header(t muxType, slot, n uint32) []byte {
	b := []byte{byte(t)}
	b = binary.BigEndian.AppendUint32(b, slot)
	return binary.BigEndian.AppendUint32(b, n)
}

// TestMuxRoundTrip: every frame a side sends reads back the same on the
// other side, one after another from one stream.
func TestMuxRoundTrip(t *testing.T) {
	start := appendMuxStart(nil, []string{"/opt/sperli dir/sperli", "rank", "--wdir", "/w", "p.star", "", "a b"}, []string{"SPERLI_RANK=3", "X=a=b", "EMPTY="})
	for _, tc := range []struct {
		side   muxSide
		frames []muxFrame
	}{
		{muxFromLauncher, []muxFrame{
			{Type: muxHello, Payload: []byte(muxHelloText)},
			{Type: muxStart, Slot: 3, Payload: start},
			{Type: muxStdin, Slot: 3, Payload: []byte("{\"v\":1}\n")},
			{Type: muxStdin, Slot: 4095, Payload: bytes.Repeat([]byte("w"), muxMaxData)},
			{Type: muxClose, Slot: 3, Payload: []byte{}},
			{Type: muxKill, Slot: 0, Payload: []byte{}},
		}},
		{muxFromAgent, []muxFrame{
			{Type: muxHello, Payload: []byte(muxHelloText)},
			{Type: muxStarted, Slot: 3, Payload: binary.BigEndian.AppendUint32(nil, 4242)},
			{Type: muxStdout, Slot: 3, Payload: []byte("[out]\n")},
			{Type: muxStderr, Slot: 3, Payload: []byte("\x1esperli-status {}\n")},
			{Type: muxExit, Slot: 3, Payload: appendMuxExit(nil, syscall.WaitStatus(75<<8))},
			{Type: muxExit, Slot: 7, Payload: appendMuxExit(nil, syscall.WaitStatus(syscall.SIGKILL))},
		}},
	} {
		var b []byte
		for _, f := range tc.frames {
			b = appendMuxFrame(b, f)
		}
		r := newMuxReader(bytes.NewReader(b), tc.side)
		for i, want := range tc.frames {
			got, err := r.next()
			if err != nil {
				t.Fatalf("side %d frame %d (%v): %v", tc.side, i, want.Type, err)
			}
			if got.Type != want.Type || got.Slot != want.Slot || !bytes.Equal(got.Payload, want.Payload) {
				t.Errorf("side %d frame %d = %v slot %d %q, want %v slot %d %q", tc.side, i, got.Type, got.Slot, cut(string(got.Payload), 40), want.Type, want.Slot, cut(string(want.Payload), 40))
			}
		}
		if _, err := r.next(); err != io.EOF {
			t.Errorf("side %d after the last frame: %v, want io.EOF", tc.side, err)
		}
	}
}

// countingReader counts what is read from it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// TestMuxRefused: a header the reader refuses is refused before any byte
// of its payload is read (an oversized frame allocates nothing), with an
// error that says what came and what was wanted.
func TestMuxRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		side muxSide
		in   []byte
		want string
	}{
		{"oversized stdout", muxFromAgent, header(muxStdout, 1, muxMaxData+1), "stdout frame of 65537 bytes, want 1 to 65536"},
		{"oversized stdin", muxFromLauncher, header(muxStdin, 1, 1<<31), "stdin frame of 2147483648 bytes, want 1 to 65536"},
		{"oversized start", muxFromLauncher, header(muxStart, 1, muxMaxStart+1), "start frame of 1048577 bytes, want 8 to 1048576"},
		{"empty stderr", muxFromAgent, header(muxStderr, 1, 0), "stderr frame of 0 bytes, want 1 to 65536"},
		{"kill with a payload", muxFromLauncher, header(muxKill, 1, 1), "kill frame of 1 bytes, want 0"},
		{"short exit", muxFromAgent, header(muxExit, 1, 4), "exit frame of 4 bytes, want 5"},
		{"unknown type", muxFromAgent, header(200, 1, 0), "frame of unknown type 200"},
		{"type 0", muxFromLauncher, header(0, 0, 0), "frame of unknown type 0"},
		{"start from the agent", muxFromAgent, header(muxStart, 1, 8), "start frame from the agent"},
		{"stdout from the launcher", muxFromLauncher, header(muxStdout, 1, 1), "stdout frame from the launcher"},
		{"hello for a slot", muxFromAgent, header(muxHello, 2, uint32(len(muxHelloText))), "hello frame for slot 2, want 0"},
		{"slot out of any job", muxFromLauncher, header(muxStdin, 1<<20, 1), "stdin frame for slot 1048576, want 0 to 1048575"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The header, then a payload as long as the header says or
			// more: none of it may be read.
			cr := &countingReader{r: io.MultiReader(bytes.NewReader(tc.in), zeros{})}
			_, err := newMuxReader(cr, tc.side).next()
			if err == nil || !errors.Is(err, errMux) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("next() = %v, want a mux error saying %q", err, tc.want)
			}
			if cr.n != muxHeaderLen {
				t.Errorf("read %d bytes, want the header's %d only", cr.n, muxHeaderLen)
			}
		})
	}
}

// zeros reads as endless zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestMuxHello: a hello of another protocol or version is refused, and
// says so.
func TestMuxHello(t *testing.T) {
	for _, hello := range []string{"sperli-agent/2", "Welcome to n1!\n"[:len(muxHelloText)]} {
		b := appendMuxFrame(nil, muxFrame{Type: muxHello, Payload: []byte(hello)})
		_, err := newMuxReader(bytes.NewReader(b), muxFromAgent).next()
		if err == nil || !strings.Contains(err.Error(), `want "sperli-agent/1" (the same sperli on every host)`) {
			t.Errorf("hello %q: %v, want a refusal naming sperli-agent/1", hello, err)
		}
	}
}

// TestMuxCutShort: a stream that ends inside a header or a payload is
// io.ErrUnexpectedEOF; between frames io.EOF.
func TestMuxCutShort(t *testing.T) {
	full := appendMuxFrame(nil, muxFrame{Type: muxStdout, Slot: 1, Payload: []byte("hello\n")})
	for n := 0; n < len(full); n++ {
		_, err := newMuxReader(bytes.NewReader(full[:n]), muxFromAgent).next()
		want := io.ErrUnexpectedEOF
		if n == 0 {
			want = io.EOF
		}
		if err != want {
			t.Errorf("the frame's first %d bytes: %v, want %v", n, err, want)
		}
	}
}

// TestMuxStart: a start frame's payload decodes strictly.
func TestMuxStart(t *testing.T) {
	argv := []string{"/abs/gosum", "", "a\nb", "$(x)"}
	env := []string{"A=", "B_2=x=y"}
	got, gotEnv, err := parseMuxStart(appendMuxStart(nil, argv, env))
	if err != nil || !reflect.DeepEqual(got, argv) || !reflect.DeepEqual(gotEnv, env) {
		t.Fatalf("parseMuxStart = %q, %q, %v; want %q, %q", got, gotEnv, err, argv, env)
	}
	if _, e, err := parseMuxStart(appendMuxStart(nil, argv, nil)); err != nil || len(e) != 0 {
		t.Errorf("no environment: %q, %v", e, err)
	}
	u32 := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty argv", appendMuxStart(nil, nil, nil), "empty argv"},
		{"empty program", appendMuxStart(nil, []string{""}, nil), "empty program name"},
		{"NUL in a word", appendMuxStart(nil, []string{"/bin/x", "a\x00b"}, nil), "argv word 1 holds a NUL byte"},
		{"not NAME=VALUE", appendMuxStart(nil, []string{"/bin/x"}, []string{"NOEQUALS"}), `environment entry 0 "NOEQUALS" is not NAME=VALUE`},
		{"bad name", appendMuxStart(nil, []string{"/bin/x"}, []string{"1A=b"}), "is not NAME=VALUE"},
		{"trailing bytes", append(appendMuxStart(nil, []string{"/bin/x"}, nil), 0), "1 bytes after its environment"},
		{"word longer than the frame", cat(u32(1), u32(100), []byte("/bin/x"), u32(0)), "argv word 0 is 100 bytes, 10 left"},
		{"more words than bytes", cat(u32(1000), u32(1), []byte("x")), "1000 argv words in 5 bytes"},
		{"too many words", cat(u32(muxMaxWords + 1)), "want at most 65536"},
		{"cut in the count", []byte{0, 0}, "cut short in its argv count"},
		{"no environment count", cat(u32(1), u32(1), []byte("x")), "cut short in its environment count"},
	} {
		if _, _, err := parseMuxStart(tc.b); err == nil || !errors.Is(err, errMux) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: parseMuxStart = %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

// TestMuxExit: the ends an exit frame says, and those it cannot.
func TestMuxExit(t *testing.T) {
	for _, ws := range []syscall.WaitStatus{0, 1 << 8, 75 << 8, 255 << 8, syscall.WaitStatus(syscall.SIGKILL), syscall.WaitStatus(syscall.SIGTERM)} {
		got, err := parseMuxExit(appendMuxExit(nil, ws))
		if err != nil || got != ws {
			t.Errorf("parseMuxExit(appendMuxExit(%#x)) = %#x, %v", ws, got, err)
		}
	}
	for _, tc := range []struct {
		b    []byte
		want string
	}{
		{[]byte{0, 0, 0, 1, 0}, "exit status 256, want 0 to 255"},
		{[]byte{1, 0, 0, 0, 0}, "signal 0, want 1 to 64"},
		{[]byte{1, 0, 0, 0, 65}, "signal 65, want 1 to 64"},
		{[]byte{2, 0, 0, 0, 0}, "kind 2"},
	} {
		if _, err := parseMuxExit(tc.b); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseMuxExit(%v) = %v, want an error saying %q", tc.b, err, tc.want)
		}
	}
	if _, err := parseMuxStarted([]byte{0, 0, 0, 0}); err == nil || !strings.Contains(err.Error(), "pid 0") {
		t.Errorf("started with pid 0: %v", err)
	}
}
