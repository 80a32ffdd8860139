package launch

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"sperli/codes"
	"sperli/hosts"
	"sperli/job"
	"sperli/record"
)

// Options are the flags of `sperli run`.
type Options struct {
	N             int      // ranks (-n)
	HostsFile     string   // --hosts; "" runs every rank on 127.0.0.1
	MapBy         string   // --map-by: "slot" ("" too) or "node" (checkMapBy)
	DenyFile      string   // --deny-hosts
	SilenceMS     int      // --silence; 0 is the default 5000
	Modules       string   // --modules D:D
	Wdir          string   // --wdir; "" is the launcher's working directory
	CheckpointDir string   // --checkpoint-dir (restarts: a later issue)
	RestartMax    int      // --restart-max
	Spares        int      // --spares: warm spare slots (SPEC §10)
	MaxLosses     int      // --max-losses: end the job at its K-th loss (losses.go); 0 is no limit
	Record        string   // --record: the generation record file
	Program       string   // a .star file or an executable
	Args          []string // the program's arguments
	Self          string   // the sperli binary for `sperli rank`; "" is os.Executable
	JoinMS        int      // the join window; 0 is the default 30 s

	// CheckStar, when not nil, compiles a .star program and the modules it
	// loads (starlib.Check) before any rank starts: an error is the one
	// message of a usage error (exit 2), not one per rank.
	CheckStar func(program string, modules []string) error

	Live      bool   // --live: each line as it comes
	OutputDir string // --output-dir: DIR/rank-i.out and rank-i.err instead
	// OutputMode is --output-mode: "overwrite" ("" too) empties each file
	// when the job starts, "append" adds to it; the generations of one job
	// always follow each other in the files.
	OutputMode string
	Verbose    bool          // -v: the H1612 lines of ranks ended by another too
	Env        []string      // -x, as NAME=VALUE (ParseExports)
	SSHPort    int           // --ssh-port; 0 is 62222
	JobDir     string        // --job: reuse the identity of a `sperli job make` directory
	Stats      string        // --stats: "" none, "table" or "json"
	Timeout    time.Duration // --timeout: end the job after it, saying where each rank waits; 0 is none
	// StatusEvery is --status-every: the refresh of the status line
	// (status.go); 0 is none, or every statusEveryTerm with Live on a
	// terminal.
	StatusEvery time.Duration
	// Trace is --trace: the file the timeline is written to (trace.go).
	Trace string

	Stdout io.Writer // the ranks' standard output
	Stderr io.Writer // the ranks' standard error, and the launcher's own lines as they happen
	Color  bool      // style the rank prefixes
}

// UsageError is a mistake in the command line or host list: nothing was
// started, and the launcher exits 2.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func usage(format string, args ...any) error { return &UsageError{Msg: fmt.Sprintf(format, args...)} }

// ExitCode returns the launcher's exit status for an error of Prepare.
func ExitCode(err error) int {
	var u *UsageError
	var p *hosts.ParseError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &u), errors.As(err, &p), codes.Of(err) == codes.HostRefused:
		return 2
	}
	return 1
}

// Placement is the host list with the refused-host rule applied.
type Placement struct {
	File  string
	Lines []hosts.Line
}

// checkSize says what is wrong with -n and --spares, before anything else
// is looked at.
func checkSize(prefix string, n, spares int) error {
	switch {
	case n < 1:
		return usage("%s-n %d: want at least 1 rank", prefix, n)
	case n > job.MaxSize:
		return usage("%s-n %d: want at most %d ranks", prefix, n, job.MaxSize)
	case spares < 0 || spares > job.MaxSize-n:
		return usage("%s--spares %d: want 0 to %d (at most %d slots: ranks and spares)", prefix, spares, job.MaxSize-n, job.MaxSize)
	}
	return nil
}

// MapBy is how ranks are dealt to the slots of the host lines (SPEC §3):
// "slot" (the default, "" too) fills a line's slots before the next line,
// "node" deals them round-robin over the lines.
func checkMapBy(m string) (byNode bool, err error) {
	switch m {
	case "", "slot":
		return false, nil
	case "node":
		return true, nil
	}
	return false, usage("--map-by %q: want slot or node", m)
}

// Place reads and checks the host list for n slots (SPEC §3, §4.4): a
// malformed line, too few slots, or a refused name on any line, and
// nothing starts. The placement holds one line per slot (hosts.Expand),
// the lines after the n-th being the unused ones a restart moves to.
func Place(n int, hostsFile, denyFile string, byNode bool) (*Placement, error) {
	if n < 1 {
		return nil, usage("-n %d: want at least 1 rank", n)
	}
	if n > job.MaxSize {
		return nil, usage("-n %d: want at most %d ranks", n, job.MaxSize)
	}
	var deny []string
	if denyFile != "" {
		d, err := hosts.ReadDenyFile(denyFile)
		if err != nil {
			return nil, fileErr("--deny-hosts", err)
		}
		deny = d
	}
	pl := &Placement{File: hostsFile}
	if hostsFile == "" {
		pl.Lines = hosts.Local(n)
	} else {
		lines, err := hosts.ReadFile(hostsFile)
		if err != nil {
			return nil, fileErr("--hosts", err)
		}
		pl.Lines = lines
	}
	if err := hosts.NewRefuser(os.Getenv(hosts.EnvRefused), deny).Check(hostsFile, pl.Lines); err != nil {
		return nil, err
	}
	raw := len(pl.Lines)
	pl.Lines = hosts.Expand(pl.Lines, byNode, 2*job.MaxSize)
	if len(pl.Lines) < n {
		if len(pl.Lines) == raw {
			return nil, usage("%s: %d host lines, want at least %d (one per rank, or slots=N on a line)", hostsFile, raw, n)
		}
		return nil, usage("%s: %d slots in all, want at least %d (one per rank)", hostsFile, len(pl.Lines), n)
	}
	return pl, nil
}

// checkDefaultPorts refuses a rank of lines[:n] that would listen at its
// default port (hosts.RankPort) when that is past hosts.LastDefaultPort;
// local says whether a local rank does (sperli job make) or gets its
// socket from the launcher (run).
func checkDefaultPorts(file string, lines []hosts.Line, n int, local bool) error {
	for r := 0; r < n && r < len(lines); r++ {
		l := lines[r]
		if l.Port == 0 && (local || !hosts.IsLocal(l.Host)) && hosts.BasePort+r > hosts.LastDefaultPort {
			return usage("%s: rank %d on %s needs a port on its line: the default ports (%d + rank) end at rank %d", file, r, l.Host, hosts.BasePort, hosts.LastDefaultPort-hosts.BasePort)
		}
	}
	return nil
}

// fileErr makes a host or deny list that cannot be read a usage error
// naming the flag (exit 2: nothing started); a malformed line stays the
// *hosts.ParseError that names the file and line.
func fileErr(flag string, err error) error {
	var p *hosts.ParseError
	if errors.As(err, &p) {
		return err
	}
	return usage("%s: %v", flag, err)
}

