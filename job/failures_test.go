package job

import (
	"strings"
	"testing"
)

// TestParseFailures: the schedule's entries and points, and an error that
// names the entry that is wrong.
func TestParseFailures(t *testing.T) {
	got, err := ParseFailures("0:1,1:2@after-ckpt-3,0:3@stop-collective-2,2:0@mute-agree-1")
	if err != nil {
		t.Fatal(err)
	}
	want := []Failure{{0, 1, "", 0}, {1, 2, "after-ckpt", 3}, {0, 3, "stop-collective", 2}, {2, 0, "mute-agree", 1}}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d: %+v, want %+v", i+1, got[i], want[i])
		}
	}
	for s, wantErr := range map[string]string{
		"0:1@stop-2":                  `entry 1 "0:1@stop-2": point is not one of`,
		"0:1,0:2@stop-collective-0":   `entry 2 "0:2@stop-collective-0": point`,
		"0:1@collective-1,0:1":        `entry 2 "0:1": incarnation and rank given twice`,
		"x:1":                         `entry 1 "x:1": incarnation is not a number`,
		"0:1@stop-collective-+1":      `entry 1 "0:1@stop-collective-+1": point`,
		"0:-1@collective-1":           `entry 1 "0:-1@collective-1": rank is not a number`,
		"0:1@after-ckpt-1,1:2@dies-1": `entry 2 "1:2@dies-1": point is not one of before-ckpt-K, mid-ckpt-K, after-ckpt-K, collective-K, agree-K, mute-agree-K, stop-collective-K, work-done-K, join-K with K ≥ 1`,
	} {
		_, err := ParseFailures(s)
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("ParseFailures(%q) = %v, want an error containing %q", s, err, wantErr)
		}
	}
}
