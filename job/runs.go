package job

import (
	"fmt"
	"sort"
)

// Run is a run of consecutive slots on one host with consecutive ports:
// Count slots from the one after the run before it, at Host, listening
// at Port, Port+1, … . A job description's host table may be given as runs
// (Job.Runs) instead of one entry per slot: then it is as long as its
// host list, not as its job — one run for every rank of one machine — so
// that a description is O(1) in the job's size (SPEC §18).
type Run struct {
	Host  string `json:"host"`
	Port  int    `json:"port"`
	Count int    `json:"count"`
}

// Compact returns table as runs when that is shorter, else nil.
func Compact(table []Host) []Run {
	var runs []Run
	for i, h := range table {
		if n := len(runs); n > 0 {
			last := &runs[n-1]
			if last.Host == h.Host && last.Port+last.Count == h.Port {
				last.Count++
				continue
			}
		}
		runs = append(runs, Run{Host: h.Host, Port: h.Port, Count: 1})
		if len(runs) > len(table)/4 && i < len(table)-1 {
			// Most entries start runs of their own: the table is shorter.
			if len(runs) >= len(table)/2 {
				return nil
			}
		}
	}
	if 2*len(runs) > len(table) {
		return nil
	}
	return runs
}

// HostOf returns where slot listens: its entry of the host table, or of
// its run. slot must be a slot of the job (0 … Slots()-1).
func (j *Job) HostOf(slot int) Host {
	if j.Runs == nil {
		return j.Hosts[slot]
	}
	j.runIndex()
	i := sort.SearchInts(j.runStart, slot+1) - 1
	r := j.Runs[i]
	return Host{Host: r.Host, Port: r.Port + slot - j.runStart[i]}
}

// runIndex makes the first slot of every run, once.
func (j *Job) runIndex() {
	j.runOnce.Do(func() {
		j.runStart = make([]int, len(j.Runs))
		first := 0
		for i, r := range j.Runs {
			j.runStart[i] = first
			first += r.Count
		}
	})
}

// OnHost returns how many slots listen on host and the first of them.
func (j *Job) OnHost(host string) (count, first int) {
	first = -1
	if j.Runs == nil {
		for s, h := range j.Hosts {
			if h.Host == host {
				count++
				if first < 0 {
					first = s
				}
			}
		}
		return count, first
	}
	j.runIndex()
	for i, r := range j.Runs {
		if r.Host == host {
			count += r.Count
			if first < 0 {
				first = j.runStart[i]
			}
		}
	}
	return count, first
}

// hostNames returns every host the table names, once per entry or run,
// with the slot it starts at (for the checks of Validate).
func (j *Job) hostEntries() []Host {
	if j.Runs == nil {
		return j.Hosts
	}
	out := make([]Host, len(j.Runs))
	for i, r := range j.Runs {
		out[i] = Host{Host: r.Host, Port: r.Port}
	}
	return out
}

// checkRuns checks the runs of a description of slots slots.
func checkRuns(runs []Run, slots int) error {
	total := 0
	for i, r := range runs {
		if r.Count < 1 || r.Count > slots {
			return fmt.Errorf("run %d (%s) has %d slots, want 1 to %d", i, r.Host, r.Count, slots)
		}
		if r.Port < 1 || r.Port+r.Count-1 > 65535 {
			return fmt.Errorf("run %d (%s) has ports %d to %d, want 1 to 65535", i, r.Host, r.Port, r.Port+r.Count-1)
		}
		total += r.Count
	}
	if total != slots {
		return fmt.Errorf("runs hold %d slots, want %d (the size and the spares)", total, slots)
	}
	return nil
}
