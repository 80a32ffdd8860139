package launch

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"sperli/hosts"
)

// Before any rank starts, the launcher checks what the job needs of this
// machine and this process against their limits (docs/scale.md, "What a
// job needs of its machine"): the launcher's open files (RLIMIT_NOFILE,
// raised to the hard limit when that suffices), the processes and threads
// of the ranks started here (RLIMIT_NPROC, and the machine's room for
// tasks) and the memory of the .star ranks started here (MemAvailable). A
// job that cannot run is refused with one line (exit 2): before this check,
// -n 9000 forked some 2,700 ranks for 42 s and ended with "too many open
// files". needsOf and checkLimits are the arithmetic, readLimits and
// checkMachine the reads around them.

// What the launcher holds for a rank, measured (docs/scale.md): a local
// rank's listening socket (until every rank has started), its stdin,
// stdout and stderr pipes and its pidfd; while up to maxStarting ranks
// start at once, each start holds the child's ends of the three pipes and
// exec's status pipe too. A remote host's ssh session is three pipes and a
// pidfd, whatever its number of ranks. --output-dir holds two files a slot.
const (
	filesPerLocal     = 5
	filesPerStarting  = 5
	maxStarting       = 32 // startParallel's bound
	filesPerHost      = 4
	filesPerOutputDir = 2
	filesBase         = 16 // standard streams, epoll, the record, the trace, …
)

// The tasks (processes and threads) a rank costs this machine: the rank's
// own (an idle `sperli rank` runs 3 to 6 threads, 4 or more in nine of ten;
// an executable at least its process) and the launcher's thread that waits
// for it; a remote host's ssh process (a remote rank costs this machine
// nothing more: 64 ranks on two hosts, 17 descriptors and 6 threads).
const (
	tasksPerStar  = 4
	tasksPerExec  = 1
	tasksPerWait  = 1
	tasksPerHost  = 1
	tasksLauncher = 8
)

// memPerStar is what an idle .star rank takes of MemAvailable: 2.2 to
// 2.4 MiB measured at 256 and 512 ranks (the 10 MiB more of its resident
// size are the binary's pages, shared by every rank). Memory is checked
// only for .star ranks: an executable's size is its own.
const memPerStar = 2 << 20

// jobShape is what the check needs to know of a job.
type jobShape struct {
	local       int  // slots (ranks and spares) on this machine
	slots       int  // every slot
	remoteHosts int  // other machines, one ssh session each
	star        bool // the ranks are .star programs
	outputDir   bool // --output-dir
}

// needs is what a job asks of this machine.
type needs struct {
	files int   // the launcher's open files at the most
	tasks int   // processes and threads of this machine's part of the job
	mem   int64 // bytes of MemAvailable its ranks take at least; 0 unknown
}

// needsOf is the need of a job of shape j.
func needsOf(j jobShape) needs {
	n := needs{
		files: filesBase + filesPerLocal*j.local + filesPerStarting*min(j.local, maxStarting) + filesPerHost*j.remoteHosts,
		tasks: tasksLauncher + tasksPerHost*j.remoteHosts,
	}
	if j.outputDir {
		n.files += filesPerOutputDir * j.slots
	}
	per := tasksPerExec
	if j.star {
		per = tasksPerStar
		n.mem = int64(j.local) * memPerStar
	}
	n.tasks += j.local * (per + tasksPerWait)
	return n
}

// noLimit is an unlimited limit.
const noLimit = ^uint64(0)

// limits are what this machine and this process allow.
type limits struct {
	files, filesMax uint64 // RLIMIT_NOFILE: the soft and the hard limit
	tasks           uint64 // RLIMIT_NPROC's soft limit; noLimit for none (root)
	// taskMax is the machine's bound on tasks (the lower of kernel.pid_max
	// and kernel.threads-max, named by taskMaxName) and tasksNow the tasks
	// it runs; taskMax 0 when not known.
	taskMax, tasksNow int64
	taskMaxName       string
	memAvail          int64 // MemAvailable in bytes; -1 when not known
}

