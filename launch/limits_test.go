package launch

import (
	"reflect"
	"testing"
)

// TestNeedsOf: what a job needs of the launcher's machine, by its shape
// (the figures measured, docs/scale.md).
func TestNeedsOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		j    jobShape
		want needs
	}{
		{"one local star rank", jobShape{local: 1, slots: 1, star: true},
			needs{files: 16 + 5 + 5, tasks: 8 + 5, mem: 2 << 20}},
		{"600 local star ranks", jobShape{local: 600, slots: 600, star: true},
			needs{files: 16 + 3000 + 160, tasks: 8 + 3000, mem: 600 << 21}},
		{"9000 local star ranks", jobShape{local: 9000, slots: 9000, star: true},
			needs{files: 45176, tasks: 45008, mem: 9000 << 21}},
		{"an executable: no memory figure", jobShape{local: 64, slots: 64},
			needs{files: 16 + 320 + 160, tasks: 8 + 128}},
		{"--output-dir: two files a slot, remote ones too", jobShape{local: 4, slots: 10, remoteHosts: 2, star: true, outputDir: true},
			needs{files: 16 + 20 + 20 + 8 + 20, tasks: 8 + 2 + 20, mem: 4 << 21}},
		{"remote ranks only: one session a host", jobShape{slots: 4096, remoteHosts: 16, star: true},
			needs{files: 16 + 64, tasks: 8 + 16}},
	} {
		if got := needsOf(tc.j); got != tc.want {
			t.Errorf("%s: needsOf(%+v) = %+v, want %+v", tc.name, tc.j, got, tc.want)
		}
	}
}

// TestCheckLimits: a need beyond a limit refuses the job with one line
// naming -n, the need, the limit and what to do; a soft limit of open
// files below the need is raised to the hard one when that suffices.
func TestCheckLimits(t *testing.T) {
	roomy := limits{files: 1024, filesMax: 1 << 20, tasks: noLimit, taskMax: 4 << 20, tasksNow: 100, taskMaxName: "kernel.pid_max", memAvail: 24 << 30}
	with := func(f func(*limits)) limits { l := roomy; f(&l); return l }
	for _, tc := range []struct {
		name      string
		need      needs
		lim       limits
		wantRaise uint64
		wantErr   string
	}{
		{"fits", needs{files: 1000, tasks: 500, mem: 1 << 30}, roomy, 0, ""},
		{"raised to the hard limit", needs{files: 5296, tasks: 5128, mem: 2 << 30}, roomy, 1 << 20, ""},
		{"the hard limit is too low",
			needs{files: 45176}, with(func(l *limits) { l.files, l.filesMax = 1024, 4096 }), 0,
			"-n 9000: the launcher needs about 45,176 open files, its limit is 4,096 (the hard limit, ulimit -Hn): raise it or run fewer ranks on this machine"},
		{"soft and hard lowered",
			needs{files: 3176}, with(func(l *limits) { l.files, l.filesMax = 256, 256 }), 0,
			"-n 9000: the launcher needs about 3,176 open files, its limit is 256 (the hard limit, ulimit -Hn): raise it or run fewer ranks on this machine"},
		{"unlimited files", needs{files: 1 << 30}, with(func(l *limits) { l.files, l.filesMax = noLimit, noLimit }), 0, ""},
		{"ulimit -u",
			needs{files: 500, tasks: 508}, with(func(l *limits) { l.tasks = 400 }), 0,
			"-n 9000: the job needs about 508 processes and threads on this machine, the user's limit is 400 (ulimit -u): raise it or run fewer ranks on this machine"},
		{"ulimit -u just enough", needs{files: 500, tasks: 400}, with(func(l *limits) { l.tasks = 400 }), 0, ""},
		{"kernel.pid_max",
			needs{files: 500, tasks: 45008}, with(func(l *limits) { l.taskMax, l.tasksNow = 32768, 96 }), 0,
			"-n 9000: the job needs about 45,008 processes and threads on this machine, it has room for 32,672 more (kernel.pid_max 32,768, 96 running): raise kernel.pid_max or run fewer ranks on this machine"},
		{"the machine's tasks not known", needs{files: 500, tasks: 45008}, with(func(l *limits) { l.taskMax = 0 }), 0, ""},
		{"memory",
			needs{files: 500, tasks: 500, mem: 20000 << 21}, with(func(l *limits) { l.memAvail = 23 << 30 }), 0,
			"-n 9000: the ranks on this machine need at least 40,000 MiB of memory (2 MiB each, idle), 23,552 MiB is available (MemAvailable): run fewer ranks on this machine"},
		{"1,024 ranks on a 24 GB machine", needs{files: 5296, tasks: 5128, mem: 1024 << 21}, with(func(l *limits) { l.files, l.filesMax = 20000, 20000; l.memAvail = 23 << 30 }), 0, ""},
		{"memory not known", needs{files: 500, mem: 1 << 40}, with(func(l *limits) { l.memAvail = -1 }), 0, ""},
		{"an executable's memory is not checked", needs{files: 500}, with(func(l *limits) { l.memAvail = 0 }), 0, ""},
	} {
		raise, err := checkLimits("-n 9000", tc.need, tc.lim)
		got := ""
		if err != nil {
			got = err.Error()
			if ExitCode(err) != 2 {
				t.Errorf("%s: ExitCode(%v) = %d, want 2", tc.name, err, ExitCode(err))
			}
		}
		if got != tc.wantErr || raise != tc.wantRaise {
			t.Errorf("%s: checkLimits(%+v, %+v) = %d, %q, want %d, %q", tc.name, tc.need, tc.lim, raise, got, tc.wantRaise, tc.wantErr)
		}
	}
}

