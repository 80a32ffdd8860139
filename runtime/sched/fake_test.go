package sched

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"math/bits"
	"sync"
	"testing"

	"sperli/wire"
)

// The fake Link: n ranks in one process, a goroutine each, joined by a
// buffered channel per (from, to) pair. It is the wire without the
// runtime: Send copies the data into a frame as a connection would (odd
// ranks' frames start one byte off an 8-byte boundary, so that the folds
// see unaligned data), Take waits for the next frame from one rank, and
// the job ends when a rank reports a mismatch or fails. Nothing here has a
// timeout: a schedule that deadlocks is the test binary's -timeout.

var (
	// errEnded is what a rank's Send or Take returns once another rank
	// has ended the job (the runtime's H1612).
	errEnded = errors.New("fake: the job ended")
	// errInjected is the failure of a Send or Take a test asked for.
	errInjected = errors.New("fake: injected link failure")
)

// mismatchError is what fakeLink.Mismatch returns (the runtime's H1613).
type mismatchError struct{ msg string }

func (e *mismatchError) Error() string { return "H1613: " + e.msg }

// pipeFrames is the frames a pair's channel holds: more than any schedule
// here has in flight between two ranks at the sizes of these tests.
const pipeFrames = 16

// fakeNet is the job: every rank's pipes and its end.
type fakeNet struct {
	t   testing.TB
	n   int
	ctx context.Context
	end context.CancelFunc
	// pipes are made the first time a rank sends to or takes from
	// another, as links are: n² pipes of 1,024 ranks would be a GiB.
	mu    sync.Mutex
	pipes map[[2]int]chan Frame // by {from, to}
}

// pipe is the pipe from rank from to rank to.
func (net *fakeNet) pipe(from, to int) chan Frame {
	net.mu.Lock()
	defer net.mu.Unlock()
	p, ok := net.pipes[[2]int{from, to}]
	if !ok {
		p = make(chan Frame, pipeFrames)
		net.pipes[[2]int{from, to}] = p
	}
	return p
}

// fakeLink is one rank's Link for one call.
type fakeLink struct {
	net  *fakeNet
	rank int
	kind wire.CollKind
	// desc is the length this rank's call descriptor gives (Frame.Len of
	// every frame it sends), as runtime's descriptor does.
	desc int
	// lie, when set, changes every frame this rank sends (a rank whose
	// frames disagree with its call).
	lie func(f *Frame)
	// failSend and failTake make this rank's failSend-th Send or
	// failTake-th Take return errInjected (0: never).
	failSend, failTake int
	sends, takes       int
	// events counts this rank's Sends and Takes; firstResult is the event
	// of its first Send of a result (ack) and lastData that of its last
	// Take of a contribution (no ack): the order of its pipeline.
	events, firstResult, lastData int
	sent                          []sentFrame
	// partners are the ranks this rank sent to or took from; named are
	// those the schedule named in Partners, and unnamed those it used
	// before naming them.
	partners, named, unnamed map[int]bool
	// mismatch is the message of this rank's Mismatch ("": none).
	mismatch string
}

// descLen is the length a rank's call descriptor gives, as runtime's
// does: the length of its data, but none in barrier and scatter, and in
// bcast only the root's.
func descLen(kind wire.CollKind, rank, root, n int) int {
	switch {
	case kind == wire.CollBarrier || kind == wire.CollScatter, kind == wire.CollBcast && rank != root:
		return 0
	}
	return n
}

// sentFrame remembers what data a Send aliased, to check the schedule left
// it unchanged until the call returned.
type sentFrame struct {
	to   int
	data []byte
	sum  uint32
}

func newFakeNet(t testing.TB, n int) *fakeNet {
	ctx, end := context.WithCancel(t.Context())
	return &fakeNet{t: t, n: n, ctx: ctx, end: end, pipes: make(map[[2]int]chan Frame)}
}

func (l *fakeLink) Rank() int        { return l.rank }
func (l *fakeLink) Size() int        { return l.net.n }
func (l *fakeLink) Seq() uint64      { return 7 }
func (l *fakeLink) Describe() string { return "fake " + l.kind.String() }

func (l *fakeLink) Send(to int, ack bool, data []byte) error {
	l.sends++
	l.events++
	if ack && l.firstResult == 0 {
		l.firstResult = l.events
	}
	if l.sends == l.failSend {
		return errInjected
	}
	if to < 0 || to >= l.net.n || to == l.rank {
		l.net.t.Errorf("rank %d sent a frame to rank %d of %d", l.rank, to, l.net.n)
		return errInjected
	}
	l.use(to)
	off := l.rank % 2
	buf := fakeBuf(off + len(data))
	copy(buf[off:], data)
	l.sent = append(l.sent, sentFrame{to: to, data: data, sum: crc32.ChecksumIEEE(data)})
	f := Frame{Ack: ack, Len: l.desc, Data: buf[off:], Buf: buf}
	if l.lie != nil {
		l.lie(&f)
	}
	select {
	case l.net.pipe(l.rank, to) <- f:
		return nil
	case <-l.net.ctx.Done():
		return errEnded
	}
}

