package runtime

import (
	"fmt"
	"math/rand"
	"testing"
)

// refMatcher is the matching rule written as plainly as it can be: every
// kept message in arrival order, every waiting receive in post order. An
// arriving message goes to the first waiting receive it fits; a receive
// takes the first kept message it fits.
type refMatcher struct {
	kept    []refMsg
	waiting []*recvOp
}

type refMsg struct {
	src int
	tag uint32
	id  int
}

func (r *refMatcher) arrive(src int, tag uint32, id int) *recvOp {
	for i, op := range r.waiting {
		if op.fits(0, src, tag) {
			r.waiting = append(r.waiting[:i], r.waiting[i+1:]...)
			return op
		}
	}
	r.kept = append(r.kept, refMsg{src, tag, id})
	return nil
}

func (r *refMatcher) post(op *recvOp) (int, bool) {
	for i, m := range r.kept {
		if op.fits(0, m.src, m.tag) {
			r.kept = append(r.kept[:i], r.kept[i+1:]...)
			return m.id, true
		}
	}
	r.waiting = append(r.waiting, op)
	return 0, false
}

// TestMatcherAgainstRule drives the matcher and the plain rule with the
// same random arrivals and receives (specific, ANY_SOURCE, ANY_TAG, both,
// and the runtime's own tags that ANY_TAG never takes) and wants the same
// pairing every time.
func TestMatcherAgainstRule(t *testing.T) {
	for seed := int64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewSource(seed))
		m := newMatcher(4)
		ref := &refMatcher{}
		ids := map[*recvOp]int{}    // what the matcher gave each op
		refIDs := map[*recvOp]int{} // what the rule gave
		pair := map[*recvOp]*recvOp{}
		tags := []uint32{1, 2, 3, sysTag | 1}
		for step := 0; step < 200; step++ {
			if rng.Intn(2) == 0 {
				src, tag := rng.Intn(3), tags[rng.Intn(len(tags))]
				id := step
				got := m.arrive(0, src, tag, message{data: []byte(fmt.Sprint(id))})
				want := ref.arrive(src, tag, id)
				if (len(got) == 1) != (want != nil) || (want != nil && pair[want] != got[0]) {
					t.Fatalf("seed %d step %d: arrival (%d, %d) completed %v, the rule says %v", seed, step, src, tag, got, want)
				}
				if want != nil {
					ids[got[0]] = id
					refIDs[want] = id
				}
				continue
			}
			op := &recvOp{src: rng.Intn(3), tag: tags[rng.Intn(3)], anySrc: rng.Intn(3) == 0, anyTag: rng.Intn(3) == 0}
			twin := *op
			pair[&twin] = op
			done := m.post(op)
			id, ok := ref.post(&twin)
			if done != ok {
				t.Fatalf("seed %d step %d: post %+v completed %v, the rule says %v", seed, step, twin, done, ok)
			}
			if done {
				var got int
				fmt.Sscan(string(op.data), &got)
				if got != id {
					t.Fatalf("seed %d step %d: post %+v took message %d, the rule says %d", seed, step, twin, got, id)
				}
			}
		}
		for twin, op := range pair {
			if id, ok := refIDs[twin]; ok && ids[op] != id {
				t.Fatalf("seed %d: a waiting receive got message %d, the rule says %d", seed, ids[op], id)
			}
		}
	}
}

// TestMatcherProbe: a probe sees a message without taking it, waits for
// one when there is none, and the runtime's own tags are no program's.
func TestMatcherProbe(t *testing.T) {
	m := newMatcher(3)
	p := &recvOp{anySrc: true, anyTag: true}
	if m.probe(p, true) {
		t.Fatal("probe of an empty matcher found a message")
	}
	if got := m.arrive(0, 1, sysTag|4, message{data: []byte("ckpt")}); len(got) != 0 {
		t.Fatalf("a runtime message completed %v, want nothing (ANY_TAG is program tags)", got)
	}
	got := m.arrive(0, 2, 9, message{data: []byte("hello")})
	if len(got) != 1 || got[0] != p || p.gotSrc != 2 || p.gotTag != 9 || p.gotLen != 5 {
		t.Fatalf("arrival completed %v (probe saw %d, %d, %d), want the probe with 2, 9, 5", got, p.gotSrc, p.gotTag, p.gotLen)
	}
	q := &recvOp{src: 2, tag: 9}
	if !m.probe(q, false) || q.gotLen != 5 {
		t.Fatal("iprobe after the probe does not see the message: the probe took it")
	}
	r := &recvOp{anySrc: true, tag: 9}
	if !m.post(r) || string(r.data) != "hello" || r.gotSrc != 2 {
		t.Fatalf("receive after the probes = %q from %d, want hello from 2", r.data, r.gotSrc)
	}
	w := &recvOp{anySrc: true, anyTag: true}
	m.probe(w, true)
	if !m.withdraw(w) || m.withdraw(w) {
		t.Fatal("withdraw of a waiting probe: want true once, then false")
	}
	a := &recvOp{anySrc: true, tag: 1}
	s := &recvOp{src: 1, tag: 1}
	m.post(a)
	m.post(s)
	if got := m.cancelFrom(1); len(got) != 1 || got[0] != s {
		t.Fatalf("cancelFrom(1) = %v, want only the receive naming rank 1", got)
	}
}
