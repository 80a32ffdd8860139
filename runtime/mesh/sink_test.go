package mesh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	goruntime "runtime"
	"sync"
	"testing"
	"time"

	"sperli/memnet"
	"sperli/wire"
)

// fakeSink is a Sink that records what its connection tells it.
type fakeSink struct {
	p        *Peer
	mu       sync.Mutex
	frames   []string // "tag:payload" of every data frame, in order
	losses   []string
	refusals []error
	refuse   uint32 // a data frame of this tag is refused (Arrive's error)
	news     chan struct{}
	end      chan struct{}
}

func newFakeSink() *fakeSink {
	return &fakeSink{refuse: 1 << 20, news: make(chan struct{}, 1024), end: make(chan struct{})}
}

func (s *fakeSink) told() {
	select {
	case s.news <- struct{}{}:
	default:
	}
}

func (s *fakeSink) Arrive(h wire.Header, payload []byte) error {
	if h.Type == wire.Lost {
		s.mu.Lock()
		s.frames = append(s.frames, fmt.Sprintf("lost:%s", payload))
		s.mu.Unlock()
		s.told()
		return nil
	}
	if h.Type != wire.Data {
		return nil
	}
	s.mu.Lock()
	if h.Tag == s.refuse {
		s.mu.Unlock()
		return fmt.Errorf("tag %d is refused", h.Tag)
	}
	s.frames = append(s.frames, fmt.Sprintf("%d:%s", h.Tag, payload))
	s.mu.Unlock()
	s.p.Consumed(FrameCost(len(payload)))
	s.told()
	return nil
}

func (s *fakeSink) Lost(why string) {
	s.mu.Lock()
	s.losses = append(s.losses, fmt.Sprintf("slot %d: %s", s.p.Slot(), why))
	s.mu.Unlock()
	s.told()
}

func (s *fakeSink) Refused(err error) {
	s.mu.Lock()
	s.refusals = append(s.refusals, err)
	s.mu.Unlock()
	s.told()
}

func (s *fakeSink) Closing() bool  { return false }
func (s *fakeSink) Expected() bool { return false }
func (s *fakeSink) Gen() uint32    { return 0 }
func (s *fakeSink) Dead() (<-chan struct{}, func() error) {
	return s.end, func() error { return errors.New("ended") }
}

// waitFor waits until ok holds of s (each change of s wakes it).
func (s *fakeSink) waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for {
		s.mu.Lock()
		done := ok()
		s.mu.Unlock()
		if done {
			return
		}
		<-s.news // the test's deadline ends a wait for what never comes
	}
}

// sinkPair is two peers, slots 0 and 1, on the two ends of an in-memory
// connection, each telling its own fake sink: the connection code with no
// Comm above it.
func sinkPair(t *testing.T) (a, b *Peer, sa, sb *fakeSink) {
	ca, cb := memnet.Pipe(64<<10, nil, nil)
	mk := func(self, other int, conn *memnet.Conn, s *fakeSink) *Peer {
		p := New(&Shared{Self: self, Now: time.Now}, s, other, conn, 5000)
		s.p = p
		p.Start()
		t.Cleanup(func() { p.Close(); p.Wait() })
		return p
	}
	sa, sb = newFakeSink(), newFakeSink()
	return mk(0, 1, ca, sa), mk(1, 0, cb, sb), sa, sb
}

func dataFrame(tag int, payload []byte) *Frame {
	return &Frame{H: wire.Header{Type: wire.Data, Tag: uint32(tag), Length: uint32(len(payload))}, Payload: payload, Counted: true, Done: make(chan struct{})}
}