// Run launches the job and waits for it; it returns the exit status of
// SPEC §2.
func Run(ctx context.Context, o Options) int {
	if os.Getenv("GOMEMLIMIT") == "" {
		// The launcher's own memory is a few MB whatever the ranks write
		// (output spills to files); the limit keeps the collector up with
		// the garbage of a flood of lines also when the machine is busy.
		debug.SetMemoryLimit(launcherMemLimit)
	}
	var status *statusLine
	every := statusEvery(o)
	if every > 0 {
		term := onTerminal(o.Stderr)
		status = newStatusLine(o.Stderr, term)
		if term && onTerminal(o.Stdout) {
			o.Stdout = status.wrap(o.Stdout)
		}
		o.Stderr = status.wrap(o.Stderr)
		defer status.stop()
	}
	l := &launcher{status: status, every: every, o: o, out: &outputs{stdout: o.Stdout, stderr: o.Stderr, color: o.Color, live: o.Live, verbose: o.Verbose, dir: o.OutputDir, slots: o.Spares > 0},
		replies: make(chan waitReply, 64), started: time.Now()}
	l.losses = newLossCount(o.MaxLosses, l.lossName)
	if status != nil {
		status.outMu = &l.out.mu
	}
	l.gens.say = l.say
	l.gens.onLoss = l.losses.add
	l.out.onGen = l.gens.report
	l.out.onWaiting = func(rank int, w record.Waiting) {
		l.waitMu.Lock()
		if l.lastWait != nil {
			l.lastWait[rank] = w
		}
		l.waitMu.Unlock()
		select {
		case l.replies <- waitReply{rank, w}:
		default:
		}
	}
	defer l.closeFiles()
	return l.run(ctx)
}

// launcherMemLimit is the launcher's soft memory limit (GOMEMLIMIT unset).
const launcherMemLimit = 48 << 20

// openFiles opens DIR/rank-i.out and rank-i.err of every rank (--output-dir).
func (l *launcher) openFiles() error {
	if err := os.MkdirAll(l.o.OutputDir, 0o755); err != nil {
		return usage("--output-dir %s: %v", l.o.OutputDir, unwrapPath(err))
	}
	l.files = make([][2]*os.File, l.o.N+l.o.Spares)
	for r := range l.files {
		for i, ext := range []string{"out", "err"} {
			f, err := openOutputFile(l.o.OutputDir, r, ext, l.o.OutputMode != "append")
			if err != nil {
				return usage("--output-dir %s: %v", l.o.OutputDir, err)
			}
			l.files[r][i] = f
		}
	}
	return nil
}

func (l *launcher) closeFiles() {
	for _, fs := range l.files {
		for _, f := range fs {
			if f != nil {
				f.Close()
			}
		}
	}
}

type launcher struct {
	o     Options
	out   *outputs
	files [][2]*os.File // --output-dir: rank-i.out and rank-i.err
	mu    sync.Mutex
	lines []string     // launcher lines said already in this incarnation, to say each once
	lost  map[int]bool // ranks whose loss was said
	// lostWhy is the cause said of each of them.
	lostWhy map[int]string
	// stopping is set once the launcher kills what is left of the job.
	stopping bool
	// pending holds, per rank whose process has not been seen to end, the
	// loss of it a survivor saw; endedSeen the ranks whose end was seen
	// (pendLoss). Both are of this incarnation.
	pending   map[int]pendingLoss // by slot
	endedSeen map[int]bool        // by slot
	replies   chan waitReply      // waiting records, as the ranks answer
	// status is the --live status line (status.go), nil when none;
	// lastWait holds, under waitMu, each slot's latest waiting record.
	status   *statusLine
	every    time.Duration // its refresh
	inc      uint32        // the incarnation running
	waitMu   sync.Mutex
	lastWait map[int]record.Waiting
	gens     generations // in-place recoveries (elastic.go)
	losses   *lossCount  // --max-losses (losses.go)
	started  time.Time
	// sessions are the ssh sessions of the incarnation running, one per
	// remote host (session.go).
	sessions []*session
	envOnce  sync.Once
	env      []string // the launcher's environment (environ)
}

type waitReply struct {
	rank int
	w    record.Waiting
}

func (l *launcher) say(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.lines {
		if m == msg {
			return
		}
	}
	l.lines = append(l.lines, msg)
	if l.out.trace != nil {
		l.out.trace.launcherEvent(msg, nil, nil)
	}
	l.out.mu.Lock()
	fmt.Fprintf(l.o.Stderr, "sperli: %s\n", msg)
	l.out.mu.Unlock()
}

// sayLost says once per rank that it was lost, and why: the first rank to
// report it (the lost rank's own end, or a peer's H1611) gives the reason.
func (l *launcher) sayLost(rank int, why string) {
	l.mu.Lock()
	said := l.lost[rank]
	if l.lost == nil {
		l.lost = map[int]bool{}
	}
	l.lost[rank] = true
	if !said {
		if l.lostWhy == nil {
			l.lostWhy = map[int]string{}
		}
		l.lostWhy[rank] = why
	}
	l.mu.Unlock()
	if !said {
		l.say("rank %d lost: %s", rank, why)
		slot, ok := l.gens.slotOf(rank)
		if !ok {
			slot = rank
		}
		l.losses.add(slot, rank, why)
	}
}

// lossName names a lost slot for the --max-losses line by the newest
// rank it served that the launcher knows (rank: the one known when the
// loss was counted).
func (l *launcher) lossName(slot, rank int) string {
	if r := l.gens.rankOf(slot); r >= 0 {
		rank = r
	}
	return l.lossWho(slot, rank)
}

// lossWho names a lost slot for the --max-losses line: "rank 2", or
// with spares "rank 2 (slot 5)" and "slot 9 (a spare)".
func (l *launcher) lossWho(slot, rank int) string {
	switch {
	case l.o.Spares == 0 && rank >= 0:
		return fmt.Sprintf("rank %d", rank)
	case rank >= 0:
		return fmt.Sprintf("rank %d (slot %d)", rank, slot)
	}
	return fmt.Sprintf("slot %d (a spare)", slot)
}

