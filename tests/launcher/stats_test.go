package launcher

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"sperli/tests/internal/testbin"
	"strconv"
	"strings"
	"testing"
)

const statsProgram = `def main():
    if comm.rank == 0:
        comm.send(1, 1, "0123456789")
        comm.send(1, 2, "abcdefghij")
    elif comm.rank == 1:
        comm.recv(0, 1)
        comm.recv(0, 2)
    elif comm.rank == 2:
        x = 0
        for i in range(1500000):
            x += i
    comm.barrier()
    comm.allreduce("int64", "sum", array.pack("int64", [1]))
    comm.allreduce("int64", "sum", array.pack("int64", [1]))
`

type statsLine struct {
	Rank        int     `json:"rank"`
	WallMS      int64   `json:"wall_ms"`
	RecvWaitMS  float64 `json:"recv_wait_ms"`
	CollWaitMS  float64 `json:"coll_wait_ms"`
	SentMsgs    int64   `json:"sent_msgs"`
	SentBytes   int64   `json:"sent_bytes"`
	RecvMsgs    int64   `json:"recv_msgs"`
	RecvBytes   int64   `json:"recv_bytes"`
	Collectives int64   `json:"collectives"`
	PeakRSSKB   int64   `json:"peak_rss_kb"`
	CkptWaitMS  float64 `json:"ckpt_wait_ms"`
	BehindMS    float64 `json:"behind_ms"`
	Slowest     bool    `json:"slowest"`
	Coll        map[string]struct {
		Calls     int64   `json:"calls"`
		WaitMS    float64 `json:"wait_ms"`
		SentMsgs  int64   `json:"sent_msgs"`
		SentBytes int64   `json:"sent_bytes"`
		RecvMsgs  int64   `json:"recv_msgs"`
		RecvBytes int64   `json:"recv_bytes"`
	} `json:"coll"`
}

// p2p is what the line counts beside the frames of collectives: messages
// sent, their bytes, messages received, their bytes.
func (x statsLine) p2p() (sent, sentBytes, recvd, recvdBytes int64) {
	sent, sentBytes, recvd, recvdBytes = x.SentMsgs, x.SentBytes, x.RecvMsgs, x.RecvBytes
	for _, c := range x.Coll {
		sent, sentBytes, recvd, recvdBytes = sent-c.SentMsgs, sentBytes-c.SentBytes, recvd-c.RecvMsgs, recvdBytes-c.RecvBytes
	}
	return
}

// collLine is a kind of collective in the --stats=json report.
type collLine struct {
	Kind      string  `json:"kind"`
	Calls     int64   `json:"calls"`
	Slowest   int     `json:"slowest"`
	BehindMS  float64 `json:"behind_ms"`
	MinWaitMS float64 `json:"min_wait_ms"`
	MaxWaitMS float64 `json:"max_wait_ms"`
	SentMsgs  int64   `json:"sent_msgs"`
	SentBytes int64   `json:"sent_bytes"`
	RecvMsgs  int64   `json:"recv_msgs"`
	RecvBytes int64   `json:"recv_bytes"`
}

type statsObject struct {
	Ranks []statsLine `json:"sperli_stats"`
	Colls []collLine  `json:"collectives"`
}

// statsJSON runs prog on n ranks with --stats=json and returns the one
// JSON object it printed.
func statsJSON(t *testing.T, dir, prog string, n int) statsObject {
	t.Helper()
	r := sperliRun(t, baseEnv, dir, "run", "-n", strconv.Itoa(n), "--stats=json", prog)
	if r.Code != 0 {
		t.Fatalf("%v", r)
	}
	var obj statsObject
	found := 0
	for _, l := range lines(r.Stderr) {
		if strings.HasPrefix(l, `{"sperli_stats":`) {
			found++
			if err := json.Unmarshal([]byte(l), &obj); err != nil {
				t.Fatalf("the stats line does not parse: %v\n%s", err, l)
			}
		}
	}
	if found != 1 || len(obj.Ranks) != n {
		t.Fatalf("%d stats lines with %d ranks, want one with %d\n%v", found, len(obj.Ranks), n, r)
	}
	return obj
}

