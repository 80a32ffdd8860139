package launch

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"sperli/hosts"
	"sperli/record"
)

// DefaultSSHPort is the port ssh dials without --ssh-port (SPEC §3).
const DefaultSSHPort = hosts.SSHPort

// rankEnv returns the variables every rank gets (SPEC §2): SPERLI_RANK,
// SPERLI_SIZE, SPERLI_LOCAL_RANK, SPERLI_LOCAL_SIZE, torchrun's RANK,
// WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE unless set already (here or
// by -x), the launcher's mark, and the -x variables. localRank and
// localSize are the rank's place among the ranks of its machine
// (localRanks).
func rankEnv(rank, size, localRank, localSize int, x []string) []string {
	set := map[string]bool{}
	for _, kv := range x {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	env := []string{
		record.LaunchedEnv + "=1",
		"SPERLI_RANK=" + strconv.Itoa(rank),
		"SPERLI_SIZE=" + strconv.Itoa(size),
		"SPERLI_LOCAL_RANK=" + strconv.Itoa(localRank),
		"SPERLI_LOCAL_SIZE=" + strconv.Itoa(localSize),
	}
	for _, kv := range [][2]string{
		{"RANK", strconv.Itoa(rank)},
		{"WORLD_SIZE", strconv.Itoa(size)},
		{"LOCAL_RANK", strconv.Itoa(localRank)},
		{"LOCAL_WORLD_SIZE", strconv.Itoa(localSize)},
	} {
		if _, here := os.LookupEnv(kv[0]); !here && !set[kv[0]] {
			env = append(env, kv[0]+"="+kv[1])
		}
	}
	return append(env, x...)
}

// oneProcessor returns env with GOMAXPROCS=1 when the rank it starts
// shares a machine of cpus processors with more ranks of its job than
// that (SPERLI_LOCAL_SIZE in env) and neither inherited, the environment
// it starts in, nor env sets GOMAXPROCS. Such a rank gets about one
// processor's share anyway, as mpirun --bind-to core or torchrun's
// OMP_NUM_THREADS=1 would give it; a second P of the Go runtime only
// holds a second set of per-P caches (0.4 MiB of an idle rank's 2.2 MiB
// of its own) and a second thread to wake (docs/scale.md). A rank with a
// processor of its own keeps the runtime's default.
func oneProcessor(env, inherited []string, cpus int) []string {
	local := 0
	for _, set := range [][]string{inherited, env} {
		for _, kv := range set {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "GOMAXPROCS":
				return env
			case "SPERLI_LOCAL_SIZE":
				local, _ = strconv.Atoi(v)
			}
		}
	}
	if local <= cpus {
		return env
	}
	return append(env, "GOMAXPROCS=1")
}

// localRanks returns, for the rank on each of hostsOf, its rank among the
// ranks of its machine and their number: every local (loopback) host is
// this machine; a remote host is known by its name (machineOf).
func localRanks(hostsOf []string) (localRank, localSize []int) {
	localRank, localSize = make([]int, len(hostsOf)), make([]int, len(hostsOf))
	seen := map[string]int{}
	for r, h := range hostsOf {
		m := machineOf(h)
		localRank[r] = seen[m]
		seen[m]++
	}
	for r, h := range hostsOf {
		localSize[r] = seen[machineOf(h)]
	}
	return localRank, localSize
}

// machineOf names the machine of host: "" for this one (a local host),
// else the name without case or trailing dot.
func machineOf(host string) string {
	if hosts.IsLocal(host) {
		return ""
	}
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

// ParseExports turns the -x flags (NAME=VALUE, or NAME to pass this
// environment's value on) into NAME=VALUE settings.
func ParseExports(x []string) ([]string, error) {
	var out []string
	for _, e := range x {
		name, value, has := strings.Cut(e, "=")
		if !validEnvName(name) {
			return nil, usage("-x %s: %q is no environment variable name (letters, digits and _, not starting with a digit)", e, name)
		}
		if !has {
			v, ok := os.LookupEnv(name)
			if !ok {
				return nil, usage("-x %s: %s is not set here (give -x %s=VALUE)", e, name, name)
			}
			value = v
		}
		if strings.ContainsRune(value, 0) {
			return nil, usage("-x %s: the value holds a NUL byte", name)
		}
		out = append(out, name+"="+value)
	}
	return out, nil
}

func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// sshArgv is hosts.SSHArgv with the port of --ssh-port.
func sshArgv(port int, host string, command []string) []string {
	argv := hosts.SSHArgv(host, command)
	if port != 0 && port != hosts.SSHPort {
		argv[2] = strconv.Itoa(port)
	}
	return argv
}

// oversubscribed is the note said once when this machine runs more ranks
// than it has processors (SPEC §2), or "".
func oversubscribed(hostsOf []string) string {
	n := 0
	for _, h := range hostsOf {
		if hosts.IsLocal(h) {
			n++
		}
	}
	cpus := machineCPUs()
	if n <= cpus {
		return ""
	}
	if v := os.Getenv(SpinEnv); v != "" {
		return fmt.Sprintf("note: %d ranks on this machine, which has %d processors: they share them (%s=%s keeps them spinning while they wait)", n, cpus, SpinEnv, v)
	}
	return fmt.Sprintf("note: %d ranks on this machine, which has %d processors: they share them, and do not spin while they wait", n, cpus)
}
