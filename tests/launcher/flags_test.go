package launcher

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sperli/hosts"
)

// envProgram writes an executable rank that prints the variables SPEC §2
// gives every rank, and FOO and BAR.
func envProgram(t *testing.T, dir string) string {
	return writeFile(t, filepath.Join(dir, "env.sh"), `#!/bin/sh
echo "rank=$SPERLI_RANK size=$SPERLI_SIZE local=$SPERLI_LOCAL_RANK/$SPERLI_LOCAL_SIZE torch=$RANK/$WORLD_SIZE/$LOCAL_RANK/$LOCAL_WORLD_SIZE FOO=$FOO BAR=$BAR"
`, 0o755)
}

// TestRankEnvironment: every rank gets SPERLI_RANK, SPERLI_SIZE,
// SPERLI_LOCAL_RANK and SPERLI_LOCAL_SIZE, torchrun's variables unless
// they are set already, and the -x variables (NAME=VALUE, or NAME passed
// on); --np is -n.
func TestRankEnvironment(t *testing.T) {
	dir := t.TempDir()
	prog := envProgram(t, dir)
	r := sperliRun(t, withEnv("BAR=from launcher"), dir, "run", "--np", "3", "-x", "FOO=f o", "-x", "BAR", prog)
	if r.Code != 0 {
		t.Fatalf("%v", r)
	}
	for rank := 0; rank < 3; rank++ {
		want := fmt.Sprintf("rank=%d size=3 local=%d/3 torch=%d/3/%d/3 FOO=f o BAR=from launcher", rank, rank, rank, rank)
		if got := rankLines(r.Stdout, rank); len(got) != 1 || got[0] != want {
			t.Errorf("rank %d printed %q, want %q", rank, got, want)
		}
	}
	// Set already: torchrun's RANK is left alone, here or by -x.
	r = sperliRun(t, withEnv("RANK=mine"), dir, "run", "-n", "2", "-x", "WORLD_SIZE=9", prog)
	if r.Code != 0 {
		t.Fatalf("%v", r)
	}
	for rank := 0; rank < 2; rank++ {
		want := fmt.Sprintf("rank=%d size=2 local=%d/2 torch=mine/9/%d/2 FOO= BAR=", rank, rank, rank)
		if got := rankLines(r.Stdout, rank); len(got) != 1 || got[0] != want {
			t.Errorf("rank %d printed %q, want %q", rank, got, want)
		}
	}
}

// TestFlagErrors: -x and --np mistakes are usage errors, nothing starts.
func TestFlagErrors(t *testing.T) {
	dir := t.TempDir()
	prog, markers, path := markerProgram(t, dir)
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"-x unset", []string{"run", "-n", "2", "-x", "SPERLI_SURELY_UNSET", prog}, []string{"-x SPERLI_SURELY_UNSET", "not set"}},
		{"-x bad name", []string{"run", "-n", "2", "-x", "1X=y", prog}, []string{"-x 1X=y"}},
		{"-x empty name", []string{"run", "-n", "2", "-x", "=y", prog}, []string{"-x =y"}},
		{"-n and --np disagree", []string{"run", "-n", "2", "--np", "3", prog}, []string{"-n 2", "--np 3"}},
		{"--np 0", []string{"run", "--np", "0", prog}, []string{"-n 0"}},
		{"--ssh-port out of range", []string{"run", "-n", "2", "--ssh-port", "70000", prog}, []string{"--ssh-port 70000"}},
		{"--map-by unknown", []string{"run", "-n", "2", "--map-by", "core", prog}, []string{"--map-by", "core", "slot or node"}},
		{"-n too large", []string{"run", "-n", "2000000", prog}, []string{"-n 2000000", "at most 1048576"}},
		{"-n too large with spares", []string{"run", "-n", "2000000", "--spares", "2", prog}, []string{"-n 2000000", "at most 1048576"}},
		{"--spares too many", []string{"run", "-n", "1048000", "--spares", "600", prog}, []string{"--spares 600", "0 to 576"}},
		{"job make -n too large", []string{"job", "make", "-n", "2000000", "--out", "o"}, []string{"-n 2000000", "at most 1048576"}},
		{"--timeout negative", []string{"run", "-n", "2", "--timeout", "-5s", prog}, []string{"--timeout -5s", "positive"}},
		{"--timeout zero", []string{"run", "-n", "2", "--timeout", "0", prog}, []string{"--timeout 0s", "positive"}},
		{"--output-mode unknown", []string{"run", "-n", "2", "--output-dir", "o", "--output-mode", "keep", prog}, []string{"--output-mode", "keep", "overwrite or append"}},
		{"--output-mode alone", []string{"run", "-n", "2", "--output-mode", "append", prog}, []string{"--output-mode append", "--output-dir"}},
		{"--status-every too short", []string{"run", "-n", "2", "--status-every", "1ms", prog}, []string{"--status-every 1ms", "10ms or more"}},
		{"--trace without a job", []string{"run", "--trace", "t.json", "alone.star"}, []string{"--trace", "-n"}},
		{"--status-every without a job", []string{"run", "--status-every", "1s", "alone.star"}, []string{"--status-every", "-n"}},
		{"sperli trace --from after --to", []string{"trace", "t.json", "--from", "5", "--to", "2"}, []string{"--from 5 --to 2"}},
		{"codes unknown", []string{"codes", "H1700"}, []string{"H1700", "no such code"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sperliRun(t, withEnv(path), dir, tc.args...)
			if r.Code != 2 {
				t.Errorf("sperli %q: exit status %d, want 2\n%v", tc.args, r.Code, r)
			}
			wantOneLine(t, fmt.Sprintf("sperli %q", tc.args), r.Stderr, tc.want...)
			wantNotStarted(t, markers)
		})
	}
}