// TestShapeOf: spares are slots like ranks; a remote machine is counted
// once however its lines spell it.
func TestShapeOf(t *testing.T) {
	got := shapeOf([]string{"127.0.0.1", "localhost", "node1", "NODE1.", "node2", "127.0.0.1"}, true, false)
	want := jobShape{local: 3, slots: 6, remoteHosts: 2, star: true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("shapeOf = %+v, want %+v", got, want)
	}
	if got, want := sizeFlag(600, 0), "-n 600"; got != want {
		t.Errorf("sizeFlag(600, 0) = %q, want %q", got, want)
	}
	if got, want := sizeFlag(600, 4), "-n 600 --spares 4"; got != want {
		t.Errorf("sizeFlag(600, 4) = %q, want %q", got, want)
	}
}

// TestLimitParsers: /proc/loadavg's tasks, /proc/meminfo's MemAvailable,
// and numbers with commas.
func TestLimitParsers(t *testing.T) {
	if n, ok := parseLoadavgTasks("67.30 21.42 7.70 1/96 20335\n"); !ok || n != 96 {
		t.Errorf("parseLoadavgTasks = %d, %v, want 96, true", n, ok)
	}
	for _, bad := range []string{"", "1 2 3", "1 2 3 4 5", "1 2 3 1/x 5"} {
		if n, ok := parseLoadavgTasks(bad); ok {
			t.Errorf("parseLoadavgTasks(%q) = %d, true, want false", bad, n)
		}
	}
	meminfo := "MemTotal:       24683748 kB\nMemFree:        20000000 kB\nMemAvailable:   24459724 kB\n"
	if n, ok := parseMemAvailable(meminfo); !ok || n != 24459724<<10 {
		t.Errorf("parseMemAvailable = %d, %v, want %d, true", n, ok, int64(24459724)<<10)
	}
	for _, bad := range []string{"", "MemTotal: 1 kB\n", "MemAvailable: 12 MB\n", "MemAvailable: x kB\n"} {
		if n, ok := parseMemAvailable(bad); ok {
			t.Errorf("parseMemAvailable(%q) = %d, true, want false", bad, n)
		}
	}
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 45010: "45,010", 1048576: "1,048,576", -1234: "-1,234"} {
		if got := count64(n); got != want {
			t.Errorf("count64(%d) = %q, want %q", n, got, want)
		}
	}
	if got := countU(noLimit); got != "unlimited" {
		t.Errorf("countU(noLimit) = %q, want unlimited", got)
	}
}
