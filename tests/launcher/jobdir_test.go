package launcher

import (
	"fmt"
	"path/filepath"
	"regexp"
	"testing"
)

// TestJobDir: `sperli run --job DIR` reuses the identity of a `sperli job
// make` directory: a second launch resumes the first one's checkpoint (the
// same job id, the next state); another -n is H1623 and starts nothing.
func TestJobDir(t *testing.T) {
	dir := t.TempDir()
	mk := sperliRun(t, baseEnv, dir, "job", "make", "-n", "3", "--checkpoint-dir", "ck", "--out", "jd")
	if mk.Code != 0 {
		t.Fatalf("sperli job make: %v", mk)
	}
	writeFile(t, filepath.Join(dir, "res.star"), `def main():
    comm.use_checkpoints()
    st = comm.resume()
    n = 0 if st == None else int(str(st))
    print("job %s resumed %d" % (comm.job, n))
    comm.checkpoint(str(n + 1))
`, 0o644)
	line := regexp.MustCompile(`^job ([0-9a-f]{32}) resumed (\d)$`)
	var job string
	for launch := 0; launch < 2; launch++ {
		r := sperliRun(t, baseEnv, dir, "run", "--job", "jd", "res.star")
		if r.Code != 0 {
			t.Fatalf("launch %d: %v", launch, r)
		}
		for rank := 0; rank < 3; rank++ {
			got := rankLines(r.Stdout, rank)
			if len(got) != 1 || !line.MatchString(got[0]) {
				t.Fatalf("launch %d, rank %d printed %q", launch, rank, got)
			}
			m := line.FindStringSubmatch(got[0])
			if job == "" {
				job = m[1]
			}
			if m[1] != job || m[2] != fmt.Sprint(launch) {
				t.Errorf("launch %d, rank %d: %q, want job %s resumed %d", launch, rank, got[0], job, launch)
			}
		}
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"another size", []string{"run", "--job", "jd", "-n", "2", "res.star"}, []string{"H1623", "3 ranks", "-n 2"}},
		{"no directory", []string{"run", "--job", "nowhere", "res.star"}, []string{"--job nowhere", "rank-0.job"}},
		{"with --hosts", []string{"run", "--job", "jd", "--hosts", "jd/rank-0.job", "res.star"}, []string{"--job", "--hosts"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sperliRun(t, baseEnv, dir, tc.args...)
			if r.Code != 2 || r.Stdout != "" {
				t.Errorf("exit status %d, want 2 and nothing started\n%v", r.Code, r)
			}
			wantOneLine(t, tc.name, r.Stderr, tc.want...)
		})
	}
}