// checkLimits checks need against lim for the job named by flag ("-n 600",
// "-n 600 --spares 4"). It returns the soft limit of open files to set
// first (0: none), or the usage error that refuses the job.
func checkLimits(flag string, need needs, lim limits) (raise uint64, err error) {
	files := uint64(need.files)
	switch {
	case files > lim.filesMax:
		return 0, usage("%s: the launcher needs about %s open files, its limit is %s (the hard limit, ulimit -Hn): raise it or run fewer ranks on this machine",
			flag, count(need.files), countU(lim.filesMax))
	case files > lim.files:
		raise = lim.filesMax
	}
	if lim.tasks != noLimit && uint64(need.tasks) > lim.tasks {
		return 0, usage("%s: the job needs about %s processes and threads on this machine, the user's limit is %s (ulimit -u): raise it or run fewer ranks on this machine",
			flag, count(need.tasks), countU(lim.tasks))
	}
	if lim.taskMax > 0 && int64(need.tasks) > lim.taskMax-lim.tasksNow {
		return 0, usage("%s: the job needs about %s processes and threads on this machine, it has room for %s more (%s %s, %s running): raise %s or run fewer ranks on this machine",
			flag, count(need.tasks), count64(max(0, lim.taskMax-lim.tasksNow)), lim.taskMaxName, count64(lim.taskMax), count64(lim.tasksNow), lim.taskMaxName)
	}
	if need.mem > 0 && lim.memAvail >= 0 && need.mem > lim.memAvail {
		return 0, usage("%s: the ranks on this machine need at least %s MiB of memory (%d MiB each, idle), %s MiB is available (MemAvailable): run fewer ranks on this machine",
			flag, count64(need.mem>>20), memPerStar>>20, count64(lim.memAvail>>20))
	}
	return raise, nil
}

// count writes n with a comma between thousands: 45,010.
func count(n int) string { return count64(int64(n)) }

func countU(n uint64) string {
	if n == noLimit {
		return "unlimited"
	}
	if n > 1<<62 {
		return strconv.FormatUint(n, 10)
	}
	return count64(int64(n))
}

func count64(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// sizeFlag names the job's size as the command line gave it.
func sizeFlag(n, spares int) string {
	if spares > 0 {
		return fmt.Sprintf("-n %d --spares %d", n, spares)
	}
	return fmt.Sprintf("-n %d", n)
}

// shapeOf is the shape of a job whose slot i runs on slotHosts[i].
func shapeOf(slotHosts []string, star, outputDir bool) jobShape {
	j := jobShape{slots: len(slotHosts), star: star, outputDir: outputDir}
	machines := map[string]bool{}
	for _, h := range slotHosts {
		if hosts.IsLocal(h) {
			j.local++
		} else {
			machines[machineOf(h)] = true
		}
	}
	j.remoteHosts = len(machines)
	return j
}

// checkMachine refuses a job this machine or this process cannot run, and
// raises the soft limit of open files to the hard one when the job needs
// it (said nothing of: it suffices).
func checkMachine(flag string, j jobShape) error {
	raise, err := checkLimits(flag, needsOf(j), readLimits())
	if err != nil {
		return err
	}
	if raise > 0 {
		// Go raises the soft limit to the hard one at start already
		// (syscall's init); this is for a start where that failed.
		lim := unix.Rlimit{Cur: raise, Max: raise}
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
			return usage("%s: the launcher needs about %s open files and cannot raise its limit to %s: %v", flag, count(needsOf(j).files), countU(raise), err)
		}
	}
	return nil
}

// readLimits reads this process's and this machine's limits; what cannot
// be read does not limit.
func readLimits() limits {
	lim := limits{files: noLimit, filesMax: noLimit, tasks: noLimit, memAvail: -1}
	var rl unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &rl) == nil {
		lim.files, lim.filesMax = rl.Cur, rl.Max
	}
	if os.Geteuid() != 0 && unix.Getrlimit(unix.RLIMIT_NPROC, &rl) == nil && rl.Cur != unix.RLIM_INFINITY {
		lim.tasks = rl.Cur // root is not held to it
	}
	for _, sysctl := range []string{"kernel.pid_max", "kernel.threads-max"} {
		v, ok := readInt("/proc/sys/" + strings.ReplaceAll(sysctl, ".", "/"))
		if ok && v > 0 && (lim.taskMax == 0 || v < lim.taskMax) {
			lim.taskMax, lim.taskMaxName = v, sysctl
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if n, ok := parseLoadavgTasks(string(b)); ok {
			lim.tasksNow = n
		} else {
			lim.taskMax = 0
		}
	} else {
		lim.taskMax = 0
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if n, ok := parseMemAvailable(string(b)); ok {
			lim.memAvail = n
		}
	}
	return lim
}

func readInt(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}

// parseLoadavgTasks reads the number of tasks of /proc/loadavg ("0.20 0.18
// 0.12 1/96 20335": 96).
func parseLoadavgTasks(s string) (int64, bool) {
	f := strings.Fields(s)
	if len(f) < 4 {
		return 0, false
	}
	_, total, ok := strings.Cut(f[3], "/")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(total, 10, 64)
	return n, err == nil && n >= 0
}

// parseMemAvailable reads MemAvailable of /proc/meminfo, in bytes.
func parseMemAvailable(s string) (int64, bool) {
	for _, line := range strings.Split(s, "\n") {
		rest, ok := strings.CutPrefix(line, "MemAvailable:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, false
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		return kb << 10, err == nil && kb >= 0
	}
	return 0, false
}
