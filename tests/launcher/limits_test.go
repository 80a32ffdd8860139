package launcher

import (
	"os/exec"
	"path/filepath"
	"testing"

	"sperli/tests/internal/testbin"
)

// TestLimitRefused: a job that needs more open files than the launcher
// may hold is refused before anything starts, with one line naming -n,
// the need and the limit (exit 2): `ulimit -n 256` lowers the soft and
// the hard limit in a child shell, so raising the soft one cannot help.
// Spares count as ranks. Before the check, such a job forked ranks until
// "too many open files".
func TestLimitRefused(t *testing.T) {
	dir := t.TempDir()
	exe, markers, path := markerProgram(t, dir)
	star := writeFile(t, filepath.Join(dir, "prog.star"), "def main():\n    print(comm.rank)\n", 0o644)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{".star", []string{"-n", "600", star},
			"sperli: -n 600: the launcher needs about 3,176 open files, its limit is 256 (the hard limit, ulimit -Hn): raise it or run fewer ranks on this machine\n"},
		{"executable", []string{"-n", "600", exe},
			"sperli: -n 600: the launcher needs about 3,176 open files, its limit is 256 (the hard limit, ulimit -Hn): raise it or run fewer ranks on this machine\n"},
		{"spares are slots", []string{"-n", "590", "--spares", "10", exe},
			"sperli: -n 590 --spares 10: the launcher needs about 3,176 open files, its limit is 256 (the hard limit, ulimit -Hn): raise it or run fewer ranks on this machine\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("sh", append([]string{"-c", `ulimit -n 256 && exec "$0" run "$@"`, sperli}, tc.args...)...)
			cmd.Dir, cmd.Env = dir, withEnv(path)
			res := testbin.Start(t, cmd).Wait(t, timeout)
			if res.Code != 2 || res.Stderr != tc.want || res.Stdout != "" {
				t.Errorf("exit status %d, stdout %q, stderr %q; want 2, nothing, %q", res.Code, res.Stdout, res.Stderr, tc.want)
			}
			wantNotStarted(t, markers)
		})
	}
}
