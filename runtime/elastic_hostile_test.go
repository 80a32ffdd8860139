package runtime_test

import (
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"sperli/codes"
	"sperli/elastic"
	"sperli/runtime"
	"sperli/wire"
)

// Frame types of docs/protocol.md §2.3 added for elastic recovery.
const (
	tAgree  = 11
	tRevoke = 12
	tLost   = 13
	tRelay  = 15
)

// TestHostileAgreeFrames: agreement messages that an honest slot never
// sends — cut short, of an unknown kind, of an unknown purpose, naming a
// slot outside the job — end the job with H1627 naming the liar
// (protocol.md §12.4), in a job with spares and in one without.
func TestHostileAgreeFrames(t *testing.T) {
	msgOf := func(kind byte, gen byte, ballot uint64, failed ...uint16) []byte {
		b := []byte{kind, 0, 0, 0, 0, gen} // kind, flags, instance
		b = binary.BigEndian.AppendUint64(b, ballot)
		b = append(b, make([]byte, 8)...) // accepted ballot
		b = binary.BigEndian.AppendUint32(b, uint32(len(failed)))
		for _, s := range failed {
			b = binary.BigEndian.AppendUint32(b, uint32(s))
		}
		return b
	}
	msg := func(kind byte, failed ...uint16) []byte { return msgOf(kind, 1, 0, failed...) }
	for _, tc := range []struct {
		name    string
		payload []byte
		who     string // named in the error; "slot 1" when ""
	}{
		{"cut short", []byte{0, 1, 0}, ""},
		{"unknown kind", append([]byte{0}, msg(9)...), ""},
		{"slot outside the job", append([]byte{0}, msg(1, 40)...), ""},
		{"unknown purpose", append([]byte{7}, msg(1)...), "rank 1"},
		{"agree of comm, cut short", []byte{1, 0, 0, 0, 0, 0}, "rank 1"},
		{"agree of comm, garbage", append([]byte{1, 0, 0, 0, 0, 0, 0, 0, 1}, 0xff, 0xff), "rank 1"},
		// With nothing lost, a prepare of a ballot no honest slot reaches
		// (it would stall every honest coordinator after it), and one
		// from a slot that names nobody below it lost.
		{"huge ballot", append([]byte{0}, msgOf(1, 1, 1<<62+1, 0)...), ""},
		{"prepare of a slot not the coordinator", append([]byte{0}, msgOf(1, 1, 2*2+1)...), ""},
		{"report naming nobody lost", append([]byte{0}, msgOf(6, 1, 0)...), ""},
		// Two generations ahead needs this slot's own promise.
		{"a generation far ahead", append([]byte{0}, msgOf(6, 3, 0)...), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			comms := newFixture(t, 2).initAll(ctx)
			newHostile(t, comms[1]).write(0, rawFrame{Type: tAgree, Payload: tc.payload})
			if tc.who == "" {
				tc.who = "slot 1"
			}
			wantViolationBy(t, ctx, comms[0], comms[1], tc.who)
		})
	}
}

// TestAgreeFlood: agreement messages for the generation after the next
// are kept for it, but no more than an honest slot sends: a flood of them
// ends the job with H1627 naming the sender instead of crowding out the
// events (a loss) that come after it.
func TestAgreeFlood(t *testing.T) {
	ctx := testCtx(t)
	comms := newFixture(t, 2).initAll(ctx)
	report := []byte{0, 6, 0, 0, 0, 0, 2} // purpose layout, a report for generation 2
	report = append(report, make([]byte, 18)...)
	flood := make([]rawFrame, 200)
	for i := range flood {
		flood[i] = rawFrame{Type: tAgree, Payload: report}
	}
	newHostile(t, comms[1]).write(0, flood...)
	wantViolationBy(t, ctx, comms[0], comms[1], "slot 1")
}

