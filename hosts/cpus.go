package hosts

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// CPUs is the number of processors of this machine, read once from
// /sys/devices/system/cpu/online — not of this process's affinity mask
// (runtime.NumCPU): a rank pinned to one core, as mpirun --bind-to core
// places it, is not oversubscribed because of that. Where the file is
// missing or malformed, runtime.NumCPU. The launcher (its oversubscription
// note, silence limit, join window and GOMAXPROCS rule), a host's agent
// and every rank (its spin rule) count alike with it.
var CPUs = sync.OnceValue(func() int {
	if b, err := os.ReadFile("/sys/devices/system/cpu/online"); err == nil {
		if n := CountCPUList(strings.TrimSpace(string(b))); n > 0 {
			return n
		}
	}
	return runtime.NumCPU()
})

// CountCPUList counts the processors of a Linux CPU list ("0-3,8,10-11");
// 0 for anything else.
func CountCPUList(s string) int {
	n := 0
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return 0
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0
			}
		}
		n += b - a + 1
	}
	return n
}
