package elastic

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"sperli/pki"
	"sperli/tests/internal/testbin"
)

// diskLog reads a work queue's log file by docs/workqueue.md alone ("The
// log on disk"): the magic, the items' SHA-256, then chunks of a length
// (u32), the records and a signature; a chunk cut short at the end is
// dropped. It returns the items its P records publish. A record may stand
// twice (the first chunk is the whole log when the writer started, and a
// record logged meanwhile follows it too), but an item is published with
// one fence and one result only.
func diskLog(t *testing.T, path string) map[int]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const magic = "SPRLWQ3\x00"
	if len(b) < len(magic)+32 || string(b[:len(magic)]) != magic {
		t.Fatalf("%s: not a work queue's log (%d bytes)", path, len(b))
	}
	pub := map[int]string{} // the fence and SHA-256 of each published item
	for rest := b[len(magic)+32:]; len(rest) >= 4; {
		n := int(binary.BigEndian.Uint32(rest))
		if len(rest) < 4+n+pki.SignatureSize {
			break
		}
		for recs := rest[4 : 4+n]; len(recs) > 0; {
			const head = 1 + 4 + 8 + 4 + 4 + 32 + 4
			if len(recs) < head {
				t.Fatalf("%s: a record cut short inside a whole chunk", path)
			}
			kind, id, size := recs[0], int(binary.BigEndian.Uint32(recs[13:])), int(binary.BigEndian.Uint32(recs[53:]))
			if kind == 'P' {
				key := string(recs[1:13]) + string(recs[21:53])
				if k, ok := pub[id]; ok && k != key {
					t.Fatalf("%s: item %d published twice, with other fences or results", path, id)
				}
				pub[id] = key
			}
			recs = recs[head+size:]
		}
		rest = rest[4+n+pki.SignatureSize:]
	}
	ids := map[int]bool{}
	for id := range pub {
		ids[id] = true
	}
	return ids
}

var taskRE = regexp.MustCompile(`(?m)^\[rank \d+\] task (\d+)$`)

