package launch

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNewJobNote: a new job's checkpoint directory that holds other jobs'
// directories gets one line naming them and --job; one that holds none,
// only this job's, or entries that are no job ids, gets none.
func TestNewJobNote(t *testing.T) {
	const self, a, b = "0123456789abcdef0123456789abcdef", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	for _, tc := range []struct {
		name string
		dirs []string
		want string // "" for no line
	}{
		{"empty", nil, ""},
		{"this job only", []string{self}, ""},
		{"no job ids", []string{"queues", "ABCDEFABCDEFABCDEFABCDEFABCDEFAB", "0123"}, ""},
		{"one other", []string{self, a}, "holds the files of job " + a + "; this is a new job (" + self + ") and resumes none of them: to resume a job, run it again with --job DIR"},
		{"two others", []string{a, b}, "holds the files of 2 other jobs (the last " + b + ")"},
	} {
		dir := t.TempDir()
		for _, d := range tc.dirs {
			if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
				t.Fatal(err)
			}
		}
		got := newJobNote(dir, self)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: newJobNote = %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := newJobNote(filepath.Join(t.TempDir(), "none"), self); got != "" {
		t.Errorf("a directory that does not exist: %q, want none", got)
	}
}
