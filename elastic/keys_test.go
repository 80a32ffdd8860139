package elastic

import (
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
)

// testKey is slot s's key in the engines' tests: derived from s, so that
// every test's slots sign alike.
func testKey(s int) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte(fmt.Sprintf("elastic test slot %d", s)))
	return ed25519.NewKeyFromSeed(seed[:])
}

// testKeys is slot self's Keys in the engines' tests.
func testKeys(self int) Keys {
	return Keys{Own: testKey(self), Peer: func(s int) ed25519.PublicKey { return testKey(s).Public().(ed25519.PublicKey) }, Domain: []byte{0}}
}
