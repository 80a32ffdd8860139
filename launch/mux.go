package launch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"

	"sperli/job"
)

// The host agent's mux (docs/protocol.md §9.5): the launcher runs one ssh
// session per remote host, `ssh HOST SPERLI spawn`, and every rank of that
// host travels over the session's standard input and output as frames.
// This file is the frame format and nothing else: no I/O policy, no
// goroutines. Every frame is a 9-byte header, then its payload:
//
//	type   u8      what the frame is (muxType; the numbers are the protocol's)
//	slot   u32 BE  the rank's slot the frame is about (0 for hello)
//	length u32 BE  the payload's length, checked against the type's bound
//	               before a byte of the payload is read
//
// A reader knows which side it reads (muxFromLauncher, muxFromAgent) and
// refuses a type the other side never sends.

// muxType is a frame's type. The numbers are part of the protocol: new
// types are appended, none is renumbered.
type muxType uint8

const (
	muxHello   muxType = 1 // both ways, first: muxHelloText
	muxStart   muxType = 2 // launcher → agent: start a rank (argv and environment)
	muxStdin   muxType = 3 // launcher → agent: bytes for the rank's standard input
	muxClose   muxType = 4 // launcher → agent: close the rank's standard input
	muxKill    muxType = 5 // launcher → agent: SIGKILL the rank's process group
	muxStarted muxType = 6 // agent → launcher: the rank runs, its pid
	muxStdout  muxType = 7 // agent → launcher: bytes of the rank's standard output
	muxStderr  muxType = 8 // agent → launcher: bytes of the rank's standard error
	muxExit    muxType = 9 // agent → launcher: the rank ended (after its last output)
)

var muxNames = map[muxType]string{
	muxHello: "hello", muxStart: "start", muxStdin: "stdin", muxClose: "close", muxKill: "kill",
	muxStarted: "started", muxStdout: "stdout", muxStderr: "stderr", muxExit: "exit",
}

func (t muxType) String() string {
	if n, ok := muxNames[t]; ok {
		return n
	}
	return fmt.Sprintf("type %d", uint8(t))
}

// Bounds of the mux. A data frame carries at most muxMaxData bytes; a
// start frame's argv and environment at most muxMaxStart (Linux takes
// about 2 MiB for both, a remote shell's command line less).
const (
	muxHeaderLen = 9
	muxMaxData   = 64 << 10
	muxMaxStart  = 1 << 20
	muxMaxWords  = 1 << 16 // words of an argv, or entries of an environment
)

// muxHelloText is the payload of a hello: the protocol and its version.
// A launcher and an agent of different versions refuse each other.
const muxHelloText = "sperli-agent/1"

// muxSide is the side that sends what a reader reads.
type muxSide int

const (
	muxFromLauncher muxSide = iota // the agent reads
	muxFromAgent                   // the launcher reads
)

// muxFrame is one frame. Payload is owned by whoever decoded it until the
// next frame is read (muxReader reuses its buffer).
type muxFrame struct {
	Type    muxType
	Slot    uint32
	Payload []byte
}

// errMux is wrapped by every refusal of a frame: a malformed frame ends
// the session (the side that reads it cannot trust what follows).
var errMux = errors.New("mux")

func muxErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errMux, fmt.Sprintf(format, args...))
}