func (l *fakeLink) Take(from int) (Frame, error) {
	l.takes++
	if l.takes == l.failTake {
		return Frame{}, errInjected
	}
	if from < 0 || from >= l.net.n || from == l.rank {
		l.net.t.Errorf("rank %d took a frame from rank %d of %d", l.rank, from, l.net.n)
		return Frame{}, errInjected
	}
	l.use(from)
	p := l.net.pipe(from, l.rank)
	l.events++
	select {
	case f := <-p:
		if !f.Ack {
			l.lastData = l.events
		}
		return f, nil
	case <-l.net.ctx.Done():
		// A frame sent before the job ended counts, so that what a rank
		// sees does not depend on which came first to the select.
		select {
		case f := <-p:
			return f, nil
		default:
			return Frame{}, errEnded
		}
	}
}

// Release spoils the first and last bytes of the frame's buffer and hands
// it to a later Send, so that a schedule that uses a frame after releasing
// it returns wrong bytes (and races with the rank that reused it).
func (l *fakeLink) Release(f Frame) {
	b := f.Buf
	for i := range min(len(b), 8) {
		b[i], b[len(b)-1-i] = 0xEE, 0xEE
	}
	if k := bits.Len(uint(cap(b))) - 1; k >= fakeBufMin && cap(b) == 1<<k {
		b = b[:cap(b)]
		fakeBufs[k].Put(&b)
	}
}

// Frame buffers of 2^fakeBufMin bytes or more come from pools by power of
// two and go back on Release, as the runtime's do: the race detector's run
// spends its time on fresh memory.
const fakeBufMin = 12

var fakeBufs [26]sync.Pool

// fakeBuf is a buffer of n bytes, its contents arbitrary.
func fakeBuf(n int) []byte {
	k := bits.Len(uint(n - 1))
	if n < 1<<fakeBufMin {
		return make([]byte, n)
	}
	if p, ok := fakeBufs[k].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return make([]byte, n, 1<<k)
}

func (l *fakeLink) Partners(ranks ...int) {
	for _, r := range ranks {
		if r >= 0 && r < l.net.n && r != l.rank {
			l.named[r] = true
		}
	}
}

// use records that the schedule sent to or took from rank r.
func (l *fakeLink) use(r int) {
	l.partners[r] = true
	if !l.named[r] {
		l.unnamed[r] = true
	}
}

func (l *fakeLink) Mismatch(format string, args ...any) error {
	l.mismatch = fmt.Sprintf(format, args...)
	l.net.end()
	return &mismatchError{l.mismatch}
}

// run runs one call on every rank of a new job at once: setup makes rank
// r's Call and may set up its Link. A rank that returns an error ends the
// job, so that the others stop waiting for it. After a call that every
// rank completed, every frame sent was taken and no rank changed data it
// had sent.
func run(t *testing.T, n int, setup func(l *fakeLink) Call) ([]*fakeLink, [][]byte, []error) {
	t.Helper()
	return runBy(t, n, Run, setup)
}

// runBy is run with the schedule s instead of the table's choice.
func runBy(t testing.TB, n int, s Schedule, setup func(l *fakeLink) Call) ([]*fakeLink, [][]byte, []error) {
	t.Helper()
	net := newFakeNet(t, n)
	defer net.end()
	links := make([]*fakeLink, n)
	res := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		links[r] = &fakeLink{net: net, rank: r, partners: make(map[int]bool), named: make(map[int]bool), unnamed: make(map[int]bool)}
		call := setup(links[r])
		links[r].kind = call.Kind
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[r], errs[r] = s(links[r], call)
			if errs[r] != nil {
				net.end()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return links, res, errs
		}
	}
	for _, l := range links {
		for _, s := range l.sent {
			if crc32.ChecksumIEEE(s.data) != s.sum {
				t.Errorf("rank %d changed data it sent to rank %d before the call returned", l.rank, s.to)
			}
		}
	}
	for pair, p := range net.pipes {
		if len(p) != 0 {
			t.Errorf("%d frames from rank %d to rank %d were never taken", len(p), pair[0], pair[1])
		}
	}
	return links, res, errs
}
