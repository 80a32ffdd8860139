package launch

import (
	"fmt"
	"io"
	"syscall"
)

// tellCrashed tells every rank still running, on its control channel
// ("crashed SLOT"), that p's process ended by a signal (a crash, SIGKILL)
// or with its host's session: the launcher is its parent, so the end is
// certain, and the ranks take it as a loss they saw themselves. A rank
// that died before any other had a link to it (early in the join) is so
// known lost at once, where its neighbours would otherwise wait for it
// until the join window ends. Ends the launcher caused (stopAll, a
// replaced slot) are no crash. Each write goes on a goroutine of its own:
// a stopped rank's full pipe must hold up neither the launcher nor the
// line to the others.
func (l *launcher) tellCrashed(p *rankProc, procs []*rankProc) {
	ws, _ := p.state.Sys().(syscall.WaitStatus)
	if p.killed || (!ws.Signaled() && p.gone == "") {
		return
	}
	line := []byte(fmt.Sprintf("crashed %d\n", p.rank))
	for _, q := range procs {
		if q != nil && q != p && !q.killed && !isEnded(q) {
			go func(w io.Writer) { w.Write(line) }(q.stdin) // one that ended since reads nothing: no matter
		}
	}
}
