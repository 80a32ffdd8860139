package runtime_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"sperli/codes"
	"sperli/runtime"
)

// TestAnySourceKeepsOrder: on 2, 3, 5 and 8 ranks every other rank sends
// rank 0 a numbered stream on two tags at once; rank 0 receives all of it
// from ANY_SOURCE and ANY_TAG, learns each message's source and tag, and
// sees every source's messages of one tag in the order sent.
func TestAnySourceKeepsOrder(t *testing.T) {
	for _, n := range []int{2, 3, 5, 8} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ctx := testCtx(t)
			comms := newFixture(t, n).initAll(ctx)
			const per = 50
			errs := each(comms, func(c *runtime.Comm) error {
				if c.Rank() != 0 {
					for i := 0; i < per; i++ {
						msg := binary.LittleEndian.AppendUint32([]byte{byte(c.Rank())}, uint32(i))
						if err := c.Send(ctx, 0, 10+i%2, msg); err != nil {
							return err
						}
					}
					return nil
				}
				last := map[[2]int]int{} // the last message number seen per source and tag
				count := map[int]int{}
				for k := 0; k < (n-1)*per; k++ {
					data, env, err := c.RecvFrom(ctx, runtime.AnySource, runtime.AnyTag)
					if err != nil {
						return err
					}
					if len(data) != 5 || int(data[0]) != env.Source || env.Length != 5 {
						return fmt.Errorf("message %x came with envelope %+v", data, env)
					}
					i := int(binary.LittleEndian.Uint32(data[1:]))
					if env.Tag != 10+i%2 {
						return fmt.Errorf("message %d of rank %d came with tag %d", i, env.Source, env.Tag)
					}
					key := [2]int{env.Source, env.Tag}
					if prev, ok := last[key]; ok && i != prev+2 {
						return fmt.Errorf("rank %d tag %d: message %d after %d", env.Source, env.Tag, i, prev)
					} else if !ok && i > 1 {
						return fmt.Errorf("rank %d tag %d: message %d first", env.Source, env.Tag, i)
					}
					last[key] = i
					count[env.Source]++
				}
				for r := 1; r < n; r++ {
					if count[r] != per {
						return fmt.Errorf("%d messages from rank %d, want %d", count[r], r, per)
					}
				}
				return nil
			})
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
	}
}

// TestProbeThenRecv: probe tells source, tag and length of a message and
// leaves it for the receive; iprobe answers at once.
func TestProbeThenRecv(t *testing.T) {
	ctx := testCtx(t)
	comms := newFixture(t, 3).initAll(ctx)
	if _, ok, err := comms[0].Iprobe(runtime.AnySource, runtime.AnyTag); ok || err != nil {
		t.Fatalf("Iprobe with nothing sent = %v, %v; want nothing", ok, err)
	}
	if err := comms[2].Send(ctx, 0, 7, []byte("seven")); err != nil {
		t.Fatal(err)
	}
	env, err := comms[0].Probe(ctx, runtime.AnySource, 7)
	if err != nil || env != (runtime.Envelope{Source: 2, Tag: 7, Length: 5}) {
		t.Fatalf("Probe = %+v, %v; want source 2, tag 7, length 5", env, err)
	}
	if env2, ok, err := comms[0].Iprobe(2, runtime.AnyTag); !ok || err != nil || env2 != env {
		t.Fatalf("Iprobe after Probe = %+v, %v, %v; want the same message", env2, ok, err)
	}
	got, err := comms[0].Recv(ctx, env.Source, env.Tag)
	if err != nil || string(got) != "seven" {
		t.Fatalf("Recv after Probe = %q, %v", got, err)
	}
	if _, ok, _ := comms[0].Iprobe(runtime.AnySource, runtime.AnyTag); ok {
		t.Fatal("Iprobe after the receive still sees the message")
	}
	for _, bad := range []struct{ src, tag int }{{-2, 0}, {3, 0}, {0, -2}} {
		_, _, err := comms[0].Iprobe(bad.src, bad.tag)
		wantCode(t, fmt.Sprintf("Iprobe(%d, %d)", bad.src, bad.tag), err, codes.OutOfRange)
	}
}

// TestSendrecvRing: every rank shifts 4 MiB to its right and receives from
// its left, 20 times: more than a window (mesh.Window, 64 MiB) on each
// link, with no receive posted before the call, and nothing deadlocks.
// (40 times took 33-46 s under the race detector, against the minute of
// testCtx.)
func TestSendrecvRing(t *testing.T) {
	ctx := testCtx(t)
	n := 3
	comms := newFixture(t, n).initAll(ctx)
	errs := each(comms, func(c *runtime.Comm) error {
		right, left := (c.Rank()+1)%n, (c.Rank()+n-1)%n
		for i := 0; i < 20; i++ {
			out := bytes.Repeat([]byte{byte(c.Rank() + i)}, 4<<20)
			got, env, err := c.Sendrecv(ctx, right, 3, out, runtime.AnySource, 3)
			if err != nil {
				return err
			}
			if env.Source != left || len(got) != 4<<20 || got[0] != byte(left+i) || got[len(got)-1] != byte(left+i) {
				return fmt.Errorf("shift %d: got %d bytes of %d from %+v, want rank %d's", i, len(got), got[0], env, left)
			}
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}
