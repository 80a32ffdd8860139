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
	"sperli/job"
)

// LoadJobDir reads the identity of a `sperli job make` directory (SPEC
// §9.5, `sperli run --job DIR`): DIR/rank-0.job … rank-(N-1).job of one
// job, rank 0's holding the job secret. The job keeps its id, CA, job key
// and each rank's certificate, so a later launch resumes its checkpoints;
// the tokens are signed anew. n is -n (0 when not given): another size
// than the job's is H1623. It returns the identity, the host lines of the
// job and its checkpoint directory.
func LoadJobDir(dir string, n int) (*job.Identity, []hosts.Line, string, error) {
	read := func(r int) (*job.Job, error) {
		path := filepath.Join(dir, fmt.Sprintf("rank-%d.job", r))
		b, err := os.ReadFile(path)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, usage("--job %s: no %s (a directory of \"sperli job make\")", dir, filepath.Base(path))
			}
			return nil, usage("--job %s: %v", dir, unwrapPath(err))
		}
		j, err := job.Read(bytes.NewReader(b))
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
	id, err := job.Resume(j0, size)
	if err != nil {
		return nil, nil, "", usage("--job %s: rank-0.job: %v", dir, err)
	}
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
		h := j.HostOf(r)
		id.Fix(r, h.Host, j.Cert, j.Key)
		lines[r] = hosts.Line{Host: h.Host, Port: h.Port, Line: r + 1}
	}
	return id, lines, j0.CheckpointDir, nil
}