// TestWorkQueueResumeAfterLauncherKilled: a queue whose launcher is
// SIGKILLed goes on when the same command runs again with the same job
// directory: at the start (before any result), mid-run and after the
// queue's end (before results()), with one master and with four (whose
// records rank 0 writes). Each time the ranks end by themselves
// once their launcher is gone, the rerun exits 0 with every item
// published once (the oracle), and no item the log on disk held published
// after the first run is computed again.
func TestWorkQueueResumeAfterLauncherKilled(t *testing.T) {
	prog := filepath.Join(root, "tests", "elastic", "testdata", "wqresume.star")
	const n, ranks = 400, 8
	for _, tc := range []struct{ point, perMaster string }{
		{"start", "64"}, {"mid", "64"}, {"results", "64"},
		{"start", "2"}, {"mid", "2"}, {"results", "2"},
	} {
		point := tc.point
		t.Run(point+", "+tc.perMaster+" a master", func(t *testing.T) {
			work := t.TempDir()
			env := append(slices.Clone(baseEnv), "TMPDIR="+t.TempDir())
			mk := exec.Command(sperli, "job", "make", "-n", fmt.Sprint(ranks), "--checkpoint-dir", "ckpt", "--out", "job")
			mk.Dir, mk.Env = work, env
			if out, err := mk.CombinedOutput(); err != nil {
				t.Fatalf("sperli job make: %v\n%s", err, out)
			}
			launch := func(point string) *testbin.Process {
				cmd := exec.Command(sperli, "run", "--job", "job", "--silence", "1000", prog, fmt.Sprint(n), point, tc.perMaster)
				cmd.Dir, cmd.Env = work, env
				return testbin.Start(t, cmd)
			}
			l := launch(point)
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			held := testbin.Poll(ctx, 20*time.Millisecond, func() bool {
				select {
				case <-l.Done():
					return true
				default:
				}
				for r := 0; r < ranks; r++ {
					if _, err := os.Stat(filepath.Join(work, fmt.Sprintf("hold-%d", r))); err != nil {
						return false
					}
				}
				return true
			})
			select {
			case <-l.Done():
				t.Fatalf("the launcher ended before every rank held at %s\nstdout:\n%s\nstderr:\n%s", point, &l.Stdout, &l.Stderr)
			default:
			}
			if !held {
				t.Fatalf("the ranks did not all hold at %s in time", point)
			}
			// The master's writer writes the log's first chunk on a
			// goroutine of its own as the queue starts.
			var logs []string
			if !testbin.Poll(ctx, 20*time.Millisecond, func() bool {
				logs, _ = filepath.Glob(filepath.Join(work, "ckpt", "*", "queues", "*.wq"))
				return len(logs) == 1
			}) {
				t.Fatalf("%d queue logs under the checkpoint directory, want 1", len(logs))
			}
			if point == "mid" {
				// Mid-run: the writer has put records on disk (it writes
				// every 32); wait for them before the kill.
				if !testbin.Poll(ctx, 20*time.Millisecond, func() bool { return len(diskLog(t, logs[0])) >= 32 }) {
					t.Fatalf("the log on disk never held 32 published items")
				}
			}
			kids := testbin.Children(l.Cmd.Process.Pid)
			if len(kids) != ranks {
				t.Fatalf("the launcher has %d children, want %d ranks", len(kids), ranks)
			}
			l.Cmd.Process.Signal(syscall.SIGKILL)
			<-l.Done()
			if !testbin.Poll(ctx, 20*time.Millisecond, func() bool {
				return !slices.ContainsFunc(kids, testbin.Proc.Alive)
			}) {
				t.Fatalf("ranks still running after their launcher was killed")
			}
			before := diskLog(t, logs[0])
			switch {
			case point == "start" && len(before) != 0:
				t.Fatalf("%d items published on disk before any result", len(before))
			case point == "mid" && (len(before) < 32 || len(before) == n):
				t.Fatalf("%d items published on disk mid-run, want 32 to %d", len(before), n-1)
			case point == "results" && len(before) != n:
				t.Fatalf("%d items published on disk at the queue's end, want %d", len(before), n)
			}
			for r := 0; r < ranks; r++ {
				os.Remove(filepath.Join(work, fmt.Sprintf("hold-%d", r)))
			}
			r := launch("none").Wait(t, timeout)
			if r.Code != 0 {
				t.Fatalf("the rerun: exit %d\n%v", r.Code, r)
			}
			wqOracle(t, r.Stdout, n, 1)
			again := 0
			for _, m := range taskRE.FindAllStringSubmatch(r.Stdout, -1) {
				id, _ := strconv.Atoi(m[1])
				if before[id] {
					t.Errorf("item %d, published on disk before the rerun, was computed again", id)
				}
				again++
			}
			if again < n-len(before) {
				t.Errorf("the rerun computed %d items; %d were not published before it", again, n-len(before))
			}
		})
	}
}

var newJobNoteRE = regexp.MustCompile(`(?m)^sperli: note: --checkpoint-dir ckpt holds the files of job [0-9a-f]{32}; this is a new job \([0-9a-f]{32}\) and resumes none of them: to resume a job, run it again with --job DIR \(sperli job make --checkpoint-dir\)$`)

// TestRerunWithoutJobSaysSo: a second `sperli run --checkpoint-dir`
// without --job is a new job, which resumes nothing of the first (its
// identity is new): the launcher says so in one line, and says nothing
// the first time.
func TestRerunWithoutJobSaysSo(t *testing.T) {
	prog := filepath.Join(root, "tests", "elastic", "testdata", "wq.star")
	work := t.TempDir()
	env := append(slices.Clone(baseEnv), "TMPDIR="+t.TempDir())
	for i := range 2 {
		cmd := exec.Command(sperli, "run", "-n", "2", "--checkpoint-dir", "ckpt", prog, "20", "inplace")
		cmd.Dir, cmd.Env = work, env
		r := testbin.Start(t, cmd).Wait(t, timeout)
		if r.Code != 0 {
			t.Fatalf("run %d: exit %d\n%v", i+1, r.Code, r)
		}
		if said := newJobNoteRE.MatchString(r.Stderr); said != (i == 1) {
			t.Fatalf("run %d: the note said %v, want %v\n%s", i+1, said, i == 1, r.Stderr)
		}
	}
}