// TestRemoteCommand: a remote host gets one ssh session, `ssh -p PORT -o
// BatchMode=yes HOST SPERLI spawn` with --ssh-port's port, whatever the
// number of its ranks (SPEC §18); its agent starts them with their
// environment (ssh carries none), in an environment without the
// launcher's variables, as sshd runs a command.
func TestRemoteCommand(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	logs := filepath.Join(dir, "ssh-logs")
	if err := os.Mkdir(logs, 0o755); err != nil {
		t.Fatal(err)
	}
	// An ssh stand-in that logs its words, then runs the command as sshd
	// does: the words after the host joined by blanks, given to sh -c, in
	// an environment without the launcher's variables.
	// Each ssh logs into a file of its own (they run at once).
	writeFile(t, filepath.Join(bin, "ssh"), "#!/bin/sh\nlog='"+logs+"'/ssh.$$\nfor w in \"$@\"; do printf '%s|' \"$w\" >> \"$log\"; done\necho >> \"$log\"\nshift 5\nexec env -i PATH=/usr/bin:/bin sh -c \"$*\"\n", 0o755)
	hostsFile := writeFile(t, filepath.Join(dir, "hosts"), "node1.example slots=2\nnode2.example\n", 0o644)
	prog := envProgram(t, dir)
	r := sperliRun(t, withEnv("PATH="+bin+":"+os.Getenv("PATH")), dir, "run", "-n", "3", "--hosts", hostsFile, "--ssh-port", "2222", "-x", "FOO=a b", prog)
	if r.Code != 0 {
		t.Errorf("exit status %d, want 0\n%v", r.Code, r)
	}
	// The environment reached the "remote" ranks through their agent.
	for rank, local := range []string{"0/2", "1/2", "0/1"} {
		want := fmt.Sprintf("rank=%d size=3 local=%s torch=%d/3/%s FOO=a b BAR=", rank, local, rank, local)
		if got := rankLines(r.Stdout, rank); len(got) != 1 || got[0] != want {
			t.Errorf("remote rank %d printed %q, want %q", rank, got, want)
		}
	}
	files, _ := filepath.Glob(filepath.Join(logs, "ssh.*"))
	var got []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, lines(string(b))...)
	}
	slices.Sort(got)
	want := []string{
		"-p|2222|-o|BatchMode=yes|node1.example|" + sperli + "|spawn|",
		"-p|2222|-o|BatchMode=yes|node2.example|" + sperli + "|spawn|",
	}
	if !slices.Equal(got, want) {
		t.Errorf("ssh started as %q, want one session per host: %q", got, want)
	}
}

