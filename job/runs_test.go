package job

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCompact: runs of consecutive slots and ports on one host; a table
// whose entries are mostly runs of their own is not compacted.
func TestCompact(t *testing.T) {
	var table []Host
	for i := 0; i < 100; i++ {
		table = append(table, Host{Host: "127.0.0.1", Port: 20000 + i})
	}
	for i := 0; i < 50; i++ {
		table = append(table, Host{Host: "node2", Port: 47100 + i})
	}
	got := Compact(table)
	want := []Run{{"127.0.0.1", 20000, 100}, {"node2", 47100, 50}}
	if !slices.Equal(got, want) {
		t.Fatalf("Compact = %v, want %v", got, want)
	}
	j := &Job{Runs: got}
	for s, h := range table {
		if j.HostOf(s) != h {
			t.Fatalf("HostOf(%d) = %v, want %v", s, j.HostOf(s), h)
		}
	}
	if n, first := j.OnHost("node2"); n != 50 || first != 100 {
		t.Errorf("OnHost(node2) = %d, %d, want 50, 100", n, first)
	}
	var scattered []Host
	for i := 0; i < 10; i++ {
		scattered = append(scattered, Host{Host: fmt.Sprintf("node%d", i), Port: 47000 + i})
	}
	if got := Compact(scattered); got != nil {
		t.Errorf("Compact of one host a slot = %v, want nil (the table)", got)
	}
}

// TestDescriptionSize: a description of a job on one machine is as long
// at 60,000 slots (about the most ports one host has) as at 100 (SPEC
// §18: O(1) in the job's size).
func TestDescriptionSize(t *testing.T) {
	id, err := NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	size := func(n int) int {
		table := make([]Host, n)
		for i := range table {
			table[i] = Host{Host: "127.0.0.1", Port: 1024 + i}
		}
		s := Spec{Size: n, Hosts: table, Expires: time.Now().Add(time.Hour)}.Compacted()
		j, err := id.Describe(s, 1)
		if err != nil {
			t.Fatal(err)
		}
		b := j.Encode()
		back, err := Parse(b)
		if err != nil {
			t.Fatalf("%d slots: %v", n, err)
		}
		if back.HostOf(n-1) != table[n-1] {
			t.Fatalf("%d slots: HostOf(%d) = %v, want %v", n, n-1, back.HostOf(n-1), table[n-1])
		}
		return len(b)
	}
	small, large := size(100), size(60000)
	if large > small+64 {
		t.Errorf("a description of 60,000 slots is %d bytes, of 100 slots %d: want the same but for a few digits", large, small)
	}
}

// TestRunsChecked: runs that do not add up to the job, or leave the port
// range, are H1615.
func TestRunsChecked(t *testing.T) {
	id, err := NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	table := []Host{{"127.0.0.1", 20000}, {"127.0.0.1", 20001}, {"127.0.0.1", 20002}, {"127.0.0.1", 20003}}
	validJob := func(t *testing.T) *Job {
		j, err := id.Describe(Spec{Size: 4, Hosts: table, Expires: time.Now().Add(time.Hour)}, 1)
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	for _, tc := range []struct {
		runs []Run
		says string
	}{
		{[]Run{{"127.0.0.1", 20000, 3}}, "runs hold 3 slots, want 4"},
		{[]Run{{"127.0.0.1", 65534, 4}}, "ports 65534 to 65537"},
		{[]Run{{"127.0.0.1", 20000, 0}, {"127.0.0.1", 20000, 4}}, "has 0 slots"},
	} {
		j := validJob(t)
		j.Hosts, j.Runs = nil, tc.runs
		err := j.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Validate(runs %v) = %v, want H1615 saying %q", tc.runs, err, tc.says)
		}
	}
	j := validJob(t)
	j.Runs = []Run{{"127.0.0.1", 20000, 4}}
	if err := j.Validate(); err == nil || !strings.Contains(err.Error(), "want one of the two") {
		t.Errorf("Validate(hosts and runs) = %v, want H1615", err)
	}
}
