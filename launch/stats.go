package launch

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/lipgloss/table"

	"sperli/runtime"
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
	runtime.RankStats
	// BehindMS is how much less this rank waited in collectives than the
	// others on average: the others waited for it. The slowest rank (load
	// imbalance) is the one furthest behind, when that is over a
	// millisecond and a tenth of the others' wait.
	BehindMS float64 `json:"behind_ms"`
	Slowest  bool    `json:"slowest,omitempty"`
}

// statsReport builds the report from the ranks' status records; a rank
// without a record (killed, not a Sperli rank) has none.
func statsReport(procs []*rankProc) []rankStat {
	var out []rankStat
	total := 0.0
	for _, p := range procs {
		if p == nil || p.status == nil || p.status.Stats == nil {
			continue
		}
		out = append(out, rankStat{Rank: p.rank, RankStats: *p.status.Stats})
		total += p.status.Stats.CollWaitMS
	}
	if len(out) < 2 {
		return out
	}
	best := -1
	for i := range out {
		others := (total - out[i].CollWaitMS) / float64(len(out)-1)
		out[i].BehindMS = max(0, others-out[i].CollWaitMS)
		if out[i].Collectives > 0 && (best < 0 || out[i].BehindMS > out[best].BehindMS) {
			best = i
		}
	}
	if best >= 0 {
		b := out[best]
		if others := b.BehindMS + b.CollWaitMS; b.BehindMS > 1 && b.BehindMS > others/10 {
			out[best].Slowest = true
		}
	}
	return out
}

// writeStats writes the --stats report: one JSON object, or a table
// (lipgloss on a terminal, plain otherwise).
func writeStats(w io.Writer, mode string, stats []rankStat, terminal bool) {
	if mode == "json" {
		b, _ := json.Marshal(struct {
			Ranks []rankStat `json:"sperli_stats"`
		}{stats})
		fmt.Fprintf(w, "%s\n", b)
		return
	}
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
	if terminal {
		t := table.New().Border(lipgloss.NormalBorder()).Headers(head...).Rows(rows...).
			StyleFunc(func(row, col int) lipgloss.Style {
				st := lipgloss.NewStyle().Padding(0, 1)
				if row == table.HeaderRow {
					return st.Bold(true)
				}
				if row >= 0 && row < len(stats) && stats[row].Slowest {
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