// TestOversubscribedNote: more local ranks than processors is said once,
// as a note; as many ranks as processors is said nothing.
func TestOversubscribedNote(t *testing.T) {
	cpus := hosts.CPUs()
	dir := t.TempDir()
	prog := envProgram(t, dir)
	for _, n := range []int{cpus, cpus + 1} {
		r := sperliRun(t, baseEnv, dir, "run", "-n", strconv.Itoa(n), prog)
		if r.Code != 0 {
			t.Fatalf("%v", r)
		}
		notes := strings.Count(r.Stderr, "sperli: note: ")
		want := 0
		if n > cpus {
			want = 1
			if !strings.Contains(r.Stderr, fmt.Sprintf("sperli: note: %d ranks on this machine, which has %d processors", n, cpus)) {
				t.Errorf("-n %d on %d processors: stderr %q, want the note", n, cpus, r.Stderr)
			}
		}
		if notes != want {
			t.Errorf("-n %d on %d processors: %d notes, want %d\n%v", n, cpus, notes, want, r)
		}
	}
}

// TestCommandLineHelp: --version, `codes H1611`, and an example in the
// --help of the commands users type (cmd/sperli's TestEveryHelpHasExamples
// walks the whole command tree).
func TestCommandLineHelp(t *testing.T) {
	dir := t.TempDir()
	r := sperliRun(t, baseEnv, dir, "--version")
	v := sperliRun(t, baseEnv, dir, "version")
	if r.Code != 0 || !regexp.MustCompile(`^sperli \d+\.\d+\.\d+ \(protocol \d+, job description \d+, go[^)]*\)\n$`).MatchString(r.Stdout) || r.Stdout != v.Stdout {
		t.Errorf("sperli --version: %v\nsperli version: %q; want the same version line", r, v.Stdout)
	}
	r = sperliRun(t, baseEnv, dir, "codes", "h1611")
	if r.Code != 0 || !strings.HasPrefix(r.Stdout, "H1611  peer lost: ") || !strings.Contains(r.Stdout, "What to do: ") || !strings.Contains(r.Stdout, "--silence") {
		t.Errorf("sperli codes h1611: %v\nwant the meaning and what to do", r)
	}
	for _, cmd := range [][]string{{}, {"run"}, {"rank"}, {"job"}, {"job", "make"}, {"bench"}, {"codes"}, {"version"}, {"completion"}} {
		r := sperliRun(t, baseEnv, dir, append(cmd, "--help")...)
		if r.Code != 0 || !strings.Contains(r.Stdout, "Examples:\n  ") {
			t.Errorf("sperli %s --help: exit status %d, no examples:\n%s", strings.Join(cmd, " "), r.Code, r.Stdout)
		}
	}
}

// TestCompletion: `sperli completion bash` is a script that, sourced in
// bash, completes sperli's commands and flags (bash-completion's
// _get_comp_words_by_ref, which the script calls, is stood in for by the
// few lines it does, and compopt, which only works inside a completion bash
// itself runs, by nothing); the zsh and fish scripts register sperli's
// completion and ask `sperli __complete` as the bash one does.
func TestCompletion(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Dir(sperli)
	complete := func(line string) []string {
		t.Helper()
		script := `source <(sperli completion bash) || exit 1
_get_comp_words_by_ref() { cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}; words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; }
compopt() { :; }
complete -p sperli || exit 1
read -ra COMP_WORDS <<< "$LINE"
case "$LINE" in *" ") COMP_WORDS+=("");; esac
COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMP_LINE=$LINE; COMP_POINT=${#LINE}
__start_sperli
printf '%s\n' "${COMPREPLY[@]}"
`
		cmd := exec.Command("bash", "-c", script)
		cmd.Dir, cmd.Env = dir, withEnv("PATH="+bin+":"+os.Getenv("PATH"), "LINE="+line)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("bash completion of %q: %v\n%s", line, err, out)
		}
		return lines(string(out))
	}
	for _, tc := range []struct {
		line string
		want []string
	}{
		{"sperli ", []string{"run", "codes", "completion", "job", "man", "version"}},
		{"sperli co", []string{"codes", "completion"}},
		{"sperli run --ti", []string{"--timeout"}},
		{"sperli run --st", []string{"--stats"}},
		{"sperli job m", []string{"make"}},
		{"sperli completion ", []string{"bash", "zsh", "fish"}},
	} {
		got := complete(tc.line)
		var words []string
		for _, l := range got[1:] { // after complete -p's line
			w, _, _ := strings.Cut(l, " ")
			words = append(words, strings.TrimSpace(w))
		}
		if !strings.HasPrefix(got[0], "complete ") || !strings.Contains(got[0], "__start_sperli sperli") {
			t.Errorf("%q: bash has no completion for sperli: %q", tc.line, got)
		}
		for _, w := range tc.want {
			if !slices.Contains(words, w) {
				t.Errorf("%q completes to %q, want %q among them", tc.line, words, w)
			}
		}
		if slices.Contains(words, "bench-rank") {
			t.Errorf("%q offers a hidden command: %q", tc.line, words)
		}
	}
	for sh, want := range map[string][]string{
		"zsh":  {"#compdef sperli", "compdef _sperli sperli", "__complete"},
		"fish": {"complete -c sperli", "__complete"},
	} {
		r := sperliRun(t, baseEnv, dir, "completion", sh)
		for _, w := range want {
			if r.Code != 0 || !strings.Contains(r.Stdout, w) {
				t.Errorf("sperli completion %s: exit status %d, no %q in the script", sh, r.Code, w)
			}
		}
	}
}

