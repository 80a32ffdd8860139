package elastic

import (
	"crypto/ed25519"
	"fmt"
	"testing"
)

// BenchmarkAgreement: one whole agreement after a loss (the coordinator's
// prepare, every promise, accept, every accepted, decide and the check)
// among n slots, messages handed over in order with no network: the
// engine's own processor time, most of it the coordinator's.
func BenchmarkAgreement(b *testing.B) {
	for _, n := range []int{1000, 4000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			cur := Initial(n, 1)
			// The runtime keeps its peers' keys (from their certificates).
			pubs := make([]ed25519.PublicKey, n+1)
			for x := range pubs {
				pubs[x] = testKey(x).Public().(ed25519.PublicKey)
			}
			keys := make([]Keys, n+1)
			for x := range keys {
				keys[x] = Keys{Own: testKey(x), Peer: func(s int) ed25519.PublicKey { return pubs[s] }, Domain: []byte{0}}
			}
			type msg struct {
				from, to int
				m        Msg
			}
			for b.Loop() {
				agr := make([]*Agreement, n+1)
				var q []msg
				for x := range agr {
					if x == n/2 {
						continue
					}
					agr[x] = NewAgreement(x, cur, keys[x])
				}
				for x, a := range agr {
					if a != nil {
						for _, o := range a.Start([]int{n / 2}) {
							q = append(q, msg{x, o.To, o.Msg})
						}
					}
				}
				for len(q) > 0 {
					e := q[0]
					q = q[1:]
					if a := agr[e.to]; a != nil {
						for _, o := range a.Receive(e.from, e.m) {
							q = append(q, msg{e.to, o.To, o.Msg})
						}
					}
				}
				if _, ok, err := agr[0].DecidedLayout(); !ok || err != nil {
					b.Fatalf("slot 0 did not decide: %v", err)
				}
			}
		})
	}
}