// TestStats: --stats=json prints one JSON object with every rank's
// counters: the messages and bytes sent and received (point-to-point and
// the frames of collectives, which each kind counts too), the
// collectives, the memory, and the rank the others waited for flagged as
// the slowest; --stats a plain table when stderr is no terminal.
func TestStats(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "st.star"), statsProgram, 0o644)
	obj := statsJSON(t, dir, "st.star", 3)
	s := obj.Ranks
	var p2p [3][4]int64
	for i, x := range s {
		p2p[i][0], p2p[i][1], p2p[i][2], p2p[i][3] = x.p2p()
	}
	if p2p[0][0] != 2 || p2p[0][1] != 20 || p2p[1][2] != 2 || p2p[1][3] != 20 || p2p[1][0] != 0 || p2p[2][2] != 0 {
		t.Errorf("point-to-point messages and bytes (sent, bytes, received, bytes by rank): %v", p2p)
	}
	// Every frame a collective sent was taken: per kind, the job's frames
	// and bytes sent are those received. Each rank sent frames in each
	// kind; the allreduces carried data, the barrier none.
	for _, kind := range []string{"barrier", "allreduce"} {
		var sent, sentB, recvd, recvdB int64
		for _, x := range s {
			c := x.Coll[kind]
			if c.SentMsgs <= 0 || c.RecvMsgs <= 0 {
				t.Errorf("rank %d: %s sent %d frames, took %d", x.Rank, kind, c.SentMsgs, c.RecvMsgs)
			}
			if kind == "allreduce" && c.SentBytes < 8 || kind == "barrier" && c.SentBytes != 0 {
				t.Errorf("rank %d: %s sent %d bytes", x.Rank, kind, c.SentBytes)
			}
			sent, sentB, recvd, recvdB = sent+c.SentMsgs, sentB+c.SentBytes, recvd+c.RecvMsgs, recvdB+c.RecvBytes
		}
		if sent != recvd || sentB != recvdB {
			t.Errorf("%s: the ranks sent %d frames (%d bytes) and took %d (%d bytes)", kind, sent, sentB, recvd, recvdB)
		}
		for _, c := range obj.Colls {
			if c.Kind == kind && (c.SentMsgs != sent || c.SentBytes != sentB || c.RecvMsgs != recvd || c.RecvBytes != recvdB) {
				t.Errorf("%s in the report: %+v, the ranks' sum is %d frames, %d bytes sent", kind, c, sent, sentB)
			}
		}
	}
	for _, x := range s {
		if x.Collectives != 3 || x.PeakRSSKB <= 0 || x.WallMS <= 0 {
			t.Errorf("rank %d: %d collectives (want 3), peak RSS %d kB, wall %d ms", x.Rank, x.Collectives, x.PeakRSSKB, x.WallMS)
		}
	}
	if !s[2].Slowest || s[0].Slowest || s[1].Slowest || s[2].BehindMS <= 0 {
		t.Errorf("rank 2, which computed while the others waited in the barrier, is not the one flagged slowest: %+v", s)
	}
	if s[0].CollWaitMS <= 0 || s[1].CollWaitMS <= 0 {
		t.Errorf("ranks 0 and 1 waited for rank 2 in the barrier, their collective wait is %v, %v ms", s[0].CollWaitMS, s[1].CollWaitMS)
	}
	for _, x := range s {
		if x.CkptWaitMS != 0 || x.Coll["barrier"].Calls != 1 || x.Coll["allreduce"].Calls != 2 || len(x.Coll) != 2 {
			t.Errorf("rank %d: checkpoint wait %v ms (no checkpoint), per kind %+v; want 1 barrier and 2 allreduce", x.Rank, x.CkptWaitMS, x.Coll)
		}
	}

	r := sperliRun(t, baseEnv, dir, "run", "-n", "3", "--stats", "st.star")
	if r.Code != 0 {
		t.Fatalf("%v", r)
	}
	var table []string
	for _, l := range lines(withoutNotes(r.Stderr)) {
		table = append(table, l)
	}
	if len(table) != 7 || !strings.HasPrefix(table[0], "rank  wall s  recv wait s") || !strings.HasSuffix(table[3], "slowest: the others waited for it") || strings.Contains(table[1]+table[2], "slowest") ||
		!strings.HasPrefix(table[4], "collective  calls  slowest rank  behind s") ||
		!regexp.MustCompile(`^barrier +1 +2 `).MatchString(table[5]) || !regexp.MustCompile(`^allreduce +2 +[-0-9]`).MatchString(table[6]) {
		t.Errorf("--stats table:\n%s", strings.Join(table, "\n"))
	}
	if strings.Contains(r.Stderr, "\x1b") {
		t.Errorf("the table holds escapes although stderr is no terminal")
	}
}

