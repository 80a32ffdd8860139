package launch

import (
	"os/exec"
	"strconv"
	"testing"

	"sperli/codes"
	"sperli/record"
)

// exited is a rankProc that ended with exit status st (a real process)
// and the status record code.
func exited(t *testing.T, rank, st int, code string) *rankProc {
	t.Helper()
	cmd := exec.Command("sh", "-c", "exit "+strconv.Itoa(st))
	cmd.Run()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != st {
		t.Fatalf("sh did not exit %d", st)
	}
	p := &rankProc{rank: rank, state: exitOf(cmd.ProcessState)}
	if code != "" {
		p.status = &record.Status{Exit: st, Code: code}
	}
	return p
}

// The launcher's exit status: a protocol violation one rank found wins
// over the loss another saw (the liar's connections breaking as it ended
// before the abort reached that rank): 1, so no restart meets the liar
// again; a loss alone is 75, a failure 1, success 0.
func TestOutcome(t *testing.T) {
	v, fm, lost := codes.ProtocolViolation.String(), codes.FrameMalformed.String(), codes.PeerLost.String()
	for _, tc := range []struct {
		name  string
		procs func() []*rankProc
		want  int
	}{
		{"all 0", func() []*rankProc { return []*rankProc{exited(t, 0, 0, ""), exited(t, 1, 0, "")} }, 0},
		{"a loss", func() []*rankProc { return []*rankProc{exited(t, 0, 75, lost), exited(t, 1, 75, "H1612")} }, 75},
		{"a failure and a loss", func() []*rankProc { return []*rankProc{exited(t, 0, 1, "H1616"), exited(t, 1, 75, lost)} }, 75},
		{"a violation and a loss", func() []*rankProc {
			return []*rankProc{exited(t, 0, 1, v), exited(t, 1, 1, "H1612"), exited(t, 2, 75, lost)}
		}, 1},
		{"a malformed frame and a loss", func() []*rankProc { return []*rankProc{exited(t, 0, 75, lost), exited(t, 1, 1, fm)} }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &launcher{}
			if got := l.outcome(tc.procs()); got != tc.want {
				t.Fatalf("outcome %d, want %d", got, tc.want)
			}
		})
	}
}