func (l *launcher) run(ctx context.Context) int {
	o := l.o
	if o.Program == "" {
		l.say("run: missing PROGRAM")
		return 2
	}
	jobID, pl, code := l.placement()
	if code != 0 {
		return code
	}
	o = l.o // a job directory sets -n and the checkpoint directory
	if code := l.checkOptions(); code != 0 {
		return code
	}
	star := strings.HasSuffix(o.Program, ".star")
	infos := make([]lineInfo, o.N+o.Spares)
	for r := range infos {
		infos[r] = lineInfo{host: pl.Lines[r].Host}
	}
	if err := preflight(o, infos, star); err != nil {
		l.say("%v", err)
		return 2
	}
	var err error
	if l.o.Self == "" {
		if l.o.Self, err = os.Executable(); err != nil {
			l.say("cannot find the sperli binary: %v", err)
			return 1
		}
	}
	id := jobID
	if id == nil {
		if id, err = job.NewIdentity(); err != nil {
			l.say("%v", err)
			return 1
		}
		if o.CheckpointDir != "" {
			dir := o.CheckpointDir
			if !filepath.IsAbs(dir) && o.Wdir != "" {
				dir = filepath.Join(o.Wdir, dir) // relative to the ranks' working directory
			}
			if note := newJobNote(dir, id.ID); note != "" {
				l.say("%s", note)
			}
		}
	}
	failures := os.Getenv(FailureEnv)
	if _, err := job.ParseFailures(failures); err != nil {
		l.say("%s: %v", FailureEnv, err)
		return 2
	}
	local := make([]string, o.N+o.Spares)
	for r := range local {
		local[r] = pl.Lines[r].Host
	}
	if err := checkMachine(sizeFlag(o.N, o.Spares), shapeOf(local, star, o.OutputDir != "")); err != nil {
		l.say("%v", err)
		return 2
	}
	if note := oversubscribed(local); note != "" {
		l.say("%s", note)
	}
	if o.SilenceMS == 0 {
		l.o.SilenceMS = defaultSilence(local, machineCPUs())
	}
	closeOut, code := l.openOutputs()
	defer closeOut()
	if code != 0 {
		return code
	}
	code = l.restarts(ctx, id, pl, star, failures)
	if l.out.trace != nil {
		if err := l.out.trace.write(); err != nil {
			l.say("%v", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// placement is where the job's slots run: the hosts of a job directory
// (--job, which also gives the job's identity, size and checkpoint
// directory) or the placement of -n and --spares on the host list. A
// non-zero code is the exit status of a launcher that has said why.
func (l *launcher) placement() (*job.Identity, *Placement, int) {
	o := l.o
	if o.JobDir == "" {
		if err := checkSize("", o.N, o.Spares); err != nil {
			l.say("%v", err)
			return nil, nil, 2
		}
		byNode, err := checkMapBy(o.MapBy)
		if err != nil {
			l.say("%v", err)
			return nil, nil, 2
		}
		pl, err := Place(o.N+o.Spares, o.HostsFile, o.DenyFile, byNode)
		if err == nil {
			err = checkDefaultPorts(o.HostsFile, pl.Lines, o.N+o.Spares, false)
		}
		if err != nil {
			l.say("%v", err)
			return nil, nil, ExitCode(err)
		}
		return nil, pl, 0
	}
	if o.HostsFile != "" {
		l.say("--job and --hosts: the hosts of a job directory are its own")
		return nil, nil, 2
	}
	id, lines, ckpt, err := LoadJobDir(o.JobDir, o.N)
	if err != nil {
		l.say("%v", err)
		return nil, nil, ExitCode(err)
	}
	l.o.N = len(lines)
	if o.CheckpointDir == "" {
		l.o.CheckpointDir = ckpt
	}
	pl := &Placement{File: filepath.Join(o.JobDir, "rank-0.job"), Lines: lines}
	if err := hosts.NewRefuser(os.Getenv(hosts.EnvRefused), nil).Check(pl.File, pl.Lines); err != nil {
		l.say("%v", err)
		return nil, nil, ExitCode(err)
	}
	return id, pl, 0
}

// checkOptions checks the options placement does not: 0, or the exit
// status (2) of a launcher that has said which option is wrong.
func (l *launcher) checkOptions() int {
	o := l.o
	switch o.OutputMode {
	case "", "overwrite", "append":
	default:
		l.say("--output-mode %q: want overwrite or append", o.OutputMode)
		return 2
	}
	if o.OutputMode != "" && o.OutputDir == "" {
		l.say("--output-mode %s: goes with --output-dir", o.OutputMode)
		return 2
	}
	if o.SilenceMS != 0 && (o.SilenceMS < job.MinSilenceMS || o.SilenceMS > job.MaxSilenceMS) {
		l.say("--silence %d: want %d to %d ms", o.SilenceMS, job.MinSilenceMS, job.MaxSilenceMS)
		return 2
	}
	if o.JobDir != "" && o.Spares > 0 {
		l.say("--spares with --job: a job directory's spares are its own (sperli job make --spares)")
		return 2
	}
	if o.RestartMax < 0 {
		l.say("--restart-max %d: want 0 or more", o.RestartMax)
		return 2
	}
	if o.MaxLosses < 0 {
		l.say("--max-losses %d: want 1 or more (0 or none: no limit)", o.MaxLosses)
		return 2
	}
	if err := checkStatsMode(o.Stats); err != nil {
		l.say("%v", err)
		return 2
	}
	if o.SSHPort < 0 || o.SSHPort > 65535 {
		l.say("--ssh-port %d: want a port from 1 to 65535", o.SSHPort)
		return 2
	}
	return 0
}

// openOutputs opens what the job writes besides the terminal: the
// generation record (--record), the per-rank files (--output-dir) and the
// trace (--trace). close closes the record; a non-zero code is the exit
// status of a launcher that has said why.
func (l *launcher) openOutputs() (close func(), code int) {
	o := l.o
	close = func() {}
	if o.Record != "" {
		f, err := os.OpenFile(o.Record, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o644)
		if err != nil {
			l.say("--record %s: %v", o.Record, unwrapPath(err))
			return close, 2
		}
		close = func() { f.Close() }
		l.gens.record = f
	}
	if o.OutputDir != "" {
		if err := l.openFiles(); err != nil {
			l.say("%v", err)
			return close, 2
		}
	}
	if o.Trace != "" {
		var err error
		if l.out.trace, err = openTrace(o.Trace, &l.out.memUsed); err != nil {
			l.say("%v", err)
			return close, 2
		}
	}
	return close, 0
}

// FailureEnv is the test-only failure schedule of SPEC §9.5, read by the
// launcher and put in every job description (so it reaches remote ranks).
const FailureEnv = "SPERLI_TEST_FAILURE_SCHEDULE"

// restarts runs incarnation after incarnation (SPEC §9.5): when a rank is
// lost and --checkpoint-dir is set, the job starts again with incarnation
// + 1 and fresh tokens, every lost rank on the next unused host line (or
// where it was when none is left), at most --restart-max times.
func (l *launcher) restarts(ctx context.Context, id *job.Identity, pl *Placement, star bool, failures string) int {
	o := l.o
	lines := append([]hosts.Line(nil), pl.Lines[:o.N+o.Spares]...)
	unused := o.N + o.Spares
	used := 0 // restarts made
	for inc := uint32(0); ; inc++ {
		l.mu.Lock()
		// Each incarnation says its own losses and restarts, even when
		// they read as those of an earlier one (the same rank lost twice).
		l.lost, l.lostWhy, l.stopping, l.lines, l.pending, l.endedSeen = nil, nil, false, nil, nil, nil
		l.out.ending.Store(false)
		l.mu.Unlock()
		l.losses.nextIncarnation()
		code, procs, interrupted := l.incarnation(ctx, id, lines, star, inc, failures)
		if l.losses.isReached() && !interrupted && code == record.ExitLost {
			// The last loss both ended the incarnation and reached
			// --max-losses: no restart.
			if line := l.losses.line(); line != "" {
				l.say("%s", line)
			}
			interrupted = true
		}
		late := !interrupted && code == record.ExitLost && l.pastDeadline()
		again := code == record.ExitLost && o.CheckpointDir != "" && ctx.Err() == nil && !interrupted && !late && used < o.RestartMax
		// An abandoned incarnation is marked with its last generation
		// (in-place recoveries may have made more than its first); the
		// output of one after a restart begins with its generation.
		l.showOutput(procs, uint32(max(int(inc), l.gens.last())), again, used > 0)
		if o.Stats != "" && !again {
			l.out.mu.Lock()
			writeStats(l.o.Stderr, o.Stats, statsReport(procs, l.gens.lostSight()), isTerminal(l.o.Stderr))
			l.out.mu.Unlock()
		}
		for _, e := range l.out.lostErrs {
			l.say("%s", e)
		}
		l.out.lostErrs = nil
		if code == record.ExitFail && !interrupted {
			l.mu.Lock()
			lost := maps.Clone(l.lost)
			l.mu.Unlock()
			if cause := failureCause(procs, mustGetwd(), lost); cause != "" {
				l.say("%s", cause)
			}
		}
		if code == record.ExitLost && !interrupted && o.CheckpointDir == "" {
			// The last line names the cause (docs/starlark.md §7).
			l.say("%s", l.lossCause(procs, ""))
		}
		if code != record.ExitLost || o.CheckpointDir == "" || ctx.Err() != nil || interrupted {
			return code
		}
		if late {
			// The deadline bounds the whole job, restarts included
			// (SPEC §9.5, F446 step 10): none begins after it.
			l.say("--timeout %v passed: no restart", l.o.Timeout)
			return record.ExitFail
		}
		lost := l.lostRanks()
		if !again {
			l.say("%s", l.lossCause(procs, fmt.Sprintf(" and no restart left (%d of %d used)", used, o.RestartMax)))
			return code
		}
		for _, r := range lost {
			if unused < len(pl.Lines) {
				lines[r] = pl.Lines[unused]
				unused++
				l.say("rank %d restarts on %s (%s)", r, lines[r].Host, lineName(pl.File, lines[r]))
			} else {
				l.say("rank %d restarts where it was, on %s: no unused host line is left", r, lines[r].Host)
			}
		}
		if g := uint32(l.gens.last()); g > inc {
			inc = g // generations made in place count too (SPEC §10.1)
		}
		used++
		l.say("restart %d of %d: incarnation %d", used, o.RestartMax, inc+1)
	}
}

// lossCause is the last line of a job that ended by a loss: "rank 1 lost:
// killed by signal 9 (SIGKILL); ranks 0, 2 ended by it (H1611)", with
// more after the lost ranks ("and no restart left (3 of 3 used)").
func (l *launcher) lossCause(procs []*rankProc, more string) string {
	lost := l.lostRanks()
	l.mu.Lock()
	var whys []string
	same := true
	for _, r := range lost {
		whys = append(whys, l.lostWhy[r])
		same = same && l.lostWhy[r] == l.lostWhy[lost[0]]
	}
	l.mu.Unlock()
	var line string
	switch {
	case len(lost) == 0:
		line = "the job lost a rank" + more
	case same:
		line = fmt.Sprintf("%s lost%s: %s", ranksWord(lost), more, whys[0])
	default:
		parts := make([]string, len(lost))
		for i, r := range lost {
			parts[i] = fmt.Sprintf("rank %d: %s", r, whys[i])
		}
		line = fmt.Sprintf("%s lost%s: %s", ranksWord(lost), more, strings.Join(parts, "; "))
	}
	var by []int
	cs := map[string]bool{}
	for _, p := range procs {
		if p == nil || p.status == nil || !slices.Contains(lost, p.status.CauseRank) {
			continue
		}
		if p.status.Code == codes.PeerLost.String() || p.status.Code == codes.JobEnded.String() {
			by = append(by, p.rank)
			cs[p.status.Code] = true
		}
	}
	if len(by) > 0 {
		var names []string
		for c := range cs {
			names = append(names, c)
		}
		sort.Strings(names)
		seer := "rank"
		if l.o.Spares > 0 {
			seer = "slot"
		}
		word := seer + " " + joinInts(by)
		if len(by) > 1 {
			word = seer + "s " + joinInts(by)
		}
		line += fmt.Sprintf("; %s ended by it (%s)", word, strings.Join(names, ", "))
	}
	return line
}

func (l *launcher) lostRanks() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int
	for r := range l.lost {
		out = append(out, r)
	}
	sort.Ints(out)
	return out
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	if len(s) == 0 {
		return "?"
	}
	return strings.Join(s, ", ")
}

func lineName(file string, l hosts.Line) string {
	if file == "" || l.Line == 0 {
		return "the default host list"
	}
	return fmt.Sprintf("%s:%d", file, l.Line)
}

// incarnation starts every rank of one incarnation and waits for them; it
// returns the exit status, the ranks and whether it was interrupted.
func (l *launcher) incarnation(ctx context.Context, id *job.Identity, lines []hosts.Line, star bool, inc uint32, failures string) (int, []*rankProc, bool) {
	o := l.o
	l.inc = inc
	n := o.N + o.Spares
	table, listeners, ok := l.hostTable(lines)
	defer closeFiles(listeners)
	if !ok {
		return 1, nil, false
	}
	join := time.Duration(o.JoinMS) * time.Millisecond
	if join == 0 {
		join = joinWindow(listeners, machineCPUs())
	}
	spec := job.Spec{
		Size: o.N, Spares: o.Spares, Incarnation: inc, Hosts: table, Runs: job.Compact(table), SilenceMS: o.SilenceMS, JoinMS: int(join / time.Millisecond),
		Launched: true, CheckpointDir: o.CheckpointDir, Failures: failures, Trace: l.out.trace != nil,
		Expires: time.Now().Add(join + 5*time.Minute),
		// One PROGRAM and one argument list in every slot: the slots
		// compare their programs (docs/protocol.md §3.1.1).
		OneProgram: true,
	}
	// The working directory and the program go to remote hosts as
	// absolute paths: a relative one would resolve in the remote home.
	wdir := o.Wdir
	if wdir == "" {
		wdir = mustGetwd()
	} else if !filepath.IsAbs(wdir) {
		wdir = filepath.Join(mustGetwd(), wdir)
	}
	progAbs := o.Program
	if !filepath.IsAbs(progAbs) {
		progAbs = filepath.Join(mustGetwd(), progAbs)
	}
	if star {
		// A .star program is read by every rank: each checks the file
		// it read against the launcher's before it joins.
		d, err := job.FileProgramDigest(progAbs, o.Args)
		if err != nil {
			l.say("program %s: %v", o.Program, err)
			return 1, nil, false
		}
		spec.Program = job.DigestHex(d[:])
	}
	hostNames := make([]string, n)
	for r := range hostNames {
		hostNames[r] = table[r].Host
	}
	localRank, localSize := localRanks(hostNames)
	procs := make([]*rankProc, n)
	for r := range procs {
		procs[r] = l.newProc(r, hostNames[r], listeners[r] == nil, inc)
	}
	if err := l.openSessions(procs); err != nil {
		l.say("%v", err)
		l.endSessions()
		return 1, nil, false
	}
	// Every process first, then every description: a rank waits for its
	// description before it does anything, so the ranks started first do
	// not take the processors from the launcher while it starts the
	// others, and all begin their join together.
	errs := eachRank(procs, func(p *rankProc) error {
		r := p.rank
		env := rankEnv(r, n, localRank[r], localSize[r], o.Env)
		return l.spawn(p, rankArgv(o, star, !p.remote, wdir, progAbs), env, wdir, listeners[r])
	})
	closeFiles(listeners)
	for r, err := range errs {
		if err != nil {
			procs[r] = nil
		}
	}
	err := firstErr(errs)
	if err == nil {
		err = firstErr(eachRank(procs, func(p *rankProc) error {
			j, err := id.Describe(spec, p.rank)
			if err == nil {
				l.describe(p, j)
			}
			return err
		}))
	}
	if err != nil {
		// Nothing of the job is left: what started is killed, and waited for.
		l.say("%v", err)
		l.stopAll(procs)
		awaitEnds(procs, 10*time.Second)
		l.endSessions()
		return 1, procs, false
	}
	l.gens.start(id.ID, inc, o.N, o.Spares, procs)
	code, procs, interrupted := l.wait(ctx, procs)
	l.endSessions()
	l.gens.flushFirst()
	return code, procs, interrupted
}

// openSessions starts one ssh session for every remote host of procs
// (SPEC §18), the host being known by its name without case or trailing
// dot, and gives each remote rank its session.
func (l *launcher) openSessions(procs []*rankProc) error {
	l.sessions = nil
	byHost := map[string]*session{}
	count := map[string]int{}
	for _, p := range procs {
		if p.remote {
			count[machineOf(p.host)]++
		}
	}
	for _, p := range procs {
		if !p.remote {
			continue
		}
		m := machineOf(p.host)
		s := byHost[m]
		if s == nil {
			var err error
			if s, err = l.openSession(p.host, p.rank, count[m]); err != nil {
				return err
			}
			byHost[m] = s
			l.sessions = append(l.sessions, s)
		}
		p.sess = s
	}
	return nil
}

// endSessions ends the incarnation's sessions and waits for them.
func (l *launcher) endSessions() {
	for _, s := range l.sessions {
		s.end()
	}
	l.sessions = nil
}

// hostTable is the host table of an incarnation on lines: a local rank's
// port is that of a socket bound here (its file in listeners, handed to
// the rank: no port race), a remote rank's that of its host line. ok is
// false, and the launcher has said why, when a socket cannot be bound.
func (l *launcher) hostTable(lines []hosts.Line) (table []job.Host, listeners []*os.File, ok bool) {
	n := l.o.N + l.o.Spares
	table = make([]job.Host, n)
	listeners = make([]*os.File, n)
	for r := 0; r < n; {
		line := lines[r]
		if !hosts.IsLocal(line.Host) {
			table[r] = job.Host{Host: line.Host, Port: hosts.RankPort(line, r)}
			r++
			continue
		}
		// The local ranks of one address that follow each other listen at
		// consecutive ports when such a block is free: their descriptions
		// then say where each listens in one run (job.Run, SPEC §18).
		end := r + 1
		for end < n && lines[end].Host == line.Host {
			end++
		}
		block, err := listenBlock(hosts.ListenHost(line.Host), end-r)
		if err != nil {
			l.say("rank %d: cannot listen on %s: %v", r, line.Host, err)
			return table, listeners, false
		}
		for i, f := range block {
			listeners[r+i] = f.file
			table[r+i] = job.Host{Host: line.Host, Port: f.port}
		}
		r = end
	}
	return table, listeners, true
}

type boundPort struct {
	file *os.File
	port int
}

// listenBlock binds k listening sockets at addr: at k consecutive ports
// below the kernel's ephemeral range when it finds such a block free
// (a few random tries), else each at a port the kernel chooses. The
// launcher binds and keeps them, so two jobs never collide on one.
func listenBlock(addr string, k int) ([]boundPort, error) {
	const lo, hi = 10000, 32768 // below the ephemeral ports of outgoing connections
	if k > 1 && k < hi-lo {
		for try := 0; try < 16; try++ {
			base := lo + rand.IntN(hi-lo-k)
			if out, ok := bindRange(addr, base, k); ok {
				return out, nil
			}
		}
	}
	out := make([]boundPort, 0, k)
	for i := 0; i < k; i++ {
		f, port, err := bindOne(addr, 0)
		if err != nil {
			closeBound(out)
			return nil, err
		}
		out = append(out, boundPort{f, port})
	}
	return out, nil
}

// bindRange binds ports base … base+k-1 at addr, or none.
func bindRange(addr string, base, k int) ([]boundPort, bool) {
	out := make([]boundPort, 0, k)
	for p := base; p < base+k; p++ {
		f, port, err := bindOne(addr, p)
		if err != nil {
			closeBound(out)
			return nil, false
		}
		out = append(out, boundPort{f, port})
	}
	return out, true
}

func bindOne(addr string, port int) (*os.File, int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(port)))
	if err != nil {
		return nil, 0, err
	}
	f, err := ln.(*net.TCPListener).File()
	ln.Close()
	if err != nil {
		return nil, 0, err
	}
	return f, portOf(ln.Addr()), nil
}

func closeBound(bs []boundPort) {
	for _, b := range bs {
		b.file.Close()
	}
}

// closeFiles closes every file of fs that is set, and forgets it.
func closeFiles(fs []*os.File) {
	for i, f := range fs {
		if f != nil {
			f.Close()
			fs[i] = nil
		}
	}
}

// rankArgv returns the command that starts one rank (SPEC §3). A local
// rank runs `SELF rank [--modules M] PROGRAM.star ARGS...` (PROGRAM made
// absolute: progAbs) or `PROGRAM ARGS...` directly; a remote one, which its
// host's agent starts in the remote home as ssh would, runs the same with
// `--wdir DIR` and the .star PROGRAM as given. A remote executable PROGRAM
// given by a relative path is sent as progAbs: it would resolve in the
// remote home, not in DIR.
func rankArgv(o Options, star, local bool, wdir, progAbs string) []string {
	var argv []string
	if star {
		argv = []string{o.Self, "rank"}
		if o.Modules != "" {
			argv = append(argv, "--modules", o.Modules)
		}
		if !local {
			argv = append(argv, "--wdir", wdir)
			argv = append(argv, o.Program)
		} else {
			argv = append(argv, progAbs)
		}
		return append(argv, o.Args...)
	}
	prog := o.Program
	if local || !filepath.IsAbs(prog) {
		prog = progAbs
	}
	return append([]string{prog}, o.Args...)
}

func mustGetwd() string {
	d, err := os.Getwd()
	if err != nil {
		return "."
	}
	return d
}

func portOf(a net.Addr) int {
	_, p, _ := net.SplitHostPort(a.String())
	n, _ := strconv.Atoi(p)
	return n
}

// pastDeadline reports whether --timeout has passed since the launch.
func (l *launcher) pastDeadline() bool {
	return l.o.Timeout > 0 && time.Since(l.started) >= l.o.Timeout
}

// wait waits for every rank to end. After a rank ends badly the others are
// given the silence limit and a margin to end on their own (they detect it
// themselves), then they are killed; an interrupt kills them at once.
func (l *launcher) wait(ctx context.Context, procs []*rankProc) (int, []*rankProc, bool) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	silence := time.Duration(l.o.SilenceMS) * time.Millisecond
	if silence == 0 {
		silence = job.DefaultSilenceMS * time.Millisecond
	}
	pending := len(procs)
	endedCh := make(chan *rankProc, len(procs))
	for _, p := range procs {
		go func(p *rankProc) { <-p.ended; endedCh <- p }(p)
	}
	var backstop <-chan time.Time
	var timeout <-chan time.Time
	if l.o.Timeout > 0 {
		// The job's one deadline, from its launch: neither an in-place
		// recovery nor a restart moves it (F446 step 10).
		t := time.NewTimer(l.o.Timeout - time.Since(l.started))
		defer t.Stop()
		timeout = t.C
	}
	lossLimit := l.losses.reached()
	defer l.startStatus(procs)()
	replacedCh := l.gens.goneGrew()
	// A loss the job recovers from in place must give a generation: the
	// agreement ends in milliseconds once the detector has spoken, so
	// when none is said within recoveryDeadline of a loss the launcher
	// saw (the agreement stalled: a slot that lives but does not answer),
	// it ends the job as a loss (exit 75; a restart may follow).
	var recovery <-chan time.Time
	recoveryGen := 0
	interrupted, limited := false, false
	code := record.ExitFail // of an interrupted job: 128 + the signal's number for a signal
	for pending > 0 {
		select {
		case p := <-endedCh:
			pending--
			l.onEnd(p, procs, silence, &backstop, &recovery, &recoveryGen)
		case <-replacedCh:
			l.endReplaced(procs)
			if recovery != nil && l.gens.last() > recoveryGen {
				recovery = nil // recovered
			}
		case <-recovery:
			recovery = nil
			if l.gens.last() == recoveryGen && !l.stopping {
				l.say("generation %d: no generation followed the loss within %v (the live slots did not agree on one): ending the job", recoveryGen+1, recoveryDeadline(silence))
				l.stopAll(procs)
			}
		case <-backstop:
			for _, p := range procs {
				if !isEnded(p) {
					l.say("rank %d did not end after the job failed; killed", p.rank)
				}
			}
			l.stopAll(procs)
			backstop = nil
		case <-lossLimit:
			lossLimit = nil
			if !interrupted && !l.stopping {
				// Said once every process has ended (below): a spare
				// that took a rank at the last moment is named by it.
				limited = true
				code = record.ExitLost
				interrupted = true
				l.stopAll(procs)
			}
		case <-timeout:
			if !interrupted {
				l.say("--timeout %v passed: ending every rank", l.o.Timeout)
				l.reportWaiting(procs, endedCh, &pending)
			}
			interrupted = true
			l.stopAll(procs)
		case s := <-sigs:
			if !interrupted {
				l.say("%v: ending every rank", s)
				if n, ok := s.(syscall.Signal); ok {
					code = 128 + int(n)
				}
				if time.Since(l.started) > time.Second {
					l.reportWaiting(procs, endedCh, &pending)
				}
			}
			interrupted = true
			l.stopAll(procs)
		case <-ctx.Done():
			interrupted = true
			l.stopAll(procs)
		}
	}
	for _, m := range l.gens.unsaidLosses() {
		l.say("%s", m)
	}
	if limited {
		// Asked only when said here: line() says it once, and
		// restarts says it when the loss also ended the incarnation.
		if line := l.losses.line(); line != "" {
			l.say("%s", line)
		}
	}
	if interrupted {
		return code, procs, true
	}
	return l.outcome(procs), procs, false
}