// TestPeerOverASink: frames sent on a connection arrive at the other end's
// sink whole and in order (small ones written by the sender, large ones by
// the writer); a frame the sink refuses is told as refused; a connection
// closed without a bye is told as lost — with no Comm above the peers.
func TestPeerOverASink(t *testing.T) {
	a, _, _, sb := sinkPair(t)
	var want []string
	for i := 0; i < 200; i++ {
		payload := bytes.Repeat([]byte{byte('a' + i%26)}, (i*977)%(300<<10))
		want = append(want, fmt.Sprintf("%d:%s", i%7, payload))
		if err := a.Send(dataFrame(i%7, payload), i%2 == 0); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	sb.waitFor(t, "200 frames", func() bool { return len(sb.frames) == len(want) })
	for i := range want {
		if sb.frames[i] != want[i] {
			t.Fatalf("frame %d arrived as %.40q…, want %.40q…", i, sb.frames[i], want[i])
		}
	}

	sb.mu.Lock()
	sb.refuse = 99
	sb.mu.Unlock()
	if err := a.Send(dataFrame(99, []byte("no")), true); err != nil {
		t.Fatal(err)
	}
	sb.waitFor(t, "the refusal", func() bool { return len(sb.refusals) == 1 })
	if got := sb.refusals[0].Error(); got != "tag 99 is refused" {
		t.Errorf("refused with %q, want the sink's own error", got)
	}

	a2, _, _, sb2 := sinkPair(t)
	a2.Close()
	sb2.waitFor(t, "the loss", func() bool { return len(sb2.losses) == 1 })
	if got := sb2.losses[0]; got != "slot 0: connection closed without bye" {
		t.Errorf("lost %q, want slot 0 closed without bye", got)
	}
}

// TestGoneC: GoneC is open while the connection is, and closed once the
// peer is gone — closed here, or its connection ended from the other end —
// so that a wait for a peer's end (Finish's, for the byes) is woken by it
// rather than polling Gone.
func TestGoneC(t *testing.T) {
	a, b, _, _ := sinkPair(t)
	closed := func(p *Peer) bool {
		select {
		case <-p.GoneC():
			return true
		default:
			return false
		}
	}
	if closed(a) || closed(b) || a.Gone() || b.Gone() {
		t.Fatal("GoneC closed, or Gone, on a live connection")
	}
	a.Close()
	<-a.GoneC() // the test's deadline ends a wait for what never comes
	<-b.GoneC()
	if !a.Gone() || !b.Gone() {
		t.Errorf("GoneC closed with Gone %v and %v, want both true", a.Gone(), b.Gone())
	}
	// Gone twice over, by two paths (each ends in setGone): a bye read,
	// then Close; a refusal, then Close. A second close of GoneC would
	// panic.
	a2, b2, _, _ := sinkPair(t)
	if err := a2.Enqueue(&Frame{H: wire.Header{Type: wire.Bye}}); err != nil {
		t.Fatal(err)
	}
	<-b2.GoneC()
	b2.Close()
	a3, _, _, _ := sinkPair(t)
	a3.Refuse(errors.New("refused by the test"))
	<-a3.GoneC()
	a3.Close()
	c := NewPending(&Shared{Self: 0, Now: time.Now}, newFakeSink(), 2)
	if closed(c) {
		t.Fatal("GoneC of a pending peer closed before its end")
	}
	c.Close()
	<-c.GoneC()
}

// TestCloseTellingIsLast: the frame CloseTelling sends is the last one
// on the connection — after what was queued before it, and before
// nothing, while other goroutines go on sending and heartbeating — and
// sends after it fail with ErrLeft. (A slot takes any frame after that
// one for a lie, runtime/news.go.)
func TestCloseTellingIsLast(t *testing.T) {
	for round := 0; round < 20; round++ {
		a, _, _, sb := sinkPair(t)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := 0; g < 3; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := 0; i < 200; i++ {
					if err := a.Send(dataFrame(g, []byte{byte(i)}), i%3 == 0); errors.Is(err, ErrLeft) {
						return
					}
					a.Control(wire.Heartbeat, nil)
				}
			}()
		}
		close(start)
		a.CloseTelling(wire.Lost, []byte("you were left"), time.Second)
		wg.Wait()
		if err := a.Send(dataFrame(5, []byte("late")), false); !errors.Is(err, ErrLeft) {
			t.Fatalf("a send after CloseTelling returned %v, want ErrLeft", err)
		}
		sb.waitFor(t, "the end of the connection", func() bool { return len(sb.losses) == 1 })
		sb.mu.Lock()
		frames := sb.frames
		sb.mu.Unlock()
		if n := len(frames); n == 0 || frames[n-1] != "lost:you were left" {
			t.Fatalf("round %d: the last of %d frames is not the told one: %q", round, n, frames[max(0, n-3):])
		}
	}
}

