package launch

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sperli/hosts"
)

// SpinEnv is the environment variable of the ranks' low-latency wait
// (runtime/spin.go): whole microseconds from 0 to 1,000,000.
const SpinEnv = "SPERLI_SPIN_US"

// maxSpinUS is the largest SPERLI_SPIN_US the runtime takes.
const maxSpinUS = int64(time.Second / time.Microsecond)

// preflight checks, before anything starts, what can be checked on this
// machine (SPEC §2): the program (a .star file, or an executable file,
// not a directory), the --wdir directory when a rank runs here, and the
// environment variables the ranks read, the --modules directories, and a
// .star program compiled with the modules it loads (o.CheckStar). A
// failure is a usage error.
func preflight(o Options, lines []lineInfo, star bool) error {
	if err := CheckProgram(o.Program, star); err != nil {
		return err
	}
	if o.Wdir != "" && anyLocal(lines) {
		fi, err := os.Stat(o.Wdir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return usage("--wdir %s: no such directory (it is the working directory of the ranks on this machine)", o.Wdir)
		case err != nil:
			return usage("--wdir %s: %v", o.Wdir, unwrapPath(err))
		case !fi.IsDir():
			return usage("--wdir %s: not a directory", o.Wdir)
		}
	}
	var modules []string
	for _, d := range strings.Split(o.Modules, ":") {
		if d == "" {
			continue
		}
		if !filepath.IsAbs(d) && o.Wdir != "" {
			d = filepath.Join(o.Wdir, d) // the ranks run in --wdir
		}
		modules = append(modules, d)
		if !anyLocal(lines) {
			continue
		}
		fi, err := os.Stat(d)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return usage("--modules %s: no such directory", d)
		case err != nil:
			return usage("--modules %s: %v", d, unwrapPath(err))
		case !fi.IsDir():
			return usage("--modules %s: not a directory", d)
		}
	}
	if star && o.CheckStar != nil {
		if err := o.CheckStar(o.Program, modules); err != nil {
			return usage("%v", err)
		}
	}
	if v, ok := os.LookupEnv(SpinEnv); ok && v != "" {
		us, err := strconv.ParseInt(v, 10, 64)
		if err != nil || us < 0 || us > maxSpinUS {
			return usage("%s=%q: want whole microseconds from 0 to %d", SpinEnv, v, maxSpinUS)
		}
	}
	return nil
}

// CheckProgram says what is wrong with PROGRAM: missing, a directory, a
// .star file that is no regular file, an executable without x bits.
func CheckProgram(prog string, star bool) error {
	fi, err := os.Stat(prog)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return usage("program %s: no such file", prog)
	case err != nil:
		return usage("program %s: %v", prog, unwrapPath(err))
	case fi.IsDir():
		return usage("program %s: is a directory, want a .star file or an executable", prog)
	case star && !fi.Mode().IsRegular():
		return usage("program %s: not a regular file", prog)
	case star:
		f, err := os.Open(prog)
		if err != nil {
			return usage("program %s: %v", prog, unwrapPath(err))
		}
		f.Close()
	case fi.Mode().Perm()&0o111 == 0 || syscall.Access(prog, 1 /* X_OK */) != nil:
		return usage("program %s: not executable (chmod +x it, or give a .star rank program)", prog)
	}
	return nil
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// lineInfo is what preflight needs of a host line.
type lineInfo struct{ host string }

func anyLocal(lines []lineInfo) bool {
	for _, l := range lines {
		if hosts.IsLocal(l.host) {
			return true
		}
	}
	return false
}

// machineCPUs is the number of processors of this machine, as the ranks
// count them for their oversubscription rule (hosts.CPUs).
var machineCPUs = hosts.CPUs
