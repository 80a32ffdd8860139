package launch

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"sperli/codes"
	"sperli/hosts"
	"sperli/pki"
	"sperli/runtime"
)

// fixedCert is a rank's certificate and key taken from a job directory:
// the launcher has no CA key to issue new ones.
type fixedCert struct {
	host string
	cert []byte
	key  []byte
}

// LoadJobDir reads the identity of a `sperli job make` directory (SPEC
// §9.5, `sperli run --job DIR`): DIR/rank-0.job … rank-(N-1).job of one
// job, rank 0's holding the job secret. The job keeps its id, CA, job key
// and each rank's certificate, so a later launch resumes its checkpoints;
// the tokens are signed anew. n is -n (0 when not given): another size
// than the job's is H1623. It returns the identity, the host lines of the
// job and its checkpoint directory.
func LoadJobDir(dir string, n int) (*Identity, []hosts.Line, string, error) {
	read := func(r int) (*runtime.Job, error) {
		path := filepath.Join(dir, fmt.Sprintf("rank-%d.job", r))
		b, err := os.ReadFile(path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, usage("--job %s: no %s (a directory of \"sperli job make\")", dir, filepath.Base(path))
			}
			return nil, usage("--job %s: %v", dir, unwrapPath(err))
		}
		j, err := runtime.ReadJob(bytes.NewReader(b))
		if err != nil {
			return nil, usage("--job %s: %s: %v", dir, filepath.Base(path), err)
		}
		return j, nil
	}
	j0, err := read(0)
	if err != nil {
		return nil, nil, "", err
	}
	size := j0.Size
	if j0.Spares > 0 {
		return nil, nil, "", usage("--job %s: the job has %d spare slot(s): start every slot by hand (sperli rank PROGRAM < %s/rank-i.job); sperli run --job runs jobs made without spares", dir, j0.Spares, dir)
	}
	if n != 0 && n != size {
		return nil, nil, "", usage("--job %s: %s: the job has %d ranks, -n %d: a job resumes with its own size",
			dir, codes.ResumeSize, size, n)
	}
	if len(j0.JobSecret) == 0 {
		return nil, nil, "", usage("--job %s: rank-0.job holds no job secret", dir)
	}
	priv, err := pki.UnmarshalPrivateKey(j0.JobSecret)
	if err != nil {
		return nil, nil, "", usage("--job %s: rank-0.job: the job secret: %v", dir, err)
	}
	pub, err := pki.UnmarshalPublicKey(j0.JobKey)
	if err != nil {
		return nil, nil, "", usage("--job %s: rank-0.job: the job key: %v", dir, err)
	}
	id := &Identity{ID: j0.ID, CA: &pki.CA{CertDER: j0.CA}, JobPub: pub, JobPriv: priv, fixed: make([]fixedCert, size)}
	lines := make([]hosts.Line, size)
	for r := 0; r < size; r++ {
		j := j0
		if r > 0 {
			if j, err = read(r); err != nil {
				return nil, nil, "", err
			}
		}
		if j.ID != j0.ID || j.Size != size || j.Rank != r || !bytes.Equal(j.CA, j0.CA) || !bytes.Equal(j.JobKey, j0.JobKey) {
			return nil, nil, "", usage("--job %s: rank-%d.job is not of the job of rank-0.job (job, size, rank, CA or key differ)", dir, r)
		}
		h := j.Hosts[r]
		id.fixed[r] = fixedCert{host: h.Host, cert: j.Cert, key: j.Key}
		lines[r] = hosts.Line{Host: h.Host, Port: h.Port, Line: r + 1}
	}
	return id, lines, j0.CheckpointDir, nil
}
