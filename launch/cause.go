package launch

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"unicode/utf8"

	"sperli/codes"
)

// failureCause is the launcher's last line for a job that failed (SPEC
// §2): the rank that failed, where and why on one line, and the ranks it
// ended, "rank 1 failed: prog.star:3:5: division by zero; ranks 0, 2, 3
// ended by it (H1612)". Ranks failing with the same message are named
// together; ranks said lost are not failures. It is "" when no rank
// failed on its own (an interrupt, a loss).
func failureCause(procs []*rankProc, wd string, lost map[int]bool) string {
	type failure struct {
		ranks []int
		why   string
	}
	var fails []*failure
	ended := map[int][]int{} // cause rank -> ranks ended by it
	endedCodes := map[string]bool{}
	for _, p := range procs {
		if p == nil || p.state == nil {
			continue
		}
		ws, _ := p.state.Sys().(syscall.WaitStatus)
		st := p.status
		switch {
		case p.state.Success(), p.killed, ws.Signaled(), lost[p.rank]:
			continue
		case st != nil && st.Code == codes.JobEnded.String(),
			// A collective another rank called wrongly: void here too.
			st != nil && st.Code == codes.WrongCollective.String() && st.CauseRank >= 0 && st.CauseRank != p.rank:
			ended[st.CauseRank] = append(ended[st.CauseRank], p.rank)
			endedCodes[st.Code] = true
			continue
		}
		why := fmt.Sprintf("exit status %d", p.state.ExitCode())
		if st != nil && st.Msg != "" {
			why = OneLine(st.Msg, wd)
		}
		var f *failure
		for _, g := range fails {
			if g.why == why {
				f = g
			}
		}
		if f == nil {
			f = &failure{why: why}
			fails = append(fails, f)
		}
		f.ranks = append(f.ranks, p.rank)
	}
	var parts []string
	for _, f := range fails {
		part := fmt.Sprintf("%s failed: %s", ranksWord(f.ranks), f.why)
		var by []int
		if len(fails) == 1 {
			// Every rank ended by another was ended by this failure,
			// whichever rank relayed it.
			for _, rs := range ended {
				by = append(by, rs...)
			}
			slices.Sort(by)
		} else {
			for _, r := range f.ranks {
				by = append(by, ended[r]...)
			}
		}
		if len(by) > 0 {
			var cs []string
			for c := range endedCodes {
				cs = append(cs, c)
			}
			slices.Sort(cs)
			part += fmt.Sprintf("; %s ended by it (%s)", ranksWord(by), strings.Join(cs, ", "))
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}

// ranksWord is "rank 1" or "ranks 0, 2, 3".
func ranksWord(r []int) string {
	if len(r) == 1 {
		return fmt.Sprintf("rank %d", r[0])
	}
	return "ranks " + joinInts(r)
}

// maxWhy bounds the message in the launcher's last line.
const maxWhy = 300

var errorWord = regexp.MustCompile(`^Error( in [^:]+)?: `)

var framePos = regexp.MustCompile(`^\s+(\S.*?:\d+:\d+): in `)

// OneLine makes one line of a rank's error: the last line of a Starlark
// traceback (its "Error: " dropped) after the position of the innermost
// frame, a path under wd made relative.
func OneLine(msg, wd string) string {
	lines := strings.Split(strings.TrimRight(msg, "\n"), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	last = errorWord.ReplaceAllString(last, "")
	if len(last) > maxWhy {
		cut := maxWhy
		for cut > 0 && !utf8.RuneStart(last[cut]) {
			cut--
		}
		last = last[:cut] + "…"
	}
	pos := ""
	for i := len(lines) - 2; i >= 0; i-- {
		if m := framePos.FindStringSubmatch(lines[i]); m != nil {
			pos = m[1]
			break
		}
	}
	rel := func(s string) string {
		if wd != "" && strings.HasPrefix(s, wd+string(filepath.Separator)) {
			return s[len(wd)+1:]
		}
		return s
	}
	if pos == "" {
		return rel(last)
	}
	return rel(pos) + ": " + last
}
