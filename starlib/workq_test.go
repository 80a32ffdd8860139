package starlib_test

import (
	"strings"
	"testing"

	"sperli/codes"
)

// TestWorkQueueProgram: comm.work_queue in a program of three ranks: the
// results and stats are the same on every rank, each item once.
func TestWorkQueueProgram(t *testing.T) {
	file := t.TempDir() + "/wq.star"
	writeFile(t, file, `
def main():
    wq = comm.work_queue("q", ["%d" % i for i in range(30)])
    mine = []
    for task in wq:
        mine.append(task.id)
        wq.done(task, task.data + "!")
    res = wq.results()
    st = wq.stats()
    ok = [res[i] == bytes("%d!" % i) for i in range(30)]
    print(len(res), all(ok), st.published, st.executed, st.duplicates, st.generations, len(mine) > 0 or comm.rank != 0)
`)
	errs, outs := runJob(t, file, 3)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		if got := strings.TrimSpace(outs[r]); got != "30 True 30 30 0 1 True" {
			t.Fatalf("rank %d printed %q", r, got)
		}
	}
}

// TestWorkQueueIterationError: an error in the iteration (here the next
// task asked for with the last one not done, H1616) ends the loop; the
// queue's next call raises it, and sperli.attempt returns it when the
// function makes none; uncaught, it ends the program with its code.
func TestWorkQueueIterationError(t *testing.T) {
	dir := t.TempDir()
	caught := dir + "/caught.star"
	writeFile(t, caught, `
def loop(wq):
    n = 0
    for task in wq:
        n += 1   # no done: the next step is refused
    return n

def main():
    wq = comm.work_queue("q", ["a", "b", "c"])
    r = sperli.attempt(loop, wq)
    d = sperli.attempt(wq.results)
    print(r.ok, r.code, d.ok, d.code)
`)
	errs, outs := runJob(t, caught, 1)
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	if got := strings.TrimSpace(outs[0]); got != "False H1616 False H1616" {
		t.Fatalf("printed %q, want the iteration's H1616 from attempt, then from results", got)
	}
	// The loop's error caught by attempt around the queue's next call
	// is raised once: the program then ends well.
	later := dir + "/later.star"
	writeFile(t, later, `
def main():
    wq = comm.work_queue("q", ["a"])
    for task in wq:
        pass
    d = sperli.attempt(wq.results)
    print(d.ok, d.code)
`)
	errs, outs = runJob(t, later, 1)
	if errs[0] != nil || strings.TrimSpace(outs[0]) != "False H1616" {
		t.Fatalf("error %v, printed %q: want the H1616 from attempt, and no error after", errs[0], outs[0])
	}
	uncaught := dir + "/uncaught.star"
	writeFile(t, uncaught, `
def main():
    wq = comm.work_queue("q", ["a", "b"])
    for task in wq:
        pass
`)
	errs, _ = runJob(t, uncaught, 1)
	if codes.Of(errs[0]) != codes.OutOfRange || !strings.Contains(errs[0].Error(), "is not done") {
		t.Fatalf("error %v, want the iteration's H1616", errs[0])
	}
}
