package runtime_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sperli/codes"
	"sperli/runtime"
)

// ckptJob is a job whose ranks each keep checkpoints in a directory of
// their own (as on separate hosts), and that can be started again as the
// next incarnation of the same job.
type ckptJob struct {
	*fixture
	dirs []string
}

func newCkptJob(t *testing.T, n int) *ckptJob {
	f := newFixture(t, n)
	base := t.TempDir()
	cj := &ckptJob{fixture: f}
	for r := 0; r < n; r++ {
		cj.dirs = append(cj.dirs, filepath.Join(base, fmt.Sprintf("host%d", r)))
	}
	return cj
}

// start joins the current incarnation.
func (cj *ckptJob) start(ctx context.Context) []*runtime.Comm {
	cj.t.Helper()
	n := cj.spec.Size
	comms := make([]*runtime.Comm, n)
	errs := make([]error, n)
	done := make(chan int, n)
	for r := 0; r < n; r++ {
		j := cj.job(r)
		j.CheckpointDir = cj.dirs[r]
		go func(r int) { comms[r], errs[r] = runtime.Init(ctx, j); done <- r }(r)
	}
	for i := 0; i < n; i++ {
		<-done
	}
	for r, err := range errs {
		if err != nil {
			cj.t.Fatalf("Init(rank %d) = %v", r, err)
		}
	}
	cj.t.Cleanup(func() {
		for _, c := range comms {
			c.Close()
		}
	})
	return comms
}

// next makes the next incarnation: fresh listeners and tokens.
func (cj *ckptJob) next() {
	cj.t.Helper()
	cj.spec.Incarnation++
	for r := range cj.lns {
		ln := cj.listen()
		cj.lns[r] = ln
		cj.spec.Hosts[r].Port = ln.Addr().(*net.TCPAddr).Port
	}
}

func (cj *ckptJob) epochDir(r int, e int) string {
	return filepath.Join(cj.dirs[r], cj.id.ID, fmt.Sprint(e))
}

func stateOf(rank, step int) []byte {
	return []byte(strings.Repeat(fmt.Sprintf("rank %d step %d;", rank, step), 100+rank))
}

