package runtime

import (
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"

	"sperli/codes"
	"sperli/pki"
	"sperli/topo"
	"sperli/wire"
)

// Relayed agreement messages (SPEC §18, docs/protocol.md §12.7). The
// coordinator of an agreement talks to every live slot; in a large job
// it would need a link to each. Above relayAbove slots, a message of the
// recovery's agreements for a slot this one has no link to goes over the
// healed tree instead (topo.NextHop), in a relay frame that its origin
// signs and sends its certificate with: each slot on the way checks the
// certificate (to the job's CA) and the signature before it passes the
// frame on or takes it, so that a frame that does not check names the
// link it came on (H1627), and a slot that relays cannot forge, alter or
// redirect one. A relay may drop or repeat frames: the agreement takes
// loss (retries) and repetition (a repeated frame is dropped here).

// relayAbove is the job size above which agreement messages to slots
// without a link are relayed; a variable so that a test can relay in a
// small job.
var relayAbove = 64

// maxRelaySeen bounds the relayed frames this slot remembers to drop
// repeats (passed on or taken; a slot near the root of 100,000 passes on
// some tens of thousands in a recovery); past it the memory starts again.
const maxRelaySeen = 1 << 17

// relayHops bounds a relayed frame's path: twice the tree's depth at the
// largest job, with room.
const relayHops = 32

// sendAgree sends an agreement payload (purpose and message) to slot
// to: on its link when there is one or the job is small, else relayed.
func (l *links) sendAgree(to int, payload []byte) {
	if p := l.peer(to); l.slots <= relayAbove || (p != nil && p.Attached() && !p.Gone()) {
		if p = l.link(to); p != nil && !p.Gone() {
			p.Control(wire.Agree, payload)
			p.ReadSoon() // its answer: the reader goroutine must not wait out its grace (runtime/mesh)
		}
		return
	}
	if l.hs == nil || len(l.hs.cert.Certificate) == 0 {
		return
	}
	r := wire.Relayed{Origin: l.self, Dest: to, Seq: uint64(l.relaySeq.Add(1)), Hops: relayHops, Cert: l.hs.cert.Certificate[0], Inner: payload}
	r.Sig = ed25519.Sign(l.own, r.Signed())
	l.relayOn(r)
}

// relayOn passes r one hop on toward its destination.
func (l *links) relayOn(r wire.Relayed) {
	next := topo.NextHop(l.slots, l.self, r.Dest, l.knownLost)
	if next < 0 {
		return // its destination is lost
	}
	p := l.link(next)
	if p == nil || p.Gone() {
		return // the hop is lost: the tree heals, the agreement retries
	}
	l.relayed.Add(1)
	p.Control(wire.Relay, wire.AppendRelayed(nil, r))
	p.ReadSoon()
}

// relayIn takes a relay frame from slot from (its reader goroutine).
func (l *links) relayIn(from int, payload []byte) error {
	r, err := wire.DecodeRelayed(payload, l.slots)
	if err != nil {
		return err
	}
	if r.Origin == l.self || r.Inner[0] != agreeLayout && r.Inner[0] != agreeRegroup || l.rec == nil {
		return slotViolation(from, "it relayed a frame from slot %d of purpose %d, which no slot relays here", r.Origin, r.Inner[0])
	}
	key, err := l.relayKey(r.Origin, r.Cert)
	if err != nil {
		return slotViolation(from, "it relayed a frame from slot %d whose certificate does not check: %v", r.Origin, err)
	}
	if !ed25519.Verify(key, r.Signed(), r.Sig) {
		return slotViolation(from, "it relayed a frame from slot %d to slot %d that is not slot %d's signature", r.Origin, r.Dest, r.Origin)
	}
	sum := sha256.Sum256(r.Sig)
	l.relayMu.Lock()
	_, again := l.relaySeen[sum]
	if !again {
		if l.relaySeen == nil || len(l.relaySeen) >= maxRelaySeen {
			l.relaySeen = map[[32]byte]struct{}{}
		}
		l.relaySeen[sum] = struct{}{}
	}
	l.relayMu.Unlock()
	if again {
		return nil // a repeat is passed on and taken once: what a slot queues is bounded by what honest slots sent
	}
	if r.Dest != l.self {
		if r.Hops == 0 {
			return nil // a path longer than any tree's: the tree changed under it
		}
		r.Hops--
		l.relayOn(r)
		return nil
	}
	if l.knownLost(r.Origin) {
		return nil
	}
	return l.rec.message(r.Origin, r.Inner)
}

// relayKey is slot's key, from its link or, checked to the job's CA,
// from the certificate cert it sent along.
func (l *links) relayKey(slot int, cert []byte) (ed25519.PublicKey, error) {
	if k := l.keyOf(slot); len(k) == ed25519.PublicKeySize {
		return k, nil
	}
	leaf, err := x509.ParseCertificate(cert)
	if err != nil {
		return nil, err
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: l.hs.pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, err
	}
	job, rank, err := pki.CertIdentity(leaf)
	if err != nil {
		return nil, err
	}
	if job != l.hs.j.ID || rank != slot {
		return nil, codes.New(codes.CertRefused, "the certificate is for job %s slot %d", job, rank)
	}
	k, ok := leaf.PublicKey.(ed25519.PublicKey)
	if !ok {
		return nil, codes.New(codes.CertRefused, "the certificate's key is not Ed25519")
	}
	l.pmu.Lock()
	if _, ok := l.keys[slot]; !ok {
		l.keys[slot] = k
	}
	l.pmu.Unlock()
	return k, nil
}