// startStatus starts the --live status line's loop over procs, when it is
// on; the function it returns stops it and clears the line.
func (l *launcher) startStatus(procs []*rankProc) (stop func()) {
	if l.status == nil {
		return func() {}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		l.statusLoop(procs, l.inc, l.every, quit)
	}()
	return func() { close(quit); <-done; l.status.clear() }
}

// onEnd takes the end of rank p's process while wait waits: a bad end
// that the job does not recover from arms the backstop (the others get
// the silence limit and a margin to end on their own), one it recovers
// from in place arms the recovery deadline.
func (l *launcher) onEnd(p *rankProc, procs []*rankProc, silence time.Duration, backstop, recovery *<-chan time.Time, recoveryGen *int) {
	l.ended(p)
	l.tellCrashed(p, procs)
	if p.status != nil && p.status.Code == codes.ProgramMismatch.String() && !l.stopping {
		// The slots run different programs or loss policies: nothing
		// of the job is to run on (docs/protocol.md §3.1.1).
		l.stopAll(procs)
	}
	if !p.state.Success() && !p.killed {
		l.gens.badEnd()
	}
	l.endReplaced(procs)
	if !p.state.Success() && !p.killed && *backstop == nil && !l.gens.recovers(p) && !l.gens.leftBehind(p.rank) {
		*backstop = time.After(silence + 3*time.Second)
	}
	if *recovery == nil && !p.killed && l.gens.recovers(p) && l.gens.inPlace() {
		*recovery, *recoveryGen = time.After(recoveryDeadline(silence)), l.gens.last()
	}
}

