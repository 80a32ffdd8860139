// Package pki holds the cryptography of a Sperli job (SPEC §4): the job's
// Ed25519 certificate authority and the rank certificates it issues, the
// composite ML-DSA-44 + Ed25519 job key, and the join tokens signed with it.
//
// Nothing here does I/O, reads a file or starts a goroutine. Randomness and
// the clock come from a Config (or an argument), so tests can fix both.
// Every refusal is a *codes.Error whose message starts with its code and says
// what was got and what was wanted; no message ever holds key or token bytes.
//
// # Usage
//
// The launcher makes a job's identity once:
//
//	ca, err := pki.NewCA(job, pki.Config{})
//	pub, priv, err := pki.GenerateJobKey(nil)
//	certDER, certKey, err := ca.Issue(job, rank, host, time.Now().Add(24*time.Hour))
//	tok, err := pki.Token{Job: job, Rank: rank, Size: size, Incarnation: inc,
//		Host: host, Expires: time.Now().Add(5 * time.Minute)}.Sign(priv)
//
// Each rank builds its TLS pools from the CA certificate. On a connection
// where it expects rank peer, it checks that the peer's verified certificate
// names that job and rank, then checks the token in the peer's hello:
//
//	pool, _, err := pki.Pool(ca.CertDER)
//	certJob, certRank, err := pki.CertIdentity(state.PeerCertificates[0])
//	t, err := pki.VerifyToken(tok, pub, pki.Expect{Job: job, Rank: peer,
//		Size: size, Incarnation: inc, Host: hostTable[peer], Now: time.Now()})
//
// Rank 0 signs COMMITs with priv.Sign(pki.DomainCommit, body); every rank
// checks them with pub.Verify(pki.DomainCommit, body, sig).
//
// The byte layouts (composite signature, key encodings, token, certificate
// profile) are in docs/protocol.md.
package pki