// checkMuxHeader says what is wrong with a frame header read from side,
// before its payload is read: a type that side does not send, a slot out
// of any job, a length out of the type's bounds.
func checkMuxHeader(side muxSide, t muxType, slot uint32, n uint32) error {
	var min, max uint32
	switch t {
	case muxHello:
		min, max = uint32(len(muxHelloText)), uint32(len(muxHelloText))
	case muxStart:
		min, max = 8, muxMaxStart
	case muxStdin, muxStdout, muxStderr:
		min, max = 1, muxMaxData
	case muxClose, muxKill:
		min, max = 0, 0
	case muxStarted:
		min, max = 4, 4
	case muxExit:
		min, max = 5, 5
	default:
		return muxErr("frame of unknown type %d", uint8(t))
	}
	fromLauncher := t == muxStart || t == muxStdin || t == muxClose || t == muxKill
	fromAgent := t == muxStarted || t == muxStdout || t == muxStderr || t == muxExit
	switch {
	case side == muxFromLauncher && fromAgent:
		return muxErr("%v frame from the launcher, which sends hello, start, stdin, close and kill", t)
	case side == muxFromAgent && fromLauncher:
		return muxErr("%v frame from the agent, which sends hello, started, stdout, stderr and exit", t)
	case t == muxHello && slot != 0:
		return muxErr("hello frame for slot %d, want 0", slot)
	case slot >= job.MaxSize:
		return muxErr("%v frame for slot %d, want 0 to %d", t, slot, job.MaxSize-1)
	case n < min || n > max:
		if min == max {
			return muxErr("%v frame of %d bytes, want %d", t, n, min)
		}
		return muxErr("%v frame of %d bytes, want %d to %d", t, n, min, max)
	}
	return nil
}

// appendMuxFrame appends f's encoding to b. It does not check f: a writer
// only makes frames its reader takes (the tests check both together).
func appendMuxFrame(b []byte, f muxFrame) []byte {
	b = append(b, byte(f.Type))
	b = binary.BigEndian.AppendUint32(b, f.Slot)
	b = binary.BigEndian.AppendUint32(b, uint32(len(f.Payload)))
	return append(b, f.Payload...)
}

// muxReader reads frames sent by one side, checking each header before it
// reads the payload, so that no length a peer claims makes it allocate
// more than the type's bound.
type muxReader struct {
	r    io.Reader
	side muxSide
	hdr  [muxHeaderLen]byte
	buf  []byte
}

func newMuxReader(r io.Reader, side muxSide) *muxReader { return &muxReader{r: r, side: side} }

// next returns the next frame. Its payload is valid until the following
// call. At the end of the stream between frames it returns io.EOF; a
// stream cut inside a frame is io.ErrUnexpectedEOF; a frame it refuses is
// an error wrapping errMux that says what was got and what was wanted.
func (m *muxReader) next() (muxFrame, error) {
	if _, err := io.ReadFull(m.r, m.hdr[:]); err != nil {
		return muxFrame{}, err
	}
	f := muxFrame{Type: muxType(m.hdr[0]), Slot: binary.BigEndian.Uint32(m.hdr[1:5])}
	n := binary.BigEndian.Uint32(m.hdr[5:9])
	if err := checkMuxHeader(m.side, f.Type, f.Slot, n); err != nil {
		return muxFrame{}, err
	}
	if int(n) > cap(m.buf) {
		m.buf = make([]byte, n)
	}
	f.Payload = m.buf[:n]
	if _, err := io.ReadFull(m.r, f.Payload); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return muxFrame{}, err
	}
	if f.Type == muxHello && string(f.Payload) != muxHelloText {
		return muxFrame{}, muxErr("hello %q, want %q (the same sperli on every host)", f.Payload, muxHelloText)
	}
	if cap(m.buf) > muxMaxData {
		m.buf = nil // a start frame's buffer is not kept
	}
	return f, nil
}

// appendMuxStart appends the payload of a start frame: the count of argv's
// words (u32 BE), each word as its length (u32 BE) and bytes, then the
// same for the environment's NAME=VALUE entries.
func appendMuxStart(b []byte, argv, env []string) []byte {
	for _, list := range [][]string{argv, env} {
		b = binary.BigEndian.AppendUint32(b, uint32(len(list)))
		for _, w := range list {
			b = binary.BigEndian.AppendUint32(b, uint32(len(w)))
			b = append(b, w...)
		}
	}
	return b
}

