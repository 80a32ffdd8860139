package launch

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"sperli/pki"
	"sperli/runtime"
)

// Identity is what stays the same across the restarts of one job: its id,
// its CA and its composite job key (SPEC §4.1). It lives in memory; only
// `sperli job make` writes it out, where it is told to.
type Identity struct {
	ID      string
	CA      *pki.CA
	JobPub  *pki.PublicKey
	JobPriv *pki.PrivateKey
	// fixed, for a job directory (LoadJobDir), is every rank's
	// certificate and key: there is no CA key to issue new ones.
	fixed []fixedCert
}

// NewIdentity makes a fresh job identity.
func NewIdentity() (*Identity, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	id := hex.EncodeToString(b[:])
	ca, err := pki.NewCA(id, pki.Config{})
	if err != nil {
		return nil, fmt.Errorf("making the job CA: %w", err)
	}
	pub, priv, err := pki.GenerateJobKey(nil)
	if err != nil {
		return nil, fmt.Errorf("making the job key: %w", err)
	}
	return &Identity{ID: id, CA: ca, JobPub: pub, JobPriv: priv}, nil
}

// Spec says what one incarnation of a job looks like.
type Spec struct {
	Size          int
	Spares        int // spare slots after the ranks (SPEC §10)
	Incarnation   uint32
	Hosts         []runtime.Host // one per slot
	SilenceMS     int
	JoinMS        int
	Launched      bool
	CheckpointDir string
	Failures      string
	Trace         bool      // --trace: the ranks write trace records
	Expires       time.Time // token expiry
}

// Describe makes rank's job description: a certificate for its host, a
// token, and the job secret for rank 0.
func (id *Identity) Describe(s Spec, rank int) (*runtime.Job, error) {
	host := s.Hosts[rank].Host
	var certDER, seed []byte
	if id.fixed != nil {
		f := id.fixed[rank]
		if f.host != host {
			return nil, fmt.Errorf("rank %d must run on %s, the host of its certificate (the job directory has no CA key to issue one for %s)", rank, f.host, host)
		}
		certDER, seed = f.cert, f.key
	} else {
		der, key, err := id.CA.Issue(id.ID, rank, host, s.Expires.Add(24*time.Hour))
		if err != nil {
			return nil, fmt.Errorf("issuing the certificate of rank %d: %w", rank, err)
		}
		certDER, seed = der, key.Seed()
	}
	tok, err := pki.Token{Job: id.ID, Rank: rank, Size: s.Size + s.Spares, Incarnation: s.Incarnation, Host: host, Expires: s.Expires}.Sign(id.JobPriv)
	if err != nil {
		return nil, fmt.Errorf("signing the token of rank %d: %w", rank, err)
	}
	pubBytes, err := id.JobPub.MarshalBinary()
	if err != nil {
		return nil, err
	}
	j := &runtime.Job{
		Version:       runtime.JobVersion,
		ID:            id.ID,
		Rank:          rank,
		Size:          s.Size,
		Spares:        s.Spares,
		Incarnation:   s.Incarnation,
		Hosts:         s.Hosts,
		CA:            id.CA.CertDER,
		Cert:          certDER,
		Key:           seed,
		JobKey:        pubBytes,
		Token:         tok,
		SilenceMS:     s.SilenceMS,
		JoinMS:        s.JoinMS,
		Launched:      s.Launched,
		CheckpointDir: s.CheckpointDir,
		Failures:      s.Failures,
		Trace:         s.Trace,
	}
	if rank == 0 || rank >= s.Size {
		// Every spare may become rank 0, the COMMIT signer (SPEC §10.2).
		if j.JobSecret, err = id.JobPriv.MarshalBinary(); err != nil {
			return nil, err
		}
	}
	return j, nil
}
