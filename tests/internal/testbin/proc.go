package testbin

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Proc is a process seen in /proc.
type Proc struct {
	PID   int
	PPID  int
	State string // "R", "S", "Z" …
	Start string // start time in clock ticks since boot: tells a reused pid
}

// ReadProc reads /proc/PID/stat.
func ReadProc(pid int) (Proc, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Proc{}, false
	}
	// The command name, field 2, is in parentheses and may hold blanks.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Proc{}, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return Proc{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	return Proc{PID: pid, PPID: ppid, State: f[0], Start: f[19]}, true
}

// Children returns the processes whose parent is ppid.
func Children(ppid int) []Proc {
	ents, _ := os.ReadDir("/proc")
	var out []Proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pi, ok := ReadProc(pid); ok && pi.PPID == ppid {
			out = append(out, pi)
		}
	}
	return out
}

// Alive reports whether the process p was is still there (the same start
// time, so not a reused pid) and not a zombie.
func (p Proc) Alive() bool {
	now, ok := ReadProc(p.PID)
	return ok && now.Start == p.Start && now.State != "Z"
}

// Poll calls cond every tick until it is true or ctx ends; it reports
// whether cond became true.
func Poll(ctx context.Context, tick time.Duration, cond func() bool) bool {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		if cond() {
			return true
		}
		select {
		case <-ctx.Done():
			return cond()
		case <-t.C:
		}
	}
}