// parseMuxStart decodes a start frame's payload: an argv of 1 to
// muxMaxWords words, the first not empty, and an environment of at most
// muxMaxWords NAME=VALUE entries, no word holding a NUL byte (no exec can
// carry one) and no byte after the environment.
func parseMuxStart(b []byte) (argv, env []string, err error) {
	for i, what := range []string{"argv", "environment"} {
		if len(b) < 4 {
			return nil, nil, muxErr("start frame cut short in its %s count", what)
		}
		n := binary.BigEndian.Uint32(b)
		b = b[4:]
		switch {
		case i == 0 && n == 0:
			return nil, nil, muxErr("start frame with an empty argv")
		case n > muxMaxWords:
			return nil, nil, muxErr("start frame with %d %s words, want at most %d", n, what, muxMaxWords)
		case uint64(n)*4 > uint64(len(b)):
			return nil, nil, muxErr("start frame with %d %s words in %d bytes", n, what, len(b))
		}
		list := make([]string, n)
		for k := range list {
			if len(b) < 4 {
				return nil, nil, muxErr("start frame cut short in %s word %d", what, k)
			}
			l := binary.BigEndian.Uint32(b)
			b = b[4:]
			if uint64(l) > uint64(len(b)) {
				return nil, nil, muxErr("start frame's %s word %d is %d bytes, %d left", what, k, l, len(b))
			}
			w := string(b[:l])
			b = b[l:]
			switch {
			case strings.IndexByte(w, 0) >= 0:
				return nil, nil, muxErr("start frame's %s word %d holds a NUL byte", what, k)
			case i == 0 && k == 0 && w == "":
				return nil, nil, muxErr("start frame with an empty program name")
			case i == 1 && !validEnvEntry(w):
				return nil, nil, muxErr("start frame's environment entry %d %q is not NAME=VALUE", k, cut(w, 40))
			}
			list[k] = w
		}
		if i == 0 {
			argv = list
		} else {
			env = list
		}
	}
	if len(b) != 0 {
		return nil, nil, muxErr("start frame with %d bytes after its environment", len(b))
	}
	return argv, env, nil
}

func validEnvEntry(kv string) bool {
	name, _, ok := strings.Cut(kv, "=")
	return ok && validEnvName(name)
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// How an exit frame says a process ended.
const (
	muxExited   = 0 // the value is its exit status, 0 … 255
	muxSignaled = 1 // the value is the signal that ended it, 1 … 64
)

// appendMuxExit appends an exit frame's payload for the wait status ws:
// how (u8: muxExited or muxSignaled), then the status or signal (u32 BE).
func appendMuxExit(b []byte, ws syscall.WaitStatus) []byte {
	if ws.Signaled() {
		return binary.BigEndian.AppendUint32(append(b, muxSignaled), uint32(ws.Signal()))
	}
	return binary.BigEndian.AppendUint32(append(b, muxExited), uint32(ws.ExitStatus()))
}

// parseMuxExit decodes an exit frame's payload into the wait status it
// says (Linux's encoding, what exitState reads).
func parseMuxExit(b []byte) (syscall.WaitStatus, error) {
	if len(b) != 5 {
		return 0, muxErr("exit frame of %d bytes, want 5", len(b))
	}
	v := binary.BigEndian.Uint32(b[1:])
	switch {
	case b[0] == muxExited && v <= 255:
		return syscall.WaitStatus(v << 8), nil
	case b[0] == muxSignaled && v >= 1 && v <= 64:
		return syscall.WaitStatus(v), nil
	case b[0] == muxExited:
		return 0, muxErr("exit frame with exit status %d, want 0 to 255", v)
	case b[0] == muxSignaled:
		return 0, muxErr("exit frame with signal %d, want 1 to 64", v)
	}
	return 0, muxErr("exit frame of kind %d, want %d (exited) or %d (signaled)", b[0], muxExited, muxSignaled)
}

// parseMuxStarted decodes a started frame's payload: the rank's pid on its
// host, u32 BE, 1 … 2^31-1.
func parseMuxStarted(b []byte) (int, error) {
	if len(b) != 4 {
		return 0, muxErr("started frame of %d bytes, want 4", len(b))
	}
	pid := binary.BigEndian.Uint32(b)
	if pid == 0 || pid > 1<<31-1 {
		return 0, muxErr("started frame with pid %d, want 1 to %d", pid, 1<<31-1)
	}
	return int(pid), nil
}
