package launch

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/lipgloss/table"

	"sperli/record"
)

// StatsMode is --stats: "" (none), "table" or "json".
func checkStatsMode(m string) error {
	switch m {
	case "", "table", "json":
		return nil
	}
	return usage("--stats=%s: want --stats (a table) or --stats=json", m)
}

// rankStat is one rank's line of the --stats report.
type rankStat struct {
	Rank int `json:"rank"`
	record.RankStats
	// BehindMS is how much less this rank waited in collectives than the
	// others on average: the others waited for it. The slowest rank (load
	// imbalance) is the one furthest behind, when that is over a
	// millisecond and a tenth of the others' wait.
	BehindMS float64 `json:"behind_ms"`
	Slowest  bool    `json:"slowest,omitempty"`
}

// collStat is one kind of collective in the --stats report: how often
// the ranks called it and which rank the others waited for in it (the
// load imbalance of that collective), picked as the job's slowest rank is.
type collStat struct {
	Kind  string `json:"kind"`
	Calls int64  `json:"calls"`
	// Slowest is the rank furthest behind in this kind of collective, -1
	// when none is clearly behind (as rankStat.Slowest).
	Slowest  int     `json:"slowest"`
	BehindMS float64 `json:"behind_ms"`
	// MinWaitMS and MaxWaitMS are the least and the most a rank waited in
	// it, in all its calls.
	MinWaitMS float64 `json:"min_wait_ms"`
	MaxWaitMS float64 `json:"max_wait_ms"`
	// SentMsgs … RecvBytes are the frames its schedules sent and took,
	// and their data's bytes, summed over the ranks.
	SentMsgs  int64 `json:"sent_msgs"`
	SentBytes int64 `json:"sent_bytes"`
	RecvMsgs  int64 `json:"recv_msgs"`
	RecvBytes int64 `json:"recv_bytes"`
}

// report is the --stats report: a line per rank and one per kind of
// collective.
type report struct {
	Ranks []rankStat `json:"sperli_stats"`
	Colls []collStat `json:"collectives"`
	// Lost are the processes lost without a status record: killed, or
	// gone with their host.
	Lost []lostStat `json:"lost,omitempty"`
}

// lostStat is a lost process of the --stats report. Rank is its slot, as
// Rank of rankStat is.
type lostStat struct {
	Rank int    `json:"rank"`
	Why  string `json:"why"`
}

// collKinds are the names a rank's status record may give its kinds of
// collective (wire.CollKind.String); another name is not reported.
var collKinds = []string{"barrier", "bcast", "reduce", "allreduce", "gather", "scatter", "allgather", "alltoall", "reduce_scatter", "split"}

// okMS says whether a waited time read from a rank's status record is one
// (a rank is a child process, but its record is still checked).
func okMS(v float64) bool { return v >= 0 && !math.IsInf(v, 0) && !math.IsNaN(v) }

// behind returns, per rank, how much less it waited than the others on
// average, and the rank furthest behind: when that is over a millisecond
// and a tenth of what the others waited, -1 otherwise.
func behind(waits []float64, eligible []bool) ([]float64, int) {
	out := make([]float64, len(waits))
	if len(waits) < 2 {
		return out, -1
	}
	total := 0.0
	for _, w := range waits {
		total += w
	}
	best := -1
	for i, w := range waits {
		others := (total - w) / float64(len(waits)-1)
		out[i] = max(0, others-w)
		if eligible[i] && (best < 0 || out[i] > out[best]) {
			best = i
		}
	}
	if best >= 0 {
		if others := out[best] + waits[best]; out[best] <= 1 || out[best] <= others/10 {
			best = -1
		}
	}
	return out, best
}

// statsReport builds the report from the ranks' status records; a rank
// without a record (killed, not a Sperli rank) has none, and is said lost
// when it was: sight holds the launcher's sight of lost slots (the
// generations'), and a process killed by a signal the launcher did not
// send is lost too.
func statsReport(procs []*rankProc, sight map[int]string) report {
	var rep report
	for _, p := range procs {
		if p == nil {
			continue
		}
		if p.status == nil || p.status.Stats == nil {
			why, ok := sight[p.rank]
			if p.state == nil {
				// never started
			} else if ws, sig := p.state.Sys().(syscall.WaitStatus); !ok && sig && ws.Signaled() && !p.killed {
				why, ok = signalWhy(ws), true
			}
			if ok {
				rep.Lost = append(rep.Lost, lostStat{p.rank, why})
			}
			continue
		}
		st := *p.status.Stats
		if !okMS(st.RecvWaitMS) || !okMS(st.CollWaitMS) || !okMS(st.CkptWaitMS) {
			continue
		}
		rep.Ranks = append(rep.Ranks, rankStat{Rank: p.rank, RankStats: st})
	}
	waits := make([]float64, len(rep.Ranks))
	eligible := make([]bool, len(rep.Ranks))
	for i, r := range rep.Ranks {
		waits[i], eligible[i] = r.CollWaitMS, r.Collectives > 0
	}
	ahead, best := behind(waits, eligible)
	for i := range rep.Ranks {
		rep.Ranks[i].BehindMS = ahead[i]
		rep.Ranks[i].Slowest = i == best
	}
	for _, kind := range collKinds {
		cs := collStat{Kind: kind, Slowest: -1}
		var kw []float64
		var ranks []int
		for _, r := range rep.Ranks {
			c, ok := r.Coll[kind]
			if !ok || c.Calls <= 0 || !okMS(c.WaitMS) {
				continue
			}
			cs.Calls = max(cs.Calls, c.Calls)
			cs.SentMsgs += max(0, c.SentMsgs)
			cs.SentBytes += max(0, c.SentBytes)
			cs.RecvMsgs += max(0, c.RecvMsgs)
			cs.RecvBytes += max(0, c.RecvBytes)
			kw, ranks = append(kw, c.WaitMS), append(ranks, r.Rank)
		}
		if len(kw) == 0 {
			continue
		}
		cs.MinWaitMS, cs.MaxWaitMS = slices.Min(kw), slices.Max(kw)
		all := make([]bool, len(kw))
		for i := range all {
			all[i] = true
		}
		if ahead, b := behind(kw, all); b >= 0 {
			cs.Slowest, cs.BehindMS = ranks[b], ahead[b]
		}
		rep.Colls = append(rep.Colls, cs)
	}
	return rep
}

