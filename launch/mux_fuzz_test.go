package launch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"syscall"
	"testing"
)

// FuzzMuxFrame: the host agent's frames, read by either side from any
// bytes: every frame a reader takes encodes back to the bytes it came
// from, and so does every start, exit and started payload it decodes;
// everything else is refused as a mux error or a stream cut short —
// never a panic, never more memory than a frame type's bound.
func FuzzMuxFrame(f *testing.F) {
	var stream []byte
	for _, fr := range []muxFrame{
		{Type: muxHello, Payload: []byte(muxHelloText)},
		{Type: muxStart, Slot: 2, Payload: appendMuxStart(nil, []string{"/opt/sperli", "rank", "p.star", "a b"}, []string{"SPERLI_RANK=2"})},
		{Type: muxStdin, Slot: 2, Payload: []byte("{\"v\":1}\nwaiting\n")},
		{Type: muxClose, Slot: 2},
		{Type: muxKill, Slot: 2},
	} {
		stream = appendMuxFrame(stream, fr)
	}
	f.Add(stream)
	stream = nil
	for _, fr := range []muxFrame{
		{Type: muxHello, Payload: []byte(muxHelloText)},
		{Type: muxStarted, Slot: 2, Payload: binary.BigEndian.AppendUint32(nil, 31337)},
		{Type: muxStdout, Slot: 2, Payload: []byte("out\n")},
		{Type: muxStderr, Slot: 2, Payload: []byte("\x1esperli-status {\"exit\":0}\n")},
		{Type: muxExit, Slot: 2, Payload: appendMuxExit(nil, syscall.WaitStatus(syscall.SIGKILL))},
	} {
		stream = appendMuxFrame(stream, fr)
	}
	f.Add(stream)
	f.Add(header(muxStdout, 1, 1<<31))
	f.Add(append(header(muxExit, 0, 5), 0, 0, 0, 1, 0))
	f.Add(append(header(muxStart, 0, 12), 0, 0, 0, 1, 0, 0, 0, 9, 0, 0, 0, 0))
	f.Add([]byte("Welcome to node1!\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, side := range []muxSide{muxFromLauncher, muxFromAgent} {
			br := bytes.NewReader(data)
			r := newMuxReader(br, side)
			for {
				from := len(data) - br.Len()
				fr, err := r.next()
				if err != nil {
					if err != io.EOF && err != io.ErrUnexpectedEOF && !errors.Is(err, errMux) {
						t.Fatalf("side %d: next() = %v, want a mux error or the stream's end", side, err)
					}
					break
				}
				if cap(fr.Payload) > muxMaxStart {
					t.Fatalf("side %d: a %v frame holds %d bytes", side, fr.Type, cap(fr.Payload))
				}
				if got, want := appendMuxFrame(nil, fr), data[from:len(data)-br.Len()]; !bytes.Equal(got, want) {
					t.Fatalf("side %d: %v frame encodes to %x, read from %x", side, fr.Type, got, want)
				}
				checkPayload(t, fr)
			}
		}
	})
}

// checkPayload decodes a frame's payload, when its type has a form, and
// checks that a payload it takes encodes back the same.
func checkPayload(t *testing.T, fr muxFrame) {
	var again []byte
	switch fr.Type {
	case muxStart:
		argv, env, err := parseMuxStart(fr.Payload)
		if err != nil {
			return
		}
		if len(argv) == 0 || argv[0] == "" {
			t.Fatalf("start frame %x taken with argv %q", fr.Payload, argv)
		}
		again = appendMuxStart(nil, argv, env)
	case muxExit:
		ws, err := parseMuxExit(fr.Payload)
		if err != nil {
			return
		}
		again = appendMuxExit(nil, ws)
	case muxStarted:
		pid, err := parseMuxStarted(fr.Payload)
		if err != nil {
			return
		}
		again = binary.BigEndian.AppendUint32(nil, uint32(pid))
	default:
		return
	}
	if !bytes.Equal(again, fr.Payload) {
		t.Fatalf("%v payload %x decodes and encodes to %x", fr.Type, fr.Payload, again)
	}
}