// TestClaimedLossOfALiveSlot: slot 1 tells slot 0 that slot 2 is lost (a
// report for generation 1) while slot 2 lives and heartbeats. Slot 0
// believes a loss only when it sees it itself: it neither abandons its
// generation nor evicts slot 2, and once slot 2 has stayed heard from past
// twice its silence limit, it names slot 1 (H1627).
func TestClaimedLossOfALiveSlot(t *testing.T) {
	ctx := testCtx(t)
	f := newFixture(t, 4)
	f.spec.Size, f.spec.Spares, f.spec.SilenceMS = 3, 1, 200
	jobs := make([]*runtime.Job, 4)
	for s := range jobs {
		jobs[s] = f.job(s)
	}
	comms := initSlots(t, ctx, jobs)
	report := []byte{0, 6, 0, 0, 0, 0, 1} // purpose layout, a report for generation 1
	report = append(report, make([]byte, 16)...)
	report = append(report, 0, 0, 0, 1, 0, 0, 0, 2) // failed: slot 2 (a u32 count, u32 slots)
	newHostile(t, comms[1]).write(0, rawFrame{Type: tAgree, Payload: report})
	_, err := comms[0].Recv(ctx, 1, 99)
	wantCode(t, "slot 0 after slot 1's claim", err, codes.ProtocolViolation)
	if !strings.Contains(err.Error(), "protocol violation by slot 1: it named slot 2 lost") {
		t.Fatalf("error %q does not name slot 1 for its claim about slot 2", err)
	}
	if comms[0].Recovering() {
		t.Fatal("slot 0 abandoned its generation for the claim")
	}
}

// TestLiarMatrix: one authenticated slot lies in the agreement of a job
// of 4 ranks and 2 spares (slots 0..5; the first coordinator's ballot is
// 6). Each lie ends the job on every honest slot that is left — with
// H1627 naming the liar, or H1612 quoting it from the slot that saw the
// lie first — and no honest slot enters a generation: no fork, no
// stall, the liar named. The liar's own engine is muted where it takes
// part in the agreement, so that its lies are all it says there.
func TestLiarMatrix(t *testing.T) {
	cur := elastic.Initial(4, 2)
	val := func(l elastic.Layout) []byte { b, _ := l.MarshalBinary(); return b }
	one, _ := cur.Next([]int{2})
	both, _ := cur.Next([]int{2, 3})
	nothingLost := elastic.FromRanks(1, 6, []int{0, 1, 2, 3}, []int{4, 5}, []int{})
	skipped := one
	skipped.Gen = 7
	jumped := elastic.FromRanks(1, 6, []int{0, 1, 5, 3}, []int{4}, []int{2}) // spare 5 over 4
	type lie struct {
		to int
		m  func(prove func(origin int, b uint64, v []byte) *elastic.Proof) elastic.Msg
	}
	decide := func(l elastic.Layout, origin int, b uint64, failed ...int) func(func(int, uint64, []byte) *elastic.Proof) elastic.Msg {
		return func(prove func(int, uint64, []byte) *elastic.Proof) elastic.Msg {
			return elastic.Msg{Kind: elastic.Decide, Gen: 1, Value: val(l), Failed: failed, Proof: prove(origin, b, val(l))}
		}
	}
	for _, tc := range []struct {
		name  string
		liar  int
		crash int   // a slot lost before the lies (-1: none; no recovery runs)
		then  int   // a slot lost after the first lies (-1: none)
		first []lie // before then's loss
		lies  []lie
		says  string
	}{
		{name: "fork: two layouts to two sides", liar: 0, crash: 2, then: 3,
			first: []lie{{1, prepare}, {3, prepare}, {4, prepare}, {5, prepare}},
			lies:  []lie{{1, decide(one, 0, 6, 2)}, {4, decide(both, 0, 6, 2, 3)}, {5, decide(both, 0, 6, 2, 3)}},
			says:  "decided two different values"},
		{name: "decide with nothing lost", liar: 3, crash: -1, then: -1,
			lies: []lie{{0, decide(nothingLost, 3, 9)}}, says: "names no lost rank"},
		{name: "decide of generation 7", liar: 4, crash: 2, then: -1,
			lies: []lie{{1, decide(skipped, 0, 6, 2)}}, says: "generation 7"},
		{name: "a spare promoted over a lower one", liar: 5, crash: 2, then: -1,
			lies: []lie{{1, decide(jumped, 5, 11, 2)}}, says: "does not make"},
		{name: "decide signed in another's name", liar: 3, crash: 2, then: -1,
			lies: []lie{{1, func(prove func(int, uint64, []byte) *elastic.Proof) elastic.Msg {
				p := prove(3, 6, val(one))
				p.Origin = 0
				return elastic.Msg{Kind: elastic.Decide, Gen: 1, Value: val(one), Failed: []int{2}, Proof: p}
			}}}, says: "not slot 0's signature"},
		{name: "decide by a slot that is not the coordinator", liar: 3, crash: 2, then: -1,
			lies: []lie{{1, decide(one, 3, 9, 2)}}, says: "which it does not name lost, is the coordinator"},
		{name: "promise with an accepted ballot far ahead", liar: 1, crash: 2, then: -1,
			lies: []lie{{0, func(func(int, uint64, []byte) *elastic.Proof) elastic.Msg {
				return elastic.Msg{Kind: elastic.Promise, Gen: 1, Ballot: 6, AccBallot: 1 << 40, Value: val(one), Input: []byte{}, Failed: []int{2}}
			}}}, says: "round"},
		{name: "report naming a live rank lost", liar: 1, crash: -1, then: -1,
			lies: []lie{{0, func(func(int, uint64, []byte) *elastic.Proof) elastic.Msg {
				return elastic.Msg{Kind: elastic.Report, Gen: 1, Failed: []int{2}}
			}}}, says: "it named slot 2 lost"},
		{name: "a silent coordinator", liar: 0, crash: 2, then: -1, says: "it sent no prepare"},
		{name: "a silent acceptor", liar: 3, crash: 2, then: -1, says: "it sent no promise"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			comms, jobs := spareJob(t, ctx, tc.liar)
			key := ed25519.NewKeyFromSeed(jobs[tc.liar].Key)
			prove := func(origin int, b uint64, v []byte) *elastic.Proof {
				return elastic.Keys{Own: key, Domain: []byte{0}}.Prove(origin, 1, b, v) // the layout agreement's domain (protocol.md §12.4)
			}
			liar := newHostile(t, comms[tc.liar])
			send := func(lies []lie) {
				for _, l := range lies {
					b, err := l.m(prove).MarshalBinary()
					if err != nil {
						t.Fatal(err)
					}
					liar.write(l.to, rawFrame{Type: tAgree, Payload: append([]byte{0}, b...)})
				}
			}
			lost := map[int]bool{}
			if tc.crash >= 0 {
				runtime.CrashForTest(comms[tc.crash])
				lost[tc.crash] = true
				send(tc.first)
				// The ranks begin; the spares too once an agreement
				// message came (the liar's prepare, or the coordinator's
				// when it is not the liar).
				var wait []int
				for x := range comms {
					spareLeftOut := x >= 4 && tc.first == nil && tc.liar == 0
					if !lost[x] && !spareLeftOut {
						wait = append(wait, x)
					}
				}
				waitRecovering(t, ctx, comms, wait...)
			}
			if tc.then >= 0 {
				runtime.CrashForTest(comms[tc.then])
				lost[tc.then] = true
			}
			send(tc.lies)
			for x, c := range comms {
				if lost[x] || x == tc.liar {
					continue
				}
				nc, err := c.Next(ctx)
				if e := codes.As(err); e == nil || (e.Code != codes.ProtocolViolation && e.Code != codes.JobEnded) {
					t.Fatalf("slot %d: %v, want H1627 or H1612", x, err)
				}
				if want := fmt.Sprintf("protocol violation by slot %d", tc.liar); !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), tc.says) {
					t.Fatalf("slot %d: %q does not say %q of slot %d", x, err, tc.says, tc.liar)
				}
				if nc.Generation() != 0 {
					t.Fatalf("slot %d entered generation %d", x, nc.Generation())
				}
			}
		})
	}
}

