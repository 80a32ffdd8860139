package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"sperli/codes"
	"sperli/job"
	"sperli/launch"
	"sperli/runtime"
	"sperli/starlib"
	"sperli/wire"
)

// Version is the release of this binary.
const Version = "0.1.0"

// exitError carries an exit status out of a command.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func doMain(args []string) int {
	root := newRoot()
	root.SetArgs(args)
	err := root.Execute()
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	}
	fmt.Fprintf(os.Stderr, "sperli: %v\n", err)
	return 2
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "sperli",
		Short: "Sperli runs message-passing jobs over mutual TLS",
		Example: `  sperli run -n 4 scripts/examples/sum.star      # 4 ranks on this machine
  sperli run --hosts hosts.txt -n 8 prog.star     # ranks over ssh, one per host line
  sperli run prog.star                            # no job: comm is None
  sperli codes H1611                              # what a code means, what to do
  sperli completion bash > /etc/bash_completion.d/sperli`,
		Version:       versionLine(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("{{.Version}}\n")
	// --version without cobra's -v: -v means one thing, sperli run's
	// --verbose (as mpirun's).
	root.Flags().Bool("version", false, "print the version (as sperli version)")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		if c == root && strings.Contains(err.Error(), "'v' in -v") {
			return fmt.Errorf("%v (-v is sperli run's --verbose; the version is sperli --version)", err)
		}
		return err
	})
	root.AddCommand(newRun(), newRank(), newJob(), newBench(), newCodes(), newVersion())
	root.AddCommand(newBenchRanks()...)
	root.AddCommand(newMan(), newTrace(), newSpawn())
	root.InitDefaultCompletionCmd()
	root.InitDefaultHelpCmd()
	for _, c := range root.Commands() {
		switch c.Name() {
		case "completion":
			c.Example = `  sperli completion bash > ~/.local/share/bash-completion/completions/sperli
  sperli completion zsh > "${fpath[1]}/_sperli"
  sperli completion fish > ~/.config/fish/completions/sperli.fish`
			for _, sh := range c.Commands() {
				sh.Example = completionExamples[sh.Name()]
			}
		case "help":
			c.Example = `  sperli help run          # the same as sperli run --help
  sperli help job make`
		}
	}
	return root
}

// completionExamples are the examples of `sperli completion SHELL --help`.
var completionExamples = map[string]string{
	"bash": `  source <(sperli completion bash)      # in this shell
  sperli completion bash > ~/.local/share/bash-completion/completions/sperli`,
	"zsh": `  source <(sperli completion zsh)       # in this shell
  sperli completion zsh > "${fpath[1]}/_sperli"`,
	"fish": `  sperli completion fish | source       # in this shell
  sperli completion fish > ~/.config/fish/completions/sperli.fish`,
	"powershell": `  sperli completion powershell | Out-String | Invoke-Expression`,
}

func splitModules(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	for _, d := range strings.Split(s, ":") {
		if d != "" {
			out = append(out, d)
		}
	}
	return out
}