// TestPendingPeer: a peer made before its connection (links on demand)
// keeps what is sent to it, direct or queued, and writes it first and in
// order once attached; closed before, its frames fail with ErrNoLink and a
// connection attached later is refused and closed.
func TestPendingPeer(t *testing.T) {
	ca, cb := memnet.Pipe(64<<10, nil, nil)
	sa, sb := newFakeSink(), newFakeSink()
	a := NewPending(&Shared{Self: 0, Now: time.Now}, sa, 1)
	sa.p = a
	t.Cleanup(func() { a.Close(); a.Wait() })
	var want []string
	var sent []*Frame
	for i := 0; i < 20; i++ {
		payload := bytes.Repeat([]byte{byte('a' + i)}, i*1000)
		want = append(want, fmt.Sprintf("%d:%s", i, payload))
		f := dataFrame(i, payload)
		sent = append(sent, f)
		if err := a.Send(f, false); err != nil {
			t.Fatalf("send %d before the connection: %v", i, err)
		}
	}
	select {
	case <-sent[0].Done:
		t.Fatal("a frame was done before the peer had a connection")
	default:
	}
	b := New(&Shared{Self: 1, Now: time.Now}, sb, 0, cb, 5000)
	sb.p = b
	b.Start()
	t.Cleanup(func() { b.Close(); b.Wait() })
	if !a.Attach(ca, 5000) {
		t.Fatal("Attach of a pending peer reported false")
	}
	if err := a.Send(dataFrame(20, []byte("after")), true); err != nil {
		t.Fatal(err)
	}
	want = append(want, "20:after")
	sb.waitFor(t, "21 frames", func() bool { return len(sb.frames) == len(want) })
	for i := range want {
		if sb.frames[i] != want[i] {
			t.Fatalf("frame %d arrived as %.30q…, want %.30q…", i, sb.frames[i], want[i])
		}
	}

	c := NewPending(&Shared{Self: 0, Now: time.Now}, newFakeSink(), 2)
	f := dataFrame(1, []byte("never"))
	if err := c.Send(f, false); err != nil {
		t.Fatal(err)
	}
	c.Close()
	<-f.Done
	if !errors.Is(f.Err, ErrNoLink) {
		t.Errorf("a frame of a peer closed before its connection failed with %v, want ErrNoLink", f.Err)
	}
	if err := c.Send(dataFrame(2, nil), false); !errors.Is(err, ErrNoLink) {
		t.Errorf("a send after it failed with %v, want ErrNoLink", err)
	}
	cc, cd := memnet.Pipe(1024, nil, nil)
	if c.Attach(cc, 5000) {
		t.Error("Attach after Close reported true")
	}
	if _, err := cd.Read(make([]byte, 1)); err == nil {
		t.Error("the connection attached after Close is still open")
	}
}

// TestSmallBatchesNeedNoBuffer: a link that has carried only batches of
// at most smallBatch bytes holds no write buffer, and its frames arrive
// whole and in order; the first larger batch makes the buffer, and small
// frames after it still arrive in order.
func TestSmallBatchesNeedNoBuffer(t *testing.T) {
	a, _, _, sb := sinkPair(t)
	hasBuffer := func() bool {
		a.wmu.Lock()
		defer a.wmu.Unlock()
		return a.bw != nil
	}
	var want []string
	send := func(tag, n int, wait bool) {
		payload := bytes.Repeat([]byte{byte('a' + tag%26)}, n)
		want = append(want, fmt.Sprintf("%d:%s", tag, payload))
		if err := a.Send(dataFrame(tag, payload), wait); err != nil {
			t.Fatalf("send %d: %v", tag, err)
		}
	}
	for i := range 100 {
		send(i, i%200, i%2 == 0) // direct and queued, up to 199 bytes
		a.Control(wire.Heartbeat, nil)
	}
	sb.waitFor(t, "the small frames", func() bool { return len(sb.frames) == len(want) })
	if hasBuffer() {
		t.Errorf("a link that carried only small batches made a write buffer")
	}
	send(100, smallBatch, true) // with its header, above smallBatch
	if !hasBuffer() {
		t.Errorf("a frame of %d bytes went out without the write buffer", smallBatch)
	}
	for i := 101; i < 120; i++ {
		send(i, 10, i%2 == 0)
	}
	sb.waitFor(t, "every frame", func() bool { return len(sb.frames) == len(want) })
	for i := range want {
		if sb.frames[i] != want[i] {
			t.Fatalf("frame %d arrived as %.40q…, want %.40q…", i, sb.frames[i], want[i])
		}
	}
}

