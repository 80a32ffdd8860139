package runtime

import (
	"io"

	"sperli/job"
)

// The job description and its reading are package job's; these names keep
// an embedder's main as it was (runtime.ReadJob, then Init or Run).

// Job is a job description (job.Job).
type Job = job.Job

// Host is one entry of a job's host table (job.Host).
type Host = job.Host

// ReadJob reads a job description (job.Read).
func ReadJob(r io.Reader) (*Job, error) { return job.Read(r) }