// recoveryDeadline is how long a loss recovered in place may take to give
// a generation: twice the silence limit (a loss during the agreement is
// detected within one) and ten seconds for the agreement itself, which
// takes milliseconds.
func recoveryDeadline(silence time.Duration) time.Duration { return 2*silence + 10*time.Second }

// endReplaced ends the processes of slots that were lost and replaced in
// place once nothing else of the job runs: a slot stopped past the silence
// limit (SIGSTOP, a hung host) is a zombie the others have left; it would
// keep the launcher waiting for ever.
func (l *launcher) endReplaced(procs []*rankProc) {
	var left []*rankProc
	for _, p := range procs {
		if p != nil && !isEnded(p) && !p.killed {
			if !l.gens.replaced(p.rank) {
				return // a live slot still runs
			}
			left = append(left, p)
		}
	}
	for _, p := range left {
		l.say("slot %d was replaced and did not end; killed", p.rank)
		p.killed = true
		p.stdin.Close()
		p.kill()
	}
}

func isEnded(p *rankProc) bool {
	select {
	case <-p.ended:
		return true
	default:
		return false
	}
}

// ended reads a rank's status record and says at once what is worth saying.
// A loss is said once, with one cause whatever the order the processes
// are seen to end in: the lost process's own end when the launcher sees it
// (killed by a signal, its ssh failing), else what a survivor saw, said
// when the lost process has ended too (pendingLoss).
func (l *launcher) ended(p *rankProc) {
	ws, _ := p.state.Sys().(syscall.WaitStatus)
	if p.trace != nil {
		l.out.trace.processEnded(p.trace, p.procID(), endWhy(p.state))
	}
	defer l.gens.procEnded(p)
	defer l.flushLoss(p.rank)
	switch {
	case l.stopping:
		// The launcher is ending the job (an interrupt, or the job had
		// failed): neither a rank's signal nor a peer it saw go is a loss.
	case p.killed:
		// A replaced slot the launcher ended (endReplaced): said there.
	case l.gens.leftBehind(p.rank) && !ws.Signaled():
		// A slot the job declared lost and went on without (a spare or
		// a rank stopped past the silence limit, then continued) that
		// found itself left and ended: its loss was said already, and
		// what it says now of the others is what it saw as a zombie.
	case l.gens.recovers(p) && ws.Signaled():
		// Said with the generation that replaces it (elastic.go).
		l.gens.lostProc(p, signalWhy(ws))
	case l.gens.recovers(p):
		l.gens.lostProc(p, p.gone)
	case ws.Signaled():
		l.sayLost(p.rank, signalWhy(ws))
	case p.status != nil && p.status.Code == codes.PeerLost.String() && p.status.CauseRank >= 0:
		// Processes are slots; with spares a slot is not its rank.
		seer := "rank"
		if l.o.Spares > 0 {
			seer = "slot"
		}
		why := fmt.Sprintf("%s (seen by %s %d)", lossReason(p.status.Msg, p.status.CauseRank), seer, p.rank)
		if own, ok := l.gens.sightOf(p.status.CauseRank); ok {
			why = own // the lost slot's own end, seen already
		} else if l.pendLoss(p.status.CauseRank, why) {
			return
		}
		l.sayLost(p.status.CauseRank, why)
	case p.status == nil && p.gone != "":
		// Its host's session ended before the rank's end was heard (ssh
		// failed: no connection, a refused key; the connection broke;
		// the agent was killed): the rank is lost, said once, whoever
		// says it first.
		l.sayLost(p.rank, p.gone)
	case p.status == nil && !p.state.Success():
		l.say("rank %d on %s ended with exit status %d and no status record", p.rank, p.host, p.state.ExitCode())
	}
}