// TestHeartbeatsAllocateNothing: a heartbeat, queued, written by the
// writer goroutine and read at the other end, allocates nothing once the
// link has carried one: an idle rank's heap does not grow (the Go
// collector's first run comes only at 16 MB under GOGC=400, and a growing
// heap was resident memory: docs/scale.md).
func TestHeartbeatsAllocateNothing(t *testing.T) {
	// net.Pipe, not memnet: the in-memory network makes a channel for
	// each wake-up, a connection of the kernel nothing.
	ca, cb := net.Pipe()
	mk := func(self, other int, conn net.Conn) *Peer {
		s := newFakeSink()
		p := New(&Shared{Self: self, Now: time.Now}, s, other, conn, 5000)
		s.p = p
		p.Start()
		t.Cleanup(func() { p.Close(); p.Wait() })
		return p
	}
	a, b := mk(0, 1, ca), mk(1, 0, cb)
	beat := func() {
		n := b.Frames()
		a.Control(wire.Heartbeat, nil)
		for b.Frames() == n {
			// Let the writer at a and the reader at b run; the test's
			// deadline ends a wait for what never comes.
			goruntime.Gosched()
		}
	}
	if allocs := testing.AllocsPerRun(200, beat); allocs > 0 {
		t.Errorf("a heartbeat allocated %.2f objects, want none", allocs)
	}
}

// TestReaderWaitsForTheReceiver: while a receiver reads its peer's frames
// itself (ReadFor: a collective waiting on a slow peer), the reader
// goroutine waits for it to let go instead of looking every grace period:
// a process waiting for seconds wakes for its frames, not a hundred times
// a second. The frames still arrive, read by the receiver; after it lets
// go, the reader goroutine reads again.
func TestReaderWaitsForTheReceiver(t *testing.T) {
	a, b, _, sb := sinkPair(t)
	done := make(chan struct{})
	read := make(chan bool, 1)
	before := b.bgLooks.Load()
	go func() {
		// The receiver gets the connection when the reader goroutine, told
		// that a receiver waits (MarkForeground), lets go after a read.
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
			if b.ReadFor(context.Background(), done) {
				read <- true
				return
			}
			b.MarkForeground()
			goruntime.Gosched()
		}
		read <- false
	}()
	// Frames until the receiver holds the connection: each one read by the
	// reader goroutine is a turn at which it may let go.
	sent := 0
	for !b.fgReading.Load() {
		if sent == 1000 {
			t.Fatal("the receiver did not get the connection in 1,000 frames")
		}
		sent++
		if err := a.Send(dataFrame(1, []byte("to whoever reads")), true); err != nil {
			t.Fatal(err)
		}
		sb.waitFor(t, "a frame", func() bool { return len(sb.frames) == sent })
	}
	looks := b.bgLooks.Load()
	// Twenty grace periods pass with the receiver reading (at least that
	// long: a loaded machine makes it longer, and the reader goroutine's
	// turns only fewer).
	for start := time.Now(); time.Since(start) < 20*readGrace; {
		time.Sleep(readGrace)
	}
	if n := b.bgLooks.Load() - looks; n > 2 {
		t.Errorf("the reader goroutine looked %d times in 20 grace periods while the receiver read, want at most 2", n)
	}
	close(done)
	if err := a.Send(dataFrame(2, []byte("ends the receiver's read")), true); err != nil {
		t.Fatal(err)
	}
	if got := <-read; !got {
		t.Fatal("ReadFor says it did not read")
	}
	if b.fgReading.Load() {
		t.Fatal("fgReading still set after ReadFor returned")
	}
	if err := a.Send(dataFrame(3, []byte("to the reader goroutine")), true); err != nil {
		t.Fatal(err)
	}
	sb.waitFor(t, "every frame", func() bool { return len(sb.frames) == sent+2 })
	if want := "3:to the reader goroutine"; sb.frames[sent+1] != want {
		t.Fatalf("last frame %q, want %q", sb.frames[sent+1], want)
	}
	if b.bgLooks.Load() == before {
		t.Fatal("the reader goroutine never ran")
	}
}