// TestHelpAndVersion: `sperli --help` lists every command, man too;
// `--version` prints the version and -v means one thing only, run's
// --verbose: at the top it is an error that says so.
func TestHelpAndVersion(t *testing.T) {
	dir := t.TempDir()
	r := sperliRun(t, withEnv(), dir, "--help")
	if r.Code != 0 {
		t.Fatalf("sperli --help: %v", r)
	}
	for _, cmd := range []string{"run", "rank", "job", "codes", "bench", "man", "version", "completion"} {
		if !regexp.MustCompile(`(?m)^  ` + cmd + ` +\S`).MatchString(r.Stdout) {
			t.Errorf("sperli --help does not list %s:\n%s", cmd, r.Stdout)
		}
	}
	if strings.Contains(r.Stdout, "-v,") {
		t.Errorf("sperli --help shows a -v flag:\n%s", r.Stdout)
	}
	r = sperliRun(t, withEnv(), dir, "--version")
	if r.Code != 0 || !strings.HasPrefix(r.Stdout, "sperli ") {
		t.Errorf("sperli --version: %v", r)
	}
	r = sperliRun(t, withEnv(), dir, "-v")
	if r.Code != 2 {
		t.Errorf("sperli -v: exit status %d, want 2\n%v", r.Code, r)
	}
	wantOneLine(t, "sperli -v", r.Stderr, "-v", "--verbose", "--version")
	r = sperliRun(t, withEnv(), dir, "run", "--help")
	if !strings.Contains(r.Stdout, "-v, --verbose") {
		t.Errorf("sperli run --help does not show -v, --verbose:\n%s", r.Stdout)
	}
}

// TestOneProcessorWhenOversubscribed: ranks that outnumber this machine's
// processors get GOMAXPROCS=1 (docs/scale.md), unless the launcher's
// environment or -x sets it; a rank with a processor of its own keeps the
// Go runtime's default.
func TestOneProcessorWhenOversubscribed(t *testing.T) {
	dir := t.TempDir()
	prog := writeFile(t, filepath.Join(dir, "procs.sh"), "#!/bin/sh\necho \"GOMAXPROCS=${GOMAXPROCS-unset}\"\n", 0o755)
	env := slices.DeleteFunc(slices.Clone(baseEnv), func(kv string) bool { return strings.HasPrefix(kv, "GOMAXPROCS=") })
	many := strconv.Itoa(hosts.CPUs() + 1)
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"more ranks than processors", env, []string{"-n", many}, "1"},
		{"set in the launcher's environment", append(slices.Clone(env), "GOMAXPROCS=5"), []string{"-n", many}, "5"},
		{"set by -x", env, []string{"-n", many, "-x", "GOMAXPROCS=3"}, "3"},
		{"one rank", env, []string{"-n", "1"}, "unset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sperliRun(t, tc.env, dir, append(append([]string{"run"}, tc.args...), prog)...)
			if r.Code != 0 {
				t.Fatalf("%v", r)
			}
			n, _ := strconv.Atoi(tc.args[1])
			for rank := 0; rank < n; rank++ {
				if got := rankLines(r.Stdout, rank); len(got) != 1 || got[0] != "GOMAXPROCS="+tc.want {
					t.Errorf("rank %d printed %q, want GOMAXPROCS=%s", rank, got, tc.want)
				}
			}
		})
	}
}
