//go:build hosts

package hosts

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTraceThreeHosts: --trace with every rank on another host over ssh:
// each remote rank's track holds its join and its reduce, on the
// launcher's clock (the offset each got from its clock probes): its calls
// lie within its process's life as the launcher saw it.
func TestTraceThreeHosts(t *testing.T) {
	c := newCluster(t, options{})
	j := c.newJob(t, c.host(1), c.host(2), c.host(3))
	path := filepath.Join(j.work, "hosts.json")
	r := j.run("run", "-n", "3", "--hosts", j.hosts, "--trace", path, sum)
	if r.Code != 0 || r.Stdout != golden+"\n" {
		t.Fatalf("%v\nwant exit status 0 and stdout %q", r, golden)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tf struct {
		TraceEvents []struct {
			Ph, Name string
			Ts, Dur  float64
			Pid, Tid int
			Args     map[string]any
		}
	}
	if err := json.Unmarshal(b, &tf); err != nil {
		t.Fatalf("not a trace: %v", err)
	}
	names := map[int]string{}
	type life struct{ from, to float64 }
	lives := map[int]life{}
	calls := map[int][]string{}
	for _, e := range tf.TraceEvents {
		switch {
		case e.Ph == "M" && e.Name == "process_name":
			names[e.Pid], _ = e.Args["name"].(string)
		case e.Ph == "X" && e.Tid == 0:
			lives[e.Pid] = life{e.Ts, e.Ts + e.Dur}
		}
	}
	for _, e := range tf.TraceEvents {
		if e.Ph != "X" || e.Tid != 1 {
			continue
		}
		calls[e.Pid] = append(calls[e.Pid], e.Name)
		if l, ok := lives[e.Pid]; !ok || e.Ts < l.from || e.Ts+e.Dur > l.to {
			t.Errorf("%s: %s at %.0f–%.0f µs lies outside its process's life %+v", names[e.Pid], e.Name, e.Ts, e.Ts+e.Dur, l)
		}
	}
	for i := 0; i < 3; i++ {
		pid := -1
		for p, n := range names {
			if strings.HasPrefix(n, "rank "+string(rune('0'+i))+" ") {
				pid = p
			}
		}
		if pid < 0 {
			t.Fatalf("no track of rank %d: %v", i, names)
		}
		if !strings.Contains(names[pid], c.host(i+1)) {
			t.Errorf("rank %d's track %q does not name its host %s", i, names[pid], c.host(i+1))
		}
		got := strings.Join(calls[pid], " ")
		if !strings.Contains(got, "join") || !strings.Contains(got, "reduce") {
			t.Errorf("rank %d's calls %q, want its join and its reduce", i, got)
		}
	}
}
