package launch

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sperli/record"
)

// TestLabel: a line names the rank and the slot wherever a slot serves a
// rank in a job with spares or serves another rank than its number; a job
// without spares keeps the seed's "[rank i] ".
func TestLabel(t *testing.T) {
	for _, tc := range []struct {
		spares bool
		slot   int
		ro     role
		want   string
	}{
		{false, 3, role{0, 3}, "[rank 3] "},
		{false, 3, role{1, 2}, "[rank 2 · slot 3] "}, // after a shrink
		{true, 0, role{0, 0}, "[rank 0 · slot 0] "},
		{true, 8, role{1, 2}, "[rank 2 · slot 8] "},
		{true, 9, role{0, -1}, "[spare · slot 9] "},
	} {
		o := &outputs{slots: tc.spares}
		if got := o.prefix(tc.slot, tc.ro); got != tc.want {
			t.Errorf("prefix(spares %v, slot %d, %+v) = %q, want %q", tc.spares, tc.slot, tc.ro, got, tc.want)
		}
	}
	if got, want := Prefix(4, false), "[rank 4] "; got != want {
		t.Errorf("Prefix(4, false) = %q, want %q", got, want)
	}
}

// TestTrackName: a --trace track names every role its slot served.
func TestTrackName(t *testing.T) {
	for _, tc := range []struct {
		spares bool
		slot   int
		roles  []role
		inc    uint32
		want   string
	}{
		{false, 1, []role{{0, 1}}, 0, "rank 1 (node1)"},
		{false, 1, []role{{0, 1}}, 2, "rank 1 (node1) incarnation 2"},
		{false, 3, []role{{0, 3}, {1, 2}}, 0, "rank 3 · slot 3, rank 2 from generation 1 (node1)"},
		{true, 0, []role{{0, 0}}, 0, "rank 0 · slot 0 (node1)"},
		{true, 3, []role{{0, -1}, {1, 1}}, 0, "spare · slot 3, rank 1 from generation 1 (node1)"},
	} {
		if got := trackName(tc.spares, tc.slot, tc.roles, "node1", tc.inc); got != tc.want {
			t.Errorf("trackName(%v, %d, %v, %d) = %q, want %q", tc.spares, tc.slot, tc.roles, tc.inc, got, tc.want)
		}
	}
}

// TestSlotRoles: a role is noted once, an older generation's report
// changes nothing, and lines of standard output that came while the slot
// was a spare are shown as the rank it became.
func TestSlotRoles(t *testing.T) {
	r := newSlotRoles(0, -1)
	r.add(1, -1) // still a spare
	r.add(2, 1)
	r.add(2, 1)
	r.add(1, 0) // older than the last
	if got, want := r.all(), []role{{0, -1}, {2, 1}}; !equalRoles(got, want) {
		t.Fatalf("roles %v, want %v", got, want)
	}
	if got := r.shown(0); got != (role{2, 1}) {
		t.Errorf("shown(0) = %+v, want the rank the spare became", got)
	}
	if got := r.at(0); got != (role{0, -1}) {
		t.Errorf("at(0) = %+v, want the spare", got)
	}
	never := newSlotRoles(0, -1)
	if got := never.shown(0); got != (role{0, -1}) {
		t.Errorf("a spare that served no rank: shown %+v", got)
	}
}

func equalRoles(a, b []role) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestStreamLabelsEachLine: each line is labelled by the role its slot
// served when it came, in each mode; standard error learns a role from
// the slot's own report, in order with its lines.
func TestStreamLabelsEachLine(t *testing.T) {
	key := record.Key([]byte("the job's key"))
	report := record.Seal(key, record.GenPrefix, `{"kind":"generation","generation":1,"slot":3,"rank":1}`) + "\n"
	onGen := func(slot int, line []byte) (int, int) { return 1, 1 }

	t.Run("default", func(t *testing.T) {
		o := &outputs{slots: true, onGen: onGen}
		roles := newSlotRoles(0, -1)
		out := newStream(o, 3, false, 0, nil, roles)
		errs := newStream(o, 3, true, 0, nil, roles)
		errs.setKey(key)
		out.setKey(key)
		errs.Write([]byte("waiting as a spare\n"))
		out.Write([]byte("before the report came\n")) // the other pipe was read first
		errs.Write([]byte(report))
		out.Write([]byte("after\n"))
		errs.Write([]byte("an error line\n"))
		out.close()
		errs.close()
		if got, want := shown(out), "[rank 1 · slot 3] before the report came\n[rank 1 · slot 3] after\n"; got != want {
			t.Errorf("stdout shown\n%q\nwant\n%q", got, want)
		}
		if got, want := shown(errs), "[spare · slot 3] waiting as a spare\n[rank 1 · slot 3] --- generation 1 ---\n[rank 1 · slot 3] an error line\n"; got != want {
			t.Errorf("stderr shown\n%q\nwant\n%q", got, want)
		}
	})

	t.Run("a shrink renumbers", func(t *testing.T) {
		o := &outputs{}
		roles := newSlotRoles(0, 3)
		out := newStream(o, 3, false, 0, nil, roles)
		out.Write([]byte("one\ntw"))
		roles.add(1, 2) // mid-line: the line keeps its label
		out.Write([]byte("o\nthree\n"))
		out.close()
		if got, want := shown(out), "[rank 3] one\n[rank 3] two\n[rank 2 · slot 3] three\n"; got != want {
			t.Errorf("shown\n%q\nwant\n%q", got, want)
		}
	})

	t.Run("live", func(t *testing.T) {
		var w bytes.Buffer
		o := &outputs{slots: true, live: true, stdout: &w}
		roles := newSlotRoles(0, -1)
		out := newStream(o, 3, false, 0, nil, roles)
		out.Write([]byte("first\n"))
		roles.add(1, 1)
		out.Write([]byte("second\n"))
		out.close()
		if got, want := w.String(), "[spare · slot 3] first\n[rank 1 · slot 3] second\n"; got != want {
			t.Errorf("written\n%q\nwant\n%q", got, want)
		}
	})

	t.Run("output-dir", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "rank-3.out")
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		o := &outputs{slots: true}
		roles := newSlotRoles(0, -1)
		out := newStream(o, 3, false, 0, f, roles)
		roles.add(1, 1)
		out.Write([]byte("first\nsecond\n"))
		out.close()
		b, _ := os.ReadFile(path)
		if got, want := string(b), "--- generation 1 · rank 1 · slot 3\nfirst\nsecond\n"; got != want {
			t.Errorf("file\n%q\nwant\n%q", got, want)
		}
	})
}

// TestWriteSpoolBounds: each line gets the prefix of the bound it lies
// in, also when a line is longer than the reader's buffer.
func TestWriteSpoolBounds(t *testing.T) {
	var sp spool
	long := strings.Repeat("x", 40<<10) + "\n"
	sp.Write([]byte("a\n" + long + "b\n"))
	var out bytes.Buffer
	w := bufio.NewWriter(&out)
	writeSpool(w, []prefixFrom{{0, "[1] "}, {2, "[2] "}, {int64(2 + len(long)), "[3] "}}, &sp)
	w.Flush()
	if want := "[1] a\n[2] " + long + "[3] b\n"; out.String() != want {
		t.Errorf("writeSpool gave %d bytes, want %d: %q…", out.Len(), len(want), out.String()[:min(out.Len(), 40)])
	}
}