// prepare is the liar's prepare of the first round, naming slot 2 lost:
// it brings the spares into the agreement (they follow the first
// agreement message while a rank lives).
func prepare(func(int, uint64, []byte) *elastic.Proof) elastic.Msg {
	return elastic.Msg{Kind: elastic.Prepare, Gen: 1, Ballot: 6, Failed: []int{2}}
}

// spareJob joins a job of 4 ranks and 2 spares with a silence limit of
// 200 ms; slot mute says nothing in its agreements (the liar's engine).
func spareJob(t *testing.T, ctx context.Context, mute int) ([]*runtime.Comm, []*runtime.Job) {
	f := newFixture(t, 6)
	f.spec.Size, f.spec.Spares, f.spec.SilenceMS = 4, 2, 200
	jobs := make([]*runtime.Job, 6)
	for s := range jobs {
		jobs[s] = f.job(s)
	}
	jobs[mute].Failures = fmt.Sprintf("0:%d@mute-agree-1", mute)
	return initSlots(t, ctx, jobs), jobs
}

// initSlots joins the slots of jobs (ranks and spares) concurrently.
func initSlots(t *testing.T, ctx context.Context, jobs []*runtime.Job) []*runtime.Comm {
	t.Helper()
	comms := make([]*runtime.Comm, len(jobs))
	var wg sync.WaitGroup
	for s := range comms {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			var err error
			if comms[s], err = runtime.Init(ctx, jobs[s]); err != nil {
				t.Errorf("Init(slot %d) = %v", s, err)
			}
		}(s)
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Cleanup(func() {
		for _, c := range comms {
			c.Close()
		}
	})
	return comms
}