// TestStatsPerCollective: --stats flags the slowest rank of each kind of
// collective: the rank the others waited for in the barrier (it computed
// before it) is not the one they waited for in the allreduces. The wait
// for a rank that computed before a checkpoint is checkpoint time, and a
// checkpoint is no collective of the report.
func TestStatsPerCollective(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "two.star"), `def compute():
    x = 0
    for i in range(1500000):
        x += i

def main():
    if comm.rank == 2:
        compute()
    comm.barrier()
    if comm.rank == 0:
        compute()
    comm.allreduce("int64", "sum", array.pack("int64", [1]))
    comm.allreduce("int64", "sum", array.pack("int64", [1]))
    comm.bcast(0, "x")
    comm.use_checkpoints("ck")
    if comm.rank == 1:
        compute()
    comm.checkpoint("state")
`, 0o644)
	obj := statsJSON(t, dir, "two.star", 3)
	want := map[string]struct {
		calls   int64
		slowest int
	}{"barrier": {1, 2}, "allreduce": {2, 0}, "bcast": {1, -2}}
	if len(obj.Colls) != len(want) {
		t.Errorf("collectives %+v, want barrier, allreduce and bcast", obj.Colls)
	}
	for _, x := range obj.Ranks {
		if x.Collectives != 4 {
			t.Errorf("rank %d: %d collectives, want 4 (the checkpoint aside)", x.Rank, x.Collectives)
		}
		if x.Rank != 1 && x.CkptWaitMS <= 0 {
			t.Errorf("rank %d waited for rank 1 in the checkpoint, its checkpoint wait is %v ms", x.Rank, x.CkptWaitMS)
		}
	}
	for _, c := range obj.Colls {
		w, ok := want[c.Kind]
		if !ok || c.Calls != w.calls || c.MinWaitMS < 0 || c.MaxWaitMS < c.MinWaitMS {
			t.Errorf("collective %+v, want %d calls", c, w.calls)
			continue
		}
		if w.slowest >= 0 && (c.Slowest != w.slowest || c.BehindMS <= 0) {
			t.Errorf("%s: slowest rank %d (behind by %v ms), want rank %d", c.Kind, c.Slowest, c.BehindMS, w.slowest)
		}
	}
}

// TestStatsTableInTerminal: on a terminal the --stats table is drawn with
// lipgloss (box lines).
func TestStatsTableInTerminal(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "st.star"), statsProgram, 0o644)
	cmd := exec.Command("script", "-qfec", "'"+sperli+"' run -n 3 --stats st.star", "/dev/null")
	cmd.Dir, cmd.Env = dir, baseEnv
	r := testbin.Start(t, cmd).Wait(t, timeout)
	if r.Code != 0 {
		t.Fatalf("%v", r)
	}
	if !strings.Contains(r.Stdout, "┌") || !strings.Contains(r.Stdout, "│") || !strings.Contains(r.Stdout, "slowest: the others waited for it") {
		t.Errorf("no lipgloss table on the terminal:\n%s", r.Stdout)
	}
}