// pendLoss keeps a survivor's sight of the loss of rank while the process
// of rank's slot has not been seen to end, and reports whether it did: that
// slot's own end, when it comes, says the loss (ended, flushLoss).
func (l *launcher) pendLoss(rank int, why string) bool {
	slot, ok := l.gens.slotOf(rank)
	if !ok {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.endedSeen[slot] || l.lost[rank] {
		return false
	}
	if l.pending == nil {
		l.pending = map[int]pendingLoss{}
	}
	if _, ok := l.pending[slot]; !ok {
		l.pending[slot] = pendingLoss{rank, why}
	}
	return true
}

// pendingLoss is a survivor's sight of a rank's loss (pendLoss).
type pendingLoss struct {
	rank int
	why  string
}

// flushLoss marks slot's process ended and says the loss a survivor saw
// of it: slot's own sight when it had one (a recoverable end, which no
// generation said), else the survivor's.
func (l *launcher) flushLoss(slot int) {
	l.mu.Lock()
	if l.endedSeen == nil {
		l.endedSeen = map[int]bool{}
	}
	l.endedSeen[slot] = true
	pl, ok := l.pending[slot]
	delete(l.pending, slot)
	l.mu.Unlock()
	if ok {
		if own, seen := l.gens.sightOf(pl.rank); seen {
			pl.why = own
		}
		l.sayLost(pl.rank, pl.why)
	}
}

// signalWhy says how a process ended by a signal ended:
// "killed by signal 9 (SIGKILL)".
func signalWhy(ws syscall.WaitStatus) string {
	name := unix.SignalName(ws.Signal())
	if name == "" {
		name = ws.Signal().String()
	}
	return fmt.Sprintf("killed by signal %d (%s)", int(ws.Signal()), name)
}

// endWhy says how a process ended: "exit status 3", or signalWhy's words.
func endWhy(st *exitState) string {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return signalWhy(ws)
	}
	return fmt.Sprintf("exit status %d", st.ExitCode())
}