// writeStats writes the --stats report: one JSON object, or a table
// (lipgloss on a terminal, plain otherwise).
func writeStats(w io.Writer, mode string, rep report, terminal bool) {
	if mode == "json" {
		b, _ := json.Marshal(rep)
		fmt.Fprintf(w, "%s\n", b)
		return
	}
	stats := rep.Ranks
	head := []string{"rank", "wall s", "recv wait s", "coll wait s", "ckpt wait s", "sent", "sent bytes", "recvd", "recvd bytes", "collectives", "peak RSS MB", "behind s", ""}
	var rows [][]string
	for _, s := range stats {
		mark := ""
		if s.Slowest {
			mark = "slowest: the others waited for it"
		}
		rows = append(rows, []string{
			strconv.Itoa(s.Rank),
			fmt.Sprintf("%.3f", float64(s.WallMS)/1000),
			fmt.Sprintf("%.3f", s.RecvWaitMS/1000),
			fmt.Sprintf("%.3f", s.CollWaitMS/1000),
			fmt.Sprintf("%.3f", s.CkptWaitMS/1000),
			strconv.FormatInt(s.SentMsgs, 10),
			strconv.FormatInt(s.SentBytes, 10),
			strconv.FormatInt(s.RecvMsgs, 10),
			strconv.FormatInt(s.RecvBytes, 10),
			strconv.FormatInt(s.Collectives, 10),
			fmt.Sprintf("%.1f", float64(s.PeakRSSKB)/1024),
			fmt.Sprintf("%.3f", s.BehindMS/1000),
			mark,
		})
	}
	for _, l := range rep.Lost {
		row := []string{strconv.Itoa(l.Rank)}
		for len(row) < len(head)-1 {
			row = append(row, "-")
		}
		rows = append(rows, append(row, "lost: "+l.Why))
	}
	writeTable(w, head, rows, func(row int) bool { return row < len(stats) && stats[row].Slowest }, terminal)
	if len(rep.Colls) == 0 {
		return
	}
	head = []string{"collective", "calls", "slowest rank", "behind s", "least wait s", "most wait s", "sent", "sent bytes"}
	rows = rows[:0]
	for _, c := range rep.Colls {
		slowest := "-"
		if c.Slowest >= 0 {
			slowest = strconv.Itoa(c.Slowest)
		}
		rows = append(rows, []string{
			c.Kind,
			strconv.FormatInt(c.Calls, 10),
			slowest,
			fmt.Sprintf("%.3f", c.BehindMS/1000),
			fmt.Sprintf("%.3f", c.MinWaitMS/1000),
			fmt.Sprintf("%.3f", c.MaxWaitMS/1000),
			strconv.FormatInt(c.SentMsgs, 10),
			strconv.FormatInt(c.SentBytes, 10),
		})
	}
	writeTable(w, head, rows, func(row int) bool { return rep.Colls[row].Slowest >= 0 }, terminal)
}

// writeTable writes a table: lipgloss's on a terminal, with the rows
// marked marked, else plain columns.
func writeTable(w io.Writer, head []string, rows [][]string, marked func(row int) bool, terminal bool) {
	if terminal {
		t := table.New().Border(lipgloss.NormalBorder()).Headers(head...).Rows(rows...).
			StyleFunc(func(row, col int) lipgloss.Style {
				st := lipgloss.NewStyle().Padding(0, 1)
				if row == table.HeaderRow {
					return st.Bold(true)
				}
				if row >= 0 && row < len(rows) && marked(row) {
					return st.Foreground(lipgloss.Color("3"))
				}
				return st
			})
		fmt.Fprintln(w, t.Render())
		return
	}
	var buf strings.Builder
	tw := tabwriter.NewWriter(&buf, 0, 8, 2, ' ', 0)
	for _, r := range append([][]string{head}, rows...) {
		for i, c := range r {
			if i > 0 {
				fmt.Fprint(tw, "\t")
			}
			fmt.Fprint(tw, c)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	for _, line := range strings.SplitAfter(buf.String(), "\n") {
		if line != "" {
			io.WriteString(w, strings.TrimRight(line, " \n")+"\n")
		}
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && UseColor(f)
}
