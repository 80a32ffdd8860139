package job

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"sperli/pki"
)

// Identity is what stays the same across the restarts of one job: its id,
// its CA and its composite job key (SPEC §4.1). It lives in memory; only
// `sperli job make` writes it out, where it is told to.
type Identity struct {
	ID      string
	CA      *pki.CA
	JobPub  *pki.PublicKey
	JobPriv *pki.PrivateKey
	// fixed, for a job made before (Resume), is every rank's certificate
	// and key: there is no CA key to issue new ones.
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
	Size        int
	Spares      int // spare slots after the ranks (SPEC §10)
	Incarnation uint32
	Hosts       []Host // one per slot
	// Runs, when set (Compacted), is Hosts as runs (runs.go): the
	// descriptions carry them instead of the table.
	Runs          []Run
	SilenceMS     int
	JoinMS        int
	Launched      bool
	CheckpointDir string
	Failures      string
	Trace         bool      // --trace: the ranks write trace records
	OneProgram    bool      // every slot runs one program (Job.OneProgram)
	Program       string    // the launcher's digest of a .star program (Job.Program)
	Expires       time.Time // token expiry
}

// Compacted returns s with its host table also as runs, when runs are
// shorter (Compact): the descriptions Describe makes then carry the runs,
// O(hosts) instead of O(slots). Call it once, not per rank.
func (s Spec) Compacted() Spec {
	s.Runs = Compact(s.Hosts)
	return s
}

// Describe makes rank's job description: a certificate for its host, a
// token, and the job secret for rank 0.
func (id *Identity) Describe(s Spec, rank int) (*Job, error) {
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
	tok, err := id.token(rank, s.Size+s.Spares, s.Incarnation, host, s.Expires)
	if err != nil {
		return nil, err
	}
	pubBytes, secret, err := id.keys()
	if err != nil {
		return nil, err
	}
	j := &Job{
		Version:       Version,
		ID:            id.ID,
		Rank:          rank,
		Size:          s.Size,
		Spares:        s.Spares,
		Incarnation:   s.Incarnation,
		Hosts:         s.Hosts,
		Runs:          s.Runs,
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
		OneProgram:    s.OneProgram,
		Program:       s.Program,
	}
	if s.Runs != nil {
		j.Hosts = nil
	}
	if rank == 0 || rank >= s.Size {
		// Every spare may become rank 0, the COMMIT signer (SPEC §10.2).
		j.JobSecret = secret
	}
	return j, nil
}

// token signs the join token of slot rank of a job of slots slots.
func (id *Identity) token(rank, slots int, inc uint32, host string, expires time.Time) ([]byte, error) {
	tok, err := pki.Token{Job: id.ID, Rank: rank, Size: slots, Incarnation: inc, Host: host, Expires: expires}.Sign(id.JobPriv)
	if err != nil {
		return nil, fmt.Errorf("signing the token of slot %d: %w", rank, err)
	}
	return tok, nil
}

// keys returns the job key's public half and its secret half, encoded.
func (id *Identity) keys() (pub, secret []byte, err error) {
	if pub, err = id.JobPub.MarshalBinary(); err != nil {
		return nil, nil, err
	}
	if secret, err = id.JobPriv.MarshalBinary(); err != nil {
		return nil, nil, err
	}
	return pub, secret, nil
}

// fixedCert is a rank's certificate and key taken from a job made before:
// there is no CA key to issue new ones.
type fixedCert struct {
	host string
	cert []byte
	key  []byte
}

// Resume is the identity of a job made before, from the description of
// its rank 0 (it holds the job secret), for size ranks whose certificates
// Fix gives: the job keeps its id, CA, job key and certificates, so it
// resumes its checkpoints; tokens are signed anew.
func Resume(j0 *Job, size int) (*Identity, error) {
	if len(j0.JobSecret) == 0 {
		return nil, fmt.Errorf("rank 0's description holds no job secret")
	}
	priv, err := pki.UnmarshalPrivateKey(j0.JobSecret)
	if err != nil {
		return nil, fmt.Errorf("the job secret: %w", err)
	}
	pub, err := pki.UnmarshalPublicKey(j0.JobKey)
	if err != nil {
		return nil, fmt.Errorf("the job key: %w", err)
	}
	return &Identity{ID: j0.ID, CA: &pki.CA{CertDER: j0.CA}, JobPub: pub, JobPriv: priv, fixed: make([]fixedCert, size)}, nil
}

// Fix sets rank's certificate and key, of host, in an identity of Resume.
func (id *Identity) Fix(rank int, host string, cert, key []byte) {
	id.fixed[rank] = fixedCert{host: host, cert: cert, key: key}
}