// waitRecovering waits until each of the slots has abandoned its
// generation for a recovery.
func waitRecovering(t *testing.T, ctx context.Context, comms []*runtime.Comm, slots ...int) {
	t.Helper()
	for _, x := range slots {
		for !comms[x].Recovering() {
			select {
			case <-ctx.Done():
				t.Fatalf("slot %d never began the recovery", x)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
}

// TestMalformedFrameBetweenGenerations: a frame refused by its reader
// (here one that says it is from another slot) while the slots recover
// ends the job with its code. It was lost: the generation's communicator
// had ended already, so the refusal only closed the connection, and the
// agreement went on as if the sender were lost.
func TestMalformedFrameBetweenGenerations(t *testing.T) {
	ctx := testCtx(t)
	comms, _ := spareJob(t, ctx, 4)
	runtime.CrashForTest(comms[2])
	waitRecovering(t, ctx, comms, 0, 1, 3)
	newHostile(t, comms[4]).write(1, rawFrame{Type: tData, Tag: 99, Source: 3, Payload: []byte("x")})
	for _, x := range []int{0, 1, 3, 5} {
		_, err := comms[x].Next(ctx)
		e := codes.As(err)
		if e == nil || (e.Code != codes.FrameMalformed && (e.Cause == nil || e.Cause.Code != codes.FrameMalformed)) {
			t.Fatalf("slot %d: %v, want the job ended by H1609", x, err)
		}
		if !strings.Contains(err.Error(), "says it is from rank 3, the peer is rank 4") {
			t.Fatalf("slot %d: %q does not say which frame was refused", x, err)
		}
	}
}

// TestOneLiarCannotSendASlotAway: a lost frame naming its receiver says
// the others declared it lost; one slot's word is a claim, not proof
// (protocol.md §6.2). Slot 1 tells live slot 2 so, in a job whose program
// manages its losses, and slot 2 does not leave: the liar is named
// (H1627) — at its next frame when it goes on talking, or twice the
// silence limit after it closed its link when no other slot confirmed
// the news. When two slots close their links with that news, slot 2
// believes it and ends with H1611.
func TestOneLiarCannotSendASlotAway(t *testing.T) {
	lie := rawFrame{Type: tLost, Payload: wire.AppendReason(nil, wire.Reason{Code: codes.PeerLost, Cause: codes.CauseLost, Rank: 2, Msg: "a lie"})}
	start := func(t *testing.T, ctx context.Context) []*runtime.Comm {
		f := newFixture(t, 4)
		f.spec.SilenceMS = 200
		comms := f.initAll(ctx)
		for _, c := range comms {
			if err := c.SetOnLoss(runtime.LossReturn); err != nil {
				t.Fatal(err)
			}
		}
		return comms
	}
	t.Run("and goes on talking", func(t *testing.T) {
		ctx := testCtx(t)
		comms := start(t, ctx)
		newHostile(t, comms[1]).write(2, lie, rawFrame{Type: tHeartbeat})
		wantViolationBy(t, ctx, comms[2], comms[1], "slot 1: it told slot 2 that the others had declared it lost, then sent a heartbeat frame")
	})
	// The liar closes its link after its lie. A slot that stalled may be
	// one the others left, and believes one slot that says so; but only
	// soon after its stall, or a liar could send away any slot that ever
	// stalled.
	named := "protocol violation by slot 1: it told slot 2 that the others had declared it lost and closed its link"
	for _, tc := range []struct {
		name    string
		stalled time.Duration // how long ago slot 2 stalled; 0 never
		code    codes.Code
		says    string
	}{
		{"and closes its link", 0, codes.ProtocolViolation, named},
		{"to a slot that stalled long ago", time.Hour, codes.ProtocolViolation, named},
		{"to a slot that just stalled", time.Nanosecond, codes.PeerLost, "declared lost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			comms := start(t, ctx)
			if tc.stalled > 0 {
				runtime.SetStalledForTest(comms[2], 500, time.Now().Add(-tc.stalled))
			}
			newHostile(t, comms[1]).write(2, lie)
			runtime.CloseLinkForTest(comms[1], 2)
			_, err := comms[2].Recv(ctx, 0, 99)
			wantCode(t, "slot 2", err, tc.code)
			if !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("slot 2's error %q does not say %q", err, tc.says)
			}
			if f := comms[2].Failed(); tc.code == codes.ProtocolViolation && len(f) != 0 {
				t.Fatalf("slot 2 took slots %v for lost", f)
			}
		})
	}
	t.Run("told by two", func(t *testing.T) {
		ctx := testCtx(t)
		comms := start(t, ctx)
		runtime.DropForTest(comms[1], 2)
		runtime.DropForTest(comms[3], 2)
		_, err := comms[2].Recv(ctx, 0, 99)
		wantCode(t, "slot 2", err, codes.PeerLost)
		if !strings.Contains(err.Error(), "slot 2 was declared lost by the others") {
			t.Fatalf("slot 2's error %q does not say it was declared lost", err)
		}
	})
}

// TestHostileRelays: a relay frame carries another slot's agreement
// message, signed by it, with its certificate (protocol.md §12.7). One
// that does not check — signed by the relay itself in another's name, a
// certificate of another slot or none, altered on the way, cut short, a
// purpose no slot relays — ends the job with H1627 naming the link it
// came on: the relay can neither forge nor alter a message.
func TestHostileRelays(t *testing.T) {
	report := append([]byte{0, 6, 0, 0, 0, 0, 1}, make([]byte, 18)...) // layout, a report for generation 1, nothing failed
	relay := func(origin int, cert []byte, key ed25519.PrivateKey, inner []byte) []byte {
		r := wire.Relayed{Origin: origin, Dest: 0, Hops: 8, Cert: cert, Inner: inner}
		r.Sig = ed25519.Sign(key, r.Signed())
		return wire.AppendRelayed(nil, r)
	}
	type slotKeys struct {
		cert [3][]byte
		key  [3]ed25519.PrivateKey
	}
	for _, tc := range []struct {
		name string
		make func(k slotKeys) []byte
		says string
	}{
		{"signed by the relay in slot 2's name", func(k slotKeys) []byte { return relay(2, k.cert[2], k.key[1], report) },
			"slot 1: it relayed a frame from slot 2 to slot 0 that is not slot 2's signature"},
		{"slot 2's message with slot 1's certificate", func(k slotKeys) []byte { return relay(2, k.cert[1], k.key[1], report) },
			"slot 1: it relayed a frame from slot 2"}, // (slot 0, linked to 2, knows its key: not its signature)
		{"a certificate that is not one", func(k slotKeys) []byte { return relay(2, []byte("not a certificate"), k.key[1], report) },
			"slot 1: it relayed a frame from slot 2"},
		{"a purpose no slot relays", func(k slotKeys) []byte { return relay(1, k.cert[1], k.key[1], append([]byte{1}, report[1:]...)) },
			"slot 1: it relayed a frame from slot 1 of purpose 1"},
		{"altered on the way", func(k slotKeys) []byte {
			b := relay(2, k.cert[2], k.key[2], report)
			b[len(b)-1] ^= 1
			return b
		}, "slot 1: it relayed a frame from slot 2 to slot 0 that is not slot 2's signature"},
		{"cut short", func(k slotKeys) []byte { return relay(2, k.cert[2], k.key[2], report)[:90] }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			f := newFixture(t, 3)
			var k slotKeys
			for s := range 3 {
				j := f.job(s)
				k.cert[s], k.key[s] = j.Cert, ed25519.NewKeyFromSeed(j.Key)
			}
			comms := f.initAll(ctx)
			newHostile(t, comms[1]).write(0, rawFrame{Type: tRelay, Payload: tc.make(k)})
			if tc.says == "" {
				_, err := comms[0].Recv(ctx, 1, 99)
				wantCode(t, "slot 0 after a relay frame cut short", err, codes.FrameMalformed)
				if !strings.Contains(err.Error(), "relay of 90 bytes with a certificate of") {
					t.Fatalf("error %q does not say what was wrong", err)
				}
				return
			}
			wantViolationBy(t, ctx, comms[0], comms[1], tc.says)
		})
	}
}