// lossReason returns the why of an H1611 message, on one line: msg may be
// a whole Starlark traceback around "H1611: rank N lost: why".
func lossReason(msg string, rank int) string {
	if i := strings.LastIndex(msg, codes.PeerLost.String()+": "); i >= 0 {
		msg = msg[i+len(codes.PeerLost.String())+2:]
	}
	msg, _, _ = strings.Cut(msg, "\n")
	msg = strings.TrimPrefix(msg, fmt.Sprintf("rank %d lost: ", rank))
	// "rank 2 (slot 2) lost: …" of a job with spares none of which is left.
	if rest, ok := strings.CutPrefix(msg, fmt.Sprintf("rank %d (slot ", rank)); ok {
		if _, why, ok := strings.Cut(rest, ") lost: "); ok {
			msg = why
		}
	}
	return msg
}

// outcome is the launcher's exit status: 0 when every rank ended with 0; 75
// when a rank was lost; 1 otherwise. A protocol violation that a rank
// found (H1627, H1609) makes it 1 even when other ranks saw the liar's
// connections break as a loss (they may see that before the abort that
// says why): the job failed, and a restart would meet the same peer.
func (l *launcher) outcome(procs []*rankProc) int {
	code, lost, violation := 0, false, false
	for _, p := range procs {
		ws, _ := p.state.Sys().(syscall.WaitStatus)
		if p.status != nil && (p.status.Code == codes.ProtocolViolation.String() || p.status.Code == codes.FrameMalformed.String() || p.status.Code == codes.ProgramMismatch.String()) {
			violation = true
		}
		switch {
		case l.gens.replaced(p.rank):
			// Lost and replaced in place: the job went on without it.
		case ws.Signaled() && !p.killed:
			lost = true
		case p.gone != "" && p.status == nil && !p.killed:
			lost = true // its host's session ended under it
		case p.state.ExitCode() == record.ExitLost:
			lost = true
		case p.state.ExitCode() != 0:
			code = 1
		}
	}
	switch {
	case violation:
		return record.ExitFail
	case lost:
		return record.ExitLost
	}
	return code
}

