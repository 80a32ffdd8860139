package runtime

import (
	"bytes"
	"strings"
	"testing"

	"sperli/record"
	"sperli/wire"
)

// TestWaitingRecord: a "waiting" line on the control channel is answered
// with the call the process waits in, or "" once it left it; other and
// over-long lines are ignored.
func TestWaitingRecord(t *testing.T) {
	w := enterWait(recvWait{r: &recvOp{src: 1, tag: 7}}, 0, 1)
	var out bytes.Buffer
	readControl(strings.NewReader("hello\n"+strings.Repeat("waiting", 100)+"\nwaiting\n"), &out, nil)
	leaveWait(w)
	readControl(strings.NewReader("waiting"), &out, nil) // no line end: the channel's end
	c := enterWait(collWait{k: 3, call: wire.Call{Kind: wire.CollBarrier}, from: 2}, 0, 2)
	readControl(strings.NewReader("waiting\n"), &out, nil)
	leaveWait(c)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	want := []string{"recv(source 1, tag 7)", "", "barrier (collective 3, waiting for rank 2)"}
	wantFor := []int{1, -1, 2}
	if len(lines) != len(want) {
		t.Fatalf("%d records, want %d: %q", len(lines), len(want), out.String())
	}
	for i, l := range lines {
		rec, ok := record.ParseWaiting(l)
		if !ok || rec.Call != want[i] || rec.MS < 0 {
			t.Errorf("record %d: %q (%v), want call %q", i, l, ok, want[i])
		}
		if wantRank := min(0, wantFor[i]); rec.For != wantFor[i] || rec.Rank != wantRank {
			t.Errorf("record %d: rank %d for %d, want rank %d for %d", i, rec.Rank, rec.For, wantRank, wantFor[i])
		}
	}
	if call, _ := currentWait(); call != "" {
		t.Errorf("after leaving every wait, currentWait() = %q", call)
	}
	// "crashed SLOT" lines give their slots, in order; malformed ones,
	// negative or past any job's slots, are ignored.
	crashed := make(chan int, 8)
	readControl(strings.NewReader("crashed 3\ncrashed\ncrashed -1\ncrashed x\ncrashed 1048577\n crashed 0 \ncrashed 9 9\n"), &out, crashed)
	close(crashed)
	var got []int
	for s := range crashed {
		got = append(got, s)
	}
	if len(got) != 2 || got[0] != 3 || got[1] != 0 {
		t.Errorf("crashed slots %v, want [3 0]", got)
	}
}

// TestWaitingForAgreement: a wait in agree names the agreement, not a rank
// -1; an any-source receive without its communicator names no ranks.
func TestWaitingForAgreement(t *testing.T) {
	if got, want := (collWait{k: 2, call: wire.Call{Kind: wire.CollAgree}, from: -1}).String(), "agree (call 2, waiting for the agreement)"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if got, want := (recvWait{r: &recvOp{src: wire.AnySource, anySrc: true, anyTag: true}}).String(), "recv(any source, any tag)"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}
