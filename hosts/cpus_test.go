package hosts

import (
	"runtime"
	"testing"
)

// TestCountCPUList: the machine's processors are counted from Linux's CPU
// list format; anything malformed counts 0 (then CPUs is runtime.NumCPU).
func TestCountCPUList(t *testing.T) {
	for in, want := range map[string]int{
		"0": 1, "0-1": 2, "0-3,8,10-11": 7, "5": 1,
		"": 0, "x": 0, "3-1": 0, "0-": 0, "-1": 0, "0,,1": 0, "1-x": 0,
	} {
		if got := CountCPUList(in); got != want {
			t.Errorf("CountCPUList(%q) = %d, want %d", in, got, want)
		}
	}
	// The affinity mask can only be narrower than the machine.
	if got := CPUs(); got < 1 || got < runtime.NumCPU() {
		t.Errorf("CPUs() = %d, runtime.NumCPU() = %d", got, runtime.NumCPU())
	}
}