func newRun() *cobra.Command {
	var o launch.Options
	var np int
	var exports []string
	cmd := &cobra.Command{
		Use:   "run [flags] PROGRAM [ARGS...]",
		Short: "Launch a job of -n ranks, or run a .star file on this machine without -n",
		Long: `Launch a job: -n ranks of PROGRAM, each on a line of the host list.
PROGRAM ending in .star is a rank program run by "sperli rank" in every rank;
any other PROGRAM is an executable that reads its job description from the
first line of its standard input. Everything after PROGRAM belongs to it.
Without -n, a .star PROGRAM runs on this machine with no job (comm is None).`,
		Example: `  sperli run -n 4 prog.star --steps 5          # the program gets ["--steps", "5"]
  sperli run --np 4 ./gosum                      # an executable rank (Go, C), mpirun's --np
  sperli run -n 3 --live prog.star               # each line as it comes
  sperli run -n 4 --stats pi.star                # where the time went, per rank
  sperli run -n 2 --timeout 30s ring.star        # a hang ends and says where each rank waits
  sperli run -n 3 --output-dir out prog.star     # out/rank-i.out, out/rank-i.err
  sperli run -n 3 -x OMP_NUM_THREADS=1 -x PATH ./solver
  sperli run -n 4 --checkpoint-dir ckpt stencil.star   # restarts from checkpoints
  sperli run -n 8 --spares 2 --checkpoint-dir ckpt --record gens.jsonl stencil.star   # a lost rank replaced in place
  sperli run --job job/ stencil.star             # a "sperli job make" job, resumed from its checkpoints
  sperli run --hosts hosts.txt --ssh-port 22 -n 8 prog.star
  sperli run prog.star                           # no -n: no job, comm is None`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Program, o.Args = args[0], args[1:]
			if cmd.Flags().Changed("np") {
				if cmd.Flags().Changed("n") && np != o.N {
					return usageErr(cmd, "run: -n %d and --np %d disagree", o.N, np)
				}
				o.N = np
			}
			if cmd.Flags().Changed("timeout") && o.Timeout <= 0 {
				return usageErr(cmd, "--timeout %v: want a positive duration (90s, 10m); leave it out for no timeout", o.Timeout)
			}
			if cmd.Flags().Changed("status-every") && o.StatusEvery < 10*time.Millisecond {
				return usageErr(cmd, "--status-every %v: want 10ms or more", o.StatusEvery)
			}
			env, err := launch.ParseExports(exports)
			if err != nil {
				return usageErr(cmd, "%v", err)
			}
			o.Env = env
			if !cmd.Flags().Changed("n") && !cmd.Flags().Changed("np") && o.JobDir == "" {
				if !strings.HasSuffix(o.Program, ".star") {
					return usageErr(cmd, "run: an executable PROGRAM needs -n")
				}
				for _, f := range []string{"trace", "status-every"} {
					if cmd.Flags().Changed(f) {
						return usageErr(cmd, "--%s: goes with a job (-n N); without -n the program runs alone", f)
					}
				}
				return runAlone(o)
			}
			o.Stdout, o.Stderr = os.Stdout, os.Stderr
			o.Color = launch.UseColor(os.Stdout)
			o.CheckStar = starlib.Check
			if code := launch.Run(context.Background(), o); code != 0 {
				return &exitError{code}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.SetInterspersed(false)
	f.IntVarP(&o.N, "n", "n", 0, "number of ranks")
	f.StringVar(&o.HostsFile, "hosts", "", "host list: one host a line, optionally a port and slots=N (or HOST:N)")
	f.StringVar(&o.MapBy, "map-by", "slot", "slot: fill a host line's slots before the next line; node: deal ranks round-robin over the lines")
	f.StringVar(&o.DenyFile, "deny-hosts", "", "more refused host names, one a line")
	f.IntVar(&o.SilenceMS, "silence", 0, "silence limit in ms before a peer is declared lost (default 5000; 40 ms a local rank per processor where that is more)")
	f.StringVar(&o.Modules, "modules", "", "load path for Starlark modules, directories separated by ':'")
	f.StringVar(&o.Wdir, "wdir", "", "the ranks' working directory (default: this one)")
	f.StringVar(&o.CheckpointDir, "checkpoint-dir", "", "checkpoint directory; turns on restarts")
	f.IntVar(&o.RestartMax, "restart-max", 3, "most restarts with --checkpoint-dir")
	f.IntVar(&o.Spares, "spares", 0, "warm spare slots: a lost rank's place is taken in place, without relaunching the others")
	f.IntVar(&o.MaxLosses, "max-losses", 0, "end the job (exit 75, no restart) when its K-th loss happens, counted over in-place recoveries and restarts (default: no limit)")
	f.StringVar(&o.Record, "record", "", "append each generation's layout to this file, one JSON line each")
	f.BoolVar(&o.Live, "live", false, "show each output line as it comes (whole lines), not rank by rank at the end")
	f.StringVar(&o.OutputDir, "output-dir", "", "write DIR/rank-<i>.out and rank-<i>.err instead of showing the output")
	f.StringVar(&o.OutputMode, "output-mode", "", "with --output-dir: overwrite (the default: each file starts empty) or append (to what earlier jobs wrote)")
	f.BoolVarP(&o.Verbose, "verbose", "v", false, "also show the H1612 errors of the ranks a failure ended")
	f.IntVar(&np, "np", 0, "number of ranks (as -n; mpirun's spelling)")
	f.StringArrayVarP(&exports, "export", "x", nil, "set NAME=VALUE, or pass NAME on, in every rank's environment, remote ranks too (repeatable)")
	f.IntVar(&o.SSHPort, "ssh-port", launch.DefaultSSHPort, "the port ssh dials on remote hosts")
	f.StringVar(&o.JobDir, "job", "", "reuse the job identity of a \"sperli job make\" directory (its hosts, certificates, key and checkpoint directory), to resume its checkpoints")
	f.StringVar(&o.Stats, "stats", "", "at the end, a table per rank of where the time went (--stats=json: one JSON object), on stderr")
	f.Lookup("stats").NoOptDefVal = "table"
	f.StringVar(&o.Trace, "trace", "", "write a timeline of every rank's calls, waits and recoveries to this file (Trace Event Format: Perfetto, chrome://tracing, speedscope; sperli trace FILE draws it as SVG)")
	f.DurationVar(&o.StatusEvery, "status-every", 0, "a status line (ranks running, generation, the slowest rank's call, bytes sent) refreshed this often: in place on a terminal, else a plain line each time (default with --live on a terminal: 500ms)")
	f.DurationVar(&o.Timeout, "timeout", 0, "end the job after this long (a Go duration: 90s, 10m), saying which call each rank waits in; exit 1")
	return cmd
}

func usageErr(cmd *cobra.Command, format string, args ...any) error {
	fmt.Fprintf(os.Stderr, "sperli: "+format+"\n", args...)
	return &exitError{2}
}

// runAlone runs a .star file on this machine, with no job.
func runAlone(o launch.Options) error {
	if err := launch.CheckProgram(o.Program, true); err != nil {
		fmt.Fprintf(os.Stderr, "sperli: %v\n", err)
		return &exitError{2}
	}
	if err := starlib.Check(o.Program, splitModules(o.Modules)); err != nil {
		fmt.Fprintf(os.Stderr, "sperli: %v\n", err)
		return &exitError{2}
	}
	err := starlib.Run(&starlib.Program{
		File: o.Program, Args: o.Args, Modules: splitModules(o.Modules), CacheDir: starlib.DefaultCacheDir(),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return &exitError{1}
	}
	return nil
}

// rankGC sets the collector of a rank process: GOGC=400 unless GOGC is set.
// A rank is a short-lived process with a small heap that allocates in
// bursts (a join's 31 handshakes, large messages): at the default, Go
// collects at every 4 MB, several times during a join (measured: joining
// 32 ranks took 10-15% less CPU). An idle rank's memory stays small
// (docs/benchmarks.md).
func rankGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	limitMemory()
}

func newRank() *cobra.Command {
	var modules, wdir string
	cmd := &cobra.Command{
		Use:   "rank [--modules D:D] [--wdir DIR] PROGRAM.star [ARGS...]",
		Short: "Run a rank program inside a job (reads the job description from stdin)",
		Example: `  sperli rank prog.star < rank-1.job          # a rank of a "sperli job make" job, by hand
  srun sh -c 'sperli rank prog.star < job/rank-$SLURM_PROCID.job'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rankGC()
			if wdir != "" {
				if err := os.Chdir(wdir); err != nil {
					fmt.Fprintf(os.Stderr, "sperli rank: --wdir: %v\n", err)
					return &exitError{2}
				}
			}
			stop := profileRank()
			code := runRank(args[0], args[1:], splitModules(modules))
			stop()
			if code != 0 {
				return &exitError{code}
			}
			return nil
		},
	}
	cmd.Flags().SetInterspersed(false)
	cmd.Flags().StringVar(&modules, "modules", "", "load path for Starlark modules, directories separated by ':'")
	cmd.Flags().StringVar(&wdir, "wdir", "", "change to this directory first")
	return cmd
}

func runRank(prog string, args, modules []string) int {
	j, err := job.Read(os.Stdin)
	if err == nil {
		err = starProgram(j, prog, args)
	}
	if err != nil {
		return runtime.Exit(nil, err)
	}
	ctx := context.Background()
	// Run calls the program again in every generation after an in-place
	// recovery (SPEC §10.2): main() runs again and resume() rolls back.
	c, err := runtime.Run(ctx, j, func(ctx context.Context, c *runtime.Comm) error {
		return starlib.Run(&starlib.Program{
			File: prog, Args: args, Modules: modules, CacheDir: starlib.DefaultCacheDir(), Comm: c, Context: ctx,
		})
	})
	if c == nil {
		if j.Launched {
			return runtime.Exit(nil, err)
		}
		fmt.Fprintln(os.Stderr, err)
		return runtime.ExitStatus(err)
	}
	return runtime.Exit(c, err)
}

// starProgram gives j the program digest of a Starlark rank: the bytes
// of its file and its arguments (docs/protocol.md §3.1.1), when the job
// says every slot runs one program. With the launcher's digest (Program)
// it is checked before the join: a rank whose file differs from the one
// the launcher read ends with H1628 before any slot can compute.
func starProgram(j *job.Job, prog string, args []string) error {
	if !j.OneProgram {
		return nil
	}
	d, err := job.FileProgramDigest(prog, args)
	if err != nil {
		return codes.Wrap(codes.ProgramMismatch, err, "slot %d: the program digest cannot be made: %v", j.Rank, err)
	}
	if j.Program != "" && job.DigestHex(d[:]) != j.Program {
		return &codes.Error{Code: codes.ProgramMismatch, Op: "join", Rank: -1, Msg: fmt.Sprintf(
			"slot %d runs another program or arguments than the launcher started: %s and its arguments give the digest %x, the launcher's is %s",
			j.Rank, prog, d[:], j.Program)}
	}
	j.ProgramDigest = d[:]
	return nil
}

func newJob() *cobra.Command {
	job := &cobra.Command{Use: "job", Short: "Job identities for ranks started by hand or by another launcher",
		Example: `  sperli job make -n 3 --hosts hosts.txt --out job/
  sperli rank prog.star < job/rank-0.job`}
	var o launch.MakeOptions
	var k launch.KubeOptions
	var kube bool
	mk := &cobra.Command{
		Use:   "make -n N [--hosts FILE] [--checkpoint-dir DIR] [--expires D] --out DIR\n  sperli job make --kubernetes --image IMAGE -n N [--spares S] [--name NAME] --out DIR PROGRAM [-- ARGS...]",
		Short: "Write one job description per rank (rank-<i>.job, mode 0600), or a Kubernetes job.yaml",
		Example: `  sperli job make -n 3 --out job/              # ranks at 127.0.0.1:21400+i
  sperli job make -n 3 --hosts hosts.txt --checkpoint-dir ckpt --expires 72h --out job/
  sperli job make -n 4 --spares 1 --checkpoint-dir ckpt --out job/   # rank-4.job is the spare
  sperli job make --kubernetes --image sperli:1 -n 4 --out k8s/ /app/prog.star`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if kube {
				if len(args) == 0 {
					fmt.Fprintln(os.Stderr, "sperli: job make --kubernetes: PROGRAM is required (its path in the image)")
					return &exitError{2}
				}
				k.Program, k.Args = args[0], args[1:]
				path, err := launch.MakeKube(o, k)
				if err != nil {
					fmt.Fprintf(os.Stderr, "sperli: %v\n", err)
					return &exitError{launch.ExitCode(err)}
				}
				fmt.Println(path)
				return nil
			}
			if len(args) > 0 || k.Image != "" || k.Name != "" {
				fmt.Fprintln(os.Stderr, "sperli: job make: PROGRAM, --image and --name go with --kubernetes")
				return &exitError{2}
			}
			o.Spares = k.Spares
			files, err := launch.MakeJob(o)
			if err != nil {
				fmt.Fprintf(os.Stderr, "sperli: %v\n", err)
				return &exitError{launch.ExitCode(err)}
			}
			for _, f := range files {
				fmt.Println(f)
			}
			return nil
		},
	}
	f := mk.Flags()
	f.IntVarP(&o.N, "n", "n", 0, "number of ranks")
	f.StringVar(&o.HostsFile, "hosts", "", "host list: one host a line, optionally a port and slots=N (or HOST:N)")
	f.StringVar(&o.MapBy, "map-by", "slot", "slot: fill a host line's slots before the next line; node: deal ranks round-robin over the lines")
	f.StringVar(&o.DenyFile, "deny-hosts", "", "more refused host names, one a line")
	f.StringVar(&o.CheckpointDir, "checkpoint-dir", "", "checkpoint directory written into every description")
	f.IntVar(&o.SilenceMS, "silence", 0, "silence limit in ms (default 5000)")
	f.DurationVar(&o.Expires, "expires", launch.DefaultExpires, "lifetime of the join tokens")
	f.StringVar(&o.Out, "out", "", "directory to write the descriptions to")
	f.BoolVar(&kube, "kubernetes", false, "write OUT/job.yaml: a headless Service, a Secret with the descriptions and an Indexed Job")
	f.StringVar(&k.Image, "image", "", "with --kubernetes: the container image (sperli and PROGRAM inside)")
	f.IntVar(&k.Spares, "spares", 0, "warm spare slots N … N+S-1 (rank-N.job …; with --kubernetes, pods N … N+S-1): a lost rank's place is taken in place")
	f.StringVar(&k.Name, "name", "", "with --kubernetes: the Job's and Service's name (default sperli-<8 hex of the job id>)")
	job.AddCommand(mk)
	return job
}

func newVersion() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version",
		Example: "  sperli version\n  sperli --version",
		Args:    cobra.NoArgs,
		Run: func(cmd *cobra.Command, args []string) {
			fmt.Println(versionLine())
		},
	}
}

// versionLine is what `sperli version` and `sperli --version` print.
func versionLine() string {
	gov := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		gov = bi.GoVersion
	}
	return fmt.Sprintf("sperli %s (protocol %d, job description %d, %s)", Version, wire.Version, job.Version, gov)
}