// stopAll ends every rank still running: its control channel closes, then
// its process group is killed.
func (l *launcher) stopAll(procs []*rankProc) {
	l.stopping = true
	l.out.ending.Store(true)
	for _, p := range procs {
		if p == nil || isEnded(p) {
			continue
		}
		p.stdin.Close()
		p.killed = true
		p.kill()
	}
	for _, s := range l.sessions {
		s.stop()
	}
}

// showOutput shows every rank's output in rank order (unless it was
// shown as it came, or written to --output-dir): for each rank its
// standard output lines on the launcher's standard output, then its
// standard error lines on the launcher's standard error, each prefixed
// "[rank i] " (or "[rank 2 · slot 8] ", roles.go). The output of an
// abandoned generation (the job starts again) is marked on each stream it
// is shown on, and so is the start of the output of the generation after
// it (restarted).
func (l *launcher) showOutput(procs []*rankProc, gen uint32, abandoned, restarted bool) {
	defer func() {
		for _, p := range procs {
			if p != nil {
				p.stdout.release()
				p.stderr.release()
			}
		}
	}()
	mark := fmt.Sprintf("--- generation %d abandoned ---\n", gen)
	switch {
	case l.files != nil:
		if abandoned {
			for _, fs := range l.files {
				fmt.Fprintf(fs[0], "--- generation %d abandoned\n", gen)
				fmt.Fprintf(fs[1], "--- generation %d abandoned\n", gen)
			}
		}
		return
	case l.o.Live:
		if abandoned {
			// The lines were shown already: the mark follows them.
			var out, errs bool
			for _, p := range procs {
				if p != nil {
					out, errs = out || p.stdout.wrote, errs || p.stderr.wrote
				}
			}
			l.out.mu.Lock()
			if out {
				io.WriteString(l.o.Stdout, mark)
			}
			if errs {
				io.WriteString(l.o.Stderr, mark)
			}
			l.out.mu.Unlock()
		}
		return
	}
	l.out.mu.Lock()
	defer l.out.mu.Unlock()
	wo, we := bufio.NewWriter(l.o.Stdout), bufio.NewWriter(l.o.Stderr)
	head := [2]bool{!abandoned && !restarted, !abandoned && !restarted}
	for _, p := range procs {
		if p == nil {
			continue
		}
		for i, s := range []*stream{p.stdout, p.stderr} {
			w := []*bufio.Writer{wo, we}[i]
			if s.all.Len() == 0 {
				continue
			}
			if !head[i] && abandoned {
				fmt.Fprintf(w, "--- generation %d (abandoned) ---\n", gen)
			} else if !head[i] {
				fmt.Fprintf(w, "--- generation %d ---\n", gen)
			}
			head[i] = true
			s.writeAll(w)
			w.Flush()
			if s.all.err != nil {
				_, ro := s.roles.latest()
				l.out.lostErrs = append(l.out.lostErrs, fmt.Sprintf("%s: output lost: %v", label(l.out.slots, p.rank, ro), s.all.err))
			}
		}
	}
}

// waitReplyTime bounds how long the launcher waits for the ranks' waiting
// records before it ends them.
const waitReplyTime = 2 * time.Second

// reportWaiting asks every running rank what it waits in (the line
// "waiting" on its control channel; runtime/waiting.go) and says it, one
// line per rank, before the job is ended: `rank 1: recv(source 0, tag 7)
// for 5.0 s`. A rank that ends meanwhile is taken from endedCh and
// counted in *pending.
func (l *launcher) reportWaiting(procs []*rankProc, endedCh chan *rankProc, pending *int) {
	for {
		select {
		case <-l.replies: // stale answers
			continue
		default:
		}
		break
	}
	asked := map[int]bool{}
	for _, p := range procs {
		if p != nil && !isEnded(p) {
			if _, err := io.WriteString(p.stdin, "waiting\n"); err == nil {
				asked[p.rank] = true
			}
		}
	}
	got := map[int]record.Waiting{}
	deadline := time.NewTimer(waitReplyTime)
	defer deadline.Stop()
	for len(got) < len(asked) {
		select {
		case r := <-l.replies:
			if asked[r.rank] {
				got[r.rank] = r.w
			}
			continue
		case p := <-endedCh:
			*pending--
			l.ended(p)
			delete(asked, p.rank)
			continue
		case <-deadline.C:
		}
		break
	}
	l.say("where each rank waits:")
	for _, p := range procs {
		if p == nil {
			continue
		}
		var what string
		w, answered := got[p.rank]
		switch {
		case answered && w.Call != "":
			what = fmt.Sprintf("%s for %.1f s", w.Call, float64(w.MS)/1000)
		case answered:
			what = "in no Sperli call (computing)"
		case isEnded(p):
			what = "ended: " + endWhy(p.state)
		default:
			what = "no answer (not a Sperli rank, or it does not read its control channel)"
		}
		l.say("  rank %d: %s", p.rank, what)
	}
}

// joinWindow is the join window of a job whose local ranks have the
// listeners given (nil for a remote rank) on a machine of cpus
// processors: 30 s (SPEC §4.2), and where the ranks outnumber the
// processors, 100 ms more for each rank a processor must start beyond
// one: a thousand rank processes on two processors take tens of seconds
// only to start (about 60 ms of processor time each, measured:
// docs/scale.md), and the ranks started first must not give up on the
// last before these have even read their descriptions.
func joinWindow(listeners []*os.File, cpus int) time.Duration {
	local := 0
	for _, ln := range listeners {
		if ln != nil {
			local++
		}
	}
	w := job.DefaultJoinMS * time.Millisecond
	if cpus > 0 && local > cpus {
		w += time.Duration(local-cpus) * 100 * time.Millisecond / time.Duration(cpus)
	}
	return min(w, time.Hour)
}

// defaultSilence is the silence limit of a job whose --silence is not
// given, with its slots on hosts: 5 s (SPEC §7), and where the local ranks
// outnumber the processors 125 to one or more, 40 ms a rank per
// processor: a process among hundreds of runnable ones may wait seconds
// for a processor while the others start, and a starved rank is not a
// lost one (measured: a 1,024-rank job on two processors lost ranks to a
// 5 s limit while it started, and now and then to a 10 s one;
// docs/scale.md). Heartbeats, a fifth of the limit apart, are then fewer
// too.
func defaultSilence(hostsOf []string, cpus int) int {
	n := 0
	for _, h := range hostsOf {
		if hosts.IsLocal(h) {
			n++
		}
	}
	ms := job.DefaultSilenceMS
	if cpus > 0 {
		ms = max(ms, 40*n/cpus)
	}
	return min(ms, job.MaxSilenceMS)
}
