package runtime

import (
	"os"
	goruntime "runtime"
	"strconv"
	"strings"
	"time"

	"sperli/codes"
	"sperli/hosts"
)

// The low-latency wait. A goroutine that blocks in a socket read parks in
// Go's poller; when the answer comes, the poller's thread must be woken,
// and on a machine whose idle processors halt (every virtual machine) that
// wake-up costs tens of microseconds — more than a whole round trip on
// loopback. MPI ranks poll instead. So a read below TLS first polls its
// socket (non-blocking reads) for up to the spin limit, and blocks only
// when nothing came in that time. The spin limit is SPERLI_SPIN_US
// microseconds (default defaultSpin); it is 0 — never spin — when this
// host runs more ranks of the job than it has processors, as MPI turns on
// yield-when-idle when oversubscribed, because a spinning rank would then
// take the processor from one that computes. The handshake never spins:
// the limit is set once the job has joined.
const defaultSpin = time.Millisecond

// maxSpin is the largest SPERLI_SPIN_US, one second.
const maxSpin = time.Second

// spinLimit is the spin limit of rank j's reads (SPERLI_SPIN_US, then
// the oversubscription rule).
func spinLimit(j *Job) (time.Duration, error) {
	if v := j.Environment().SpinUS; v != "" {
		us, err := strconv.ParseInt(v, 10, 64)
		if err != nil || us < 0 || time.Duration(us)*time.Microsecond > maxSpin {
			return 0, codes.New(codes.OutOfRange, "SPERLI_SPIN_US=%q: want whole microseconds from 0 to %d", v, maxSpin/time.Microsecond)
		}
		return time.Duration(us) * time.Microsecond, nil
	}
	self := j.HostOf(j.Rank).Host
	local, first := j.OnHost(self)
	if cpus := hostCPUs(); local > cpus {
		// The launcher says so for its own machine; on another host the
		// first rank there says it, once (SPEC §2: a note, not an error).
		if j.Launched && first == j.Rank && !hosts.IsLocal(self) {
			j.Log("note: %d ranks on host %s, which has %d processors: they share them, and do not spin while they wait", local, self, cpus)
		}
		return 0, nil
	}
	return defaultSpin, nil
}

// hostCPUs is the number of processors of the machine — not of this
// process's affinity mask (runtime.NumCPU): a rank pinned to one core, as
// mpirun --bind-to core places it, is not oversubscribed because of that.
func hostCPUs() int {
	if b, err := os.ReadFile("/sys/devices/system/cpu/online"); err == nil {
		if n := countCPUList(strings.TrimSpace(string(b))); n > 0 {
			return n
		}
	}
	return goruntime.NumCPU()
}

// countCPUList counts the processors of a Linux CPU list ("0-3,8,10-11");
// 0 for anything else.
func countCPUList(s string) int {
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
