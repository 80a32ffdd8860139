//go:build !sperli_nocount

package runtime

import (
	"testing"

	"sperli/wire"
)

// TestCountWait: a finished receive counts its wait, one message and its
// bytes; a receive not done counts its wait only; a collective wait goes
// to collectives and to its kind, a checkpoint's to checkpoints; sends
// count.
func TestCountWait(t *testing.T) {
	before := stats()
	done := &recvOp{data: []byte("12345"), done: make(chan struct{})}
	close(done.done)
	leaveWait(enterWait(recvWait{r: done}, 0, 1))
	leaveWait(enterWait(recvWait{r: &recvOp{done: make(chan struct{})}}, 0, 1))
	leaveWait(enterWait(collWait{k: 1, call: wire.Call{Kind: wire.CollBarrier}, from: 1}, 0, 1))
	leaveWait(enterWait(collWait{k: 2, call: wire.Call{Kind: wire.CollCkptBegin}, from: 1}, 0, 1))
	countSend(7)
	countColl(wire.CollBarrier)
	countColl(wire.CollCkptBegin)
	after := stats()
	if got := after.RecvMsgs - before.RecvMsgs; got != 1 {
		t.Errorf("%d messages received, want 1", got)
	}
	if got := after.RecvBytes - before.RecvBytes; got != 5 {
		t.Errorf("%d bytes received, want 5", got)
	}
	if after.SentMsgs-before.SentMsgs != 1 || after.SentBytes-before.SentBytes != 7 {
		t.Errorf("sent %d messages, %d bytes; want 1, 7", after.SentMsgs-before.SentMsgs, after.SentBytes-before.SentBytes)
	}
	if after.Collectives-before.Collectives != 1 {
		t.Errorf("%d collectives, want 1 (checkpoints aside)", after.Collectives-before.Collectives)
	}
	if after.RecvWaitMS < before.RecvWaitMS || after.CollWaitMS < before.CollWaitMS || after.CkptWaitMS < before.CkptWaitMS {
		t.Errorf("a wait went down: %+v then %+v", before, after)
	}
	if b, a := before.Coll["barrier"], after.Coll["barrier"]; a.Calls-b.Calls != 1 || a.WaitMS < b.WaitMS {
		t.Errorf("barrier: %+v then %+v, want one call more", b, a)
	}
	if _, ok := after.Coll["checkpoint"]; ok {
		t.Errorf("a checkpoint is counted as a kind of collective: %+v", after.Coll)
	}
	if after.PeakRSSKB <= 0 || after.WallMS < 0 {
		t.Errorf("peak RSS %d kB, wall %d ms", after.PeakRSSKB, after.WallMS)
	}
}

// TestCountCollFrames: a collective's frames count in the totals and in
// their kind, sent and taken apart; a checkpoint's in neither.
func TestCountCollFrames(t *testing.T) {
	countColl(wire.CollAllreduce) // a kind shows once called
	before := stats()
	countCollFrame(wire.CollAllreduce, true, 8)
	countCollFrame(wire.CollAllreduce, true, 16)
	countCollFrame(wire.CollAllreduce, false, 24)
	countCollFrame(wire.CollCkptBegin, true, 100)
	after := stats()
	if after.SentMsgs-before.SentMsgs != 2 || after.SentBytes-before.SentBytes != 24 || after.RecvMsgs-before.RecvMsgs != 1 || after.RecvBytes-before.RecvBytes != 24 {
		t.Errorf("totals: %+v then %+v, want 2 frames (24 bytes) sent and 1 (24 bytes) taken more", before, after)
	}
	b, a := before.Coll["allreduce"], after.Coll["allreduce"]
	if a.SentMsgs-b.SentMsgs != 2 || a.SentBytes-b.SentBytes != 24 || a.RecvMsgs-b.RecvMsgs != 1 || a.RecvBytes-b.RecvBytes != 24 {
		t.Errorf("allreduce: %+v then %+v", b, a)
	}
}

// BenchmarkWaitHooks is what the waiting record and the counters add to a
// receive that waits (enterWait and leaveWait around it), to one whose
// message was there already, and to a send (docs/benchmarks.md compares
// them with a round trip).
func BenchmarkWaitHooks(b *testing.B) {
	b.Run("waits", func(b *testing.B) {
		r := &recvOp{data: make([]byte, 64), done: make(chan struct{})}
		b.ReportAllocs()
		for b.Loop() {
			leaveWait(enterWait(recvWait{r: r}, 0, 1))
		}
	})
	b.Run("matched", func(b *testing.B) {
		r := &recvOp{data: make([]byte, 64), done: make(chan struct{})}
		close(r.done)
		b.ReportAllocs()
		for b.Loop() {
			leaveWait(enterWait(recvWait{r: r}, 0, 1))
		}
	})
	b.Run("send", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			countSend(64)
		}
	})
}