// checkpoints takes steps checkpoints on every rank.
func checkpoints(t *testing.T, ctx context.Context, comms []*runtime.Comm, from, to int) {
	t.Helper()
	errs := each(comms, func(c *runtime.Comm) error {
		for s := from; s <= to; s++ {
			if err := c.Checkpoint(ctx, stateOf(c.Rank(), s)); err != nil {
				return fmt.Errorf("checkpoint %d: %w", s, err)
			}
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// resumeAll resumes every rank and returns states and errors.
func resumeAll(ctx context.Context, comms []*runtime.Comm) ([][]byte, []bool, []error) {
	n := len(comms)
	states, oks := make([][]byte, n), make([]bool, n)
	errs := each(comms, func(c *runtime.Comm) error {
		s, ok, err := c.Resume(ctx)
		states[c.Rank()], oks[c.Rank()] = s, ok
		return err
	})
	return states, oks, errs
}

// listFiles lists every file under dir, relative.
func listFiles(t *testing.T, dir string) []string {
	var out []string
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

// TestCheckpointResume: a fresh start resumes nothing; three checkpoints
// leave the last two epochs and no temporary file; the next incarnation
// resumes the newest state on every rank and goes on numbering from it.
func TestCheckpointResume(t *testing.T) {
	ctx := testCtx(t)
	cj := newCkptJob(t, 3)
	comms := cj.start(ctx)
	_, oks, errs := resumeAll(ctx, comms)
	for r := range comms {
		if errs[r] != nil || oks[r] {
			t.Fatalf("rank %d: fresh Resume = ok %v, %v; want none", r, oks[r], errs[r])
		}
	}
	checkpoints(t, ctx, comms, 1, 3)
	for r := range comms {
		files := listFiles(t, filepath.Join(cj.dirs[r], cj.id.ID))
		prev := (r + 2) % 3
		want := []string{
			fmt.Sprintf("2/COMMIT"), fmt.Sprintf("2/rank-%d.ckpt", r), fmt.Sprintf("2/rank-%d.ckpt.buddy", prev),
			fmt.Sprintf("3/COMMIT"), fmt.Sprintf("3/rank-%d.ckpt", r), fmt.Sprintf("3/rank-%d.ckpt.buddy", prev),
		}
		if strings.Join(files, " ") != strings.Join(sorted(want), " ") {
			t.Errorf("rank %d files = %v, want %v", r, files, sorted(want))
		}
	}
	for _, c := range comms {
		c.Close()
	}
	cj.next()
	comms = cj.start(ctx)
	states, oks, errs := resumeAll(ctx, comms)
	for r := range comms {
		if errs[r] != nil || !oks[r] || !bytes.Equal(states[r], stateOf(r, 3)) {
			t.Fatalf("rank %d: Resume = %d bytes ok %v, %v; want epoch 3's state", r, len(states[r]), oks[r], errs[r])
		}
		if comms[r].Epoch() != 3 {
			t.Errorf("rank %d: Epoch() = %d after resume, want 3", r, comms[r].Epoch())
		}
	}
	checkpoints(t, ctx, comms, 4, 4)
	if _, err := os.Stat(cj.epochDir(0, 4) + "/COMMIT"); err != nil {
		t.Errorf("epoch after the resumed 3 is not 4: %v", err)
	}
	if _, err := os.Stat(cj.epochDir(0, 2)); !os.IsNotExist(err) {
		t.Errorf("epoch 2 still there after epoch 4: %v", err)
	}
}

func sorted(s []string) []string {
	out := append([]string{}, s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// damage takes two checkpoints, applies hurt to the files, and resumes in
// the next incarnation.
func damage(t *testing.T, n int, hurt func(cj *ckptJob)) ([][]byte, []bool, []error) {
	ctx := testCtx(t)
	cj := newCkptJob(t, n)
	comms := cj.start(ctx)
	checkpoints(t, ctx, comms, 1, 2)
	for _, c := range comms {
		c.Close()
	}
	hurt(cj)
	cj.next()
	return resumeAll(ctx, cj.start(ctx))
}

func flip(t *testing.T, path string, at int) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if at < 0 {
		at += len(b)
	}
	b[at] ^= 0xff
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func truncate(t *testing.T, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(path, b[:len(b)/2], 0o600)
}

func wantAll(t *testing.T, what string, errs []error, want codes.Code) {
	t.Helper()
	first := ""
	for r, err := range errs {
		wantCode(t, fmt.Sprintf("%s: rank %d", what, r), err, want)
		if first == "" {
			first = err.Error()
		} else if err.Error() != first {
			t.Errorf("%s: rank %d says %q, rank 0 %q; want the same outcome", what, r, err, first)
		}
	}
}

func wantStates(t *testing.T, what string, states [][]byte, oks []bool, errs []error, step int) {
	t.Helper()
	for r := range states {
		if errs[r] != nil || !oks[r] || !bytes.Equal(states[r], stateOf(r, step)) {
			t.Fatalf("%s: rank %d: Resume = %d bytes, ok %v, %v; want step %d's state", what, r, len(states[r]), oks[r], errs[r], step)
		}
	}
}

func TestResumeDamage(t *testing.T) {
	own := func(cj *ckptJob, r int) string {
		return filepath.Join(cj.epochDir(r, 2), fmt.Sprintf("rank-%d.ckpt", r))
	}
	buddy := func(cj *ckptJob, r int) string {
		n := cj.spec.Size
		return filepath.Join(cj.epochDir((r+1)%n, 2), fmt.Sprintf("rank-%d.ckpt.buddy", r))
	}
	t.Run("own file truncated: from the buddy", func(t *testing.T) {
		var cj0 *ckptJob
		states, oks, errs := damage(t, 3, func(cj *ckptJob) { cj0 = cj; truncate(t, own(cj, 1)) })
		wantStates(t, "truncated", states, oks, errs, 2)
		if b, _ := os.ReadFile(own(cj0, 1)); !bytes.HasSuffix(b, stateOf(1, 2)) {
			t.Errorf("rank 1's own file was not written back from the buddy copy")
		}
	})
	t.Run("own file changed: from the buddy", func(t *testing.T) {
		states, oks, errs := damage(t, 3, func(cj *ckptJob) { flip(t, own(cj, 2), -1) })
		wantStates(t, "changed", states, oks, errs, 2)
	})
	t.Run("own file missing: from the buddy", func(t *testing.T) {
		states, oks, errs := damage(t, 3, func(cj *ckptJob) { os.Remove(own(cj, 0)) })
		wantStates(t, "missing", states, oks, errs, 2)
	})
	t.Run("both damaged: H1621", func(t *testing.T) {
		_, _, errs := damage(t, 3, func(cj *ckptJob) { flip(t, own(cj, 1), -1); truncate(t, buddy(cj, 1)) })
		wantAll(t, "both damaged", errs, codes.CheckpointDamaged)
	})
	t.Run("both missing: H1619", func(t *testing.T) {
		_, _, errs := damage(t, 3, func(cj *ckptJob) { os.Remove(own(cj, 1)); os.Remove(buddy(cj, 1)) })
		wantAll(t, "both missing", errs, codes.NoEpoch)
	})
	t.Run("header names another rank: H1622", func(t *testing.T) {
		_, _, errs := damage(t, 3, func(cj *ckptJob) {
			for _, p := range []string{own(cj, 1), buddy(cj, 1)} {
				flip(t, p, 51) // the low byte of the rank field
			}
		})
		wantAll(t, "header", errs, codes.CheckpointHeader)
	})
	t.Run("newest COMMIT signature changed: the epoch before", func(t *testing.T) {
		states, oks, errs := damage(t, 3, func(cj *ckptJob) {
			for r := 0; r < 3; r++ {
				flip(t, filepath.Join(cj.epochDir(r, 2), "COMMIT"), -5)
			}
		})
		wantStates(t, "commit of 2 broken", states, oks, errs, 1)
	})
	t.Run("no COMMIT verifies: H1620", func(t *testing.T) {
		_, _, errs := damage(t, 3, func(cj *ckptJob) {
			for r := 0; r < 3; r++ {
				for _, e := range []int{1, 2} {
					flip(t, filepath.Join(cj.epochDir(r, e), "COMMIT"), -5)
				}
			}
		})
		wantAll(t, "no commit", errs, codes.CommitSignature)
	})
	t.Run("a rank without the newest COMMIT", func(t *testing.T) {
		states, oks, errs := damage(t, 3, func(cj *ckptJob) { os.Remove(filepath.Join(cj.epochDir(2, 2), "COMMIT")) })
		wantStates(t, "one COMMIT missing", states, oks, errs, 2)
	})
}

// TestResumeOtherSize: a job of another size resuming the same identity's
// checkpoints is H1623 on every rank.
func TestResumeOtherSize(t *testing.T) {
	ctx := testCtx(t)
	cj := newCkptJob(t, 3)
	comms := cj.start(ctx)
	checkpoints(t, ctx, comms, 1, 1)
	for _, c := range comms {
		c.Close()
	}
	small := &ckptJob{fixture: newFixture(t, 2), dirs: cj.dirs[:2]}
	small.id = cj.id // the same job, now of 2 ranks
	_, _, errs := resumeAll(ctx, small.start(ctx))
	wantAll(t, "resume with 2 of 3", errs, codes.ResumeSize)
}

// TestCheckpointOpenOperation: an open receive on one rank is H1624 on
// every rank, and the job goes on.
func TestCheckpointOpenOperation(t *testing.T) {
	ctx := testCtx(t)
	cj := newCkptJob(t, 3)
	comms := cj.start(ctx)
	op, err := comms[1].StartRecv(0, 5)
	if err != nil {
		t.Fatal(err)
	}
	errs := each(comms, func(c *runtime.Comm) error { return c.Checkpoint(ctx, []byte("x")) })
	wantAll(t, "checkpoint with an open recv", errs, codes.CheckpointOpen)
	comms[0].Send(ctx, 1, 5, []byte("done"))
	if _, err := comms[1].FinishRecv(ctx, op); err != nil {
		t.Fatal(err)
	}
	checkpoints(t, ctx, comms, 1, 1)
}

// TestCheckpointStorageFails: a directory that cannot be written is H1625
// on every rank, with the previous epoch intact and no temporary file.
func TestCheckpointStorageFails(t *testing.T) {
	if os.Geteuid() == 0 {
		// root writes through permission bits: make the epoch path a file.
		t.Log("as root: the epoch directory is blocked by a file")
	}
	ctx := testCtx(t)
	cj := newCkptJob(t, 3)
	comms := cj.start(ctx)
	checkpoints(t, ctx, comms, 1, 1)
	if err := os.WriteFile(cj.epochDir(1, 2), []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	errs := each(comms, func(c *runtime.Comm) error { return c.Checkpoint(ctx, stateOf(c.Rank(), 2)) })
	for r, err := range errs {
		wantCode(t, fmt.Sprintf("rank %d", r), err, codes.CheckpointStorage)
	}
	os.Remove(cj.epochDir(1, 2))
	for r := range comms {
		for _, f := range listFiles(t, cj.dirs[r]) {
			if strings.Contains(f, ".tmp") || strings.HasPrefix(filepath.Base(filepath.Dir(f)), "2") {
				t.Errorf("rank %d: %s left after the failed epoch", r, f)
			}
		}
	}
	for _, c := range comms {
		c.Close()
	}
	cj.next()
	states, oks, errs := resumeAll(ctx, cj.start(ctx))
	wantStates(t, "after the failed epoch", states, oks, errs, 1)
}

// TestCheckpointOneRank: a job of one rank has no buddy.
func TestCheckpointOneRank(t *testing.T) {
	ctx := testCtx(t)
	cj := newCkptJob(t, 1)
	comms := cj.start(ctx)
	checkpoints(t, ctx, comms, 1, 2)
	files := listFiles(t, filepath.Join(cj.dirs[0], cj.id.ID))
	if len(files) != 4 {
		t.Errorf("files = %v, want COMMIT and rank-0.ckpt of epochs 1 and 2", files)
	}
	comms[0].Close()
	cj.next()
	states, oks, errs := resumeAll(ctx, cj.start(ctx))
	wantStates(t, "one rank", states, oks, errs, 2)
}

// TestStaleFrameDropped: a frame of an older incarnation is dropped whole
// and the connection goes on.
func TestStaleFrameDropped(t *testing.T) {
	ctx := testCtx(t)
	f := newFixture(t, 2)
	f.spec.Incarnation = 3
	comms := f.initAll(ctx)
	runtime.InjectForTest(comms[0], 1, 2, 7, []byte("from incarnation 2"))
	if err := comms[0].Send(ctx, 1, 7, []byte("current")); err != nil {
		t.Fatal(err)
	}
	got, err := comms[1].Recv(ctx, 0, 7)
	if err != nil || string(got) != "current" {
		t.Fatalf("Recv = %q, %v; want the current incarnation's message", got, err)
	}
	if n := comms[1].StaleDropped(); n != 1 {
		t.Errorf("StaleDropped = %d, want 1", n)
	}
}
