package launch

import (
	"fmt"
	"os"
	"strings"
)

// otherJobs names the jobs whose files a checkpoint directory holds (its
// entries named as job ids: 32 hex digits), other than job id, in order.
func otherJobs(dir, id string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if n := e.Name(); e.IsDir() && n != id && len(n) == 32 && strings.Trim(n, "0123456789abcdef") == "" {
			out = append(out, n)
		}
	}
	return out
}

// newJobNote is the launcher's line for a job launched without --job on a
// checkpoint directory that holds other jobs' checkpoints or work queue
// logs: a new identity resumes none of them (only the job that wrote
// them holds the key that signed them), which a user who meant to resume
// must hear. "" when there is nothing to say.
func newJobNote(dir, id string) string {
	others := otherJobs(dir, id)
	if len(others) == 0 {
		return ""
	}
	held := "the files of job " + others[len(others)-1]
	if len(others) > 1 {
		held = fmt.Sprintf("the files of %d other jobs (the last %s)", len(others), others[len(others)-1])
	}
	return fmt.Sprintf("note: --checkpoint-dir %s holds %s; this is a new job (%s) and resumes none of them: to resume a job, run it again with --job DIR (sperli job make --checkpoint-dir)", dir, held, id)
}
