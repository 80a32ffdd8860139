package runtime

import (
	"strconv"
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
	if cpus := hosts.CPUs(); local > cpus {
		// The launcher says so for its own machine; on another host the
		// first rank there says it, once (SPEC §2: a note, not an error).
		if j.Launched && first == j.Rank && !hosts.IsLocal(self) {
			j.Log("note: %d ranks on host %s, which has %d processors: they share them, and do not spin while they wait", local, self, cpus)
		}
		return 0, nil
	}
	return defaultSpin, nil
}
