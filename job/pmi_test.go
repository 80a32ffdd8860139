package job

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hpke"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sperli/codes"
)

// fakePMI is a PMI-1 process manager for n slots, one socketpair each, as
// Slurm's pmi2 plugin answers a PMI-1 client (one command a line, answers
// "cmd=NAME rc=0 …", barrier_out when every slot entered the barrier).
// tamper, when set, may change the value a get answers or the whole answer
// line (hostile answers).
type fakePMI struct {
	t      *testing.T
	n      int
	mu     sync.Mutex
	cond   *sync.Cond
	kvs    map[string]string
	inBar  int
	gen    int
	tamper func(slot int, cmd map[string]string, answer string) string
	fds    []string
	done   sync.WaitGroup
}

func newFakePMI(t *testing.T, n int) *fakePMI {
	f := &fakePMI{t: t, n: n, kvs: map[string]string{}}
	f.cond = sync.NewCond(&f.mu)
	return f
}

// start makes the socketpairs and serves them; fds[i] is slot i's PMI_FD.
func (f *fakePMI) start() {
	for i := 0; i < f.n; i++ {
		pair, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			f.t.Fatal(err)
		}
		srv := os.NewFile(uintptr(pair[0]), "pmi-server")
		conn, err := net.FileConn(srv)
		srv.Close()
		if err != nil {
			f.t.Fatal(err)
		}
		f.t.Cleanup(func() { conn.Close() })
		f.fds = append(f.fds, strconv.Itoa(pair[1]))
		f.done.Add(1)
		go f.serve(i, conn)
	}
	f.t.Cleanup(func() {
		f.mu.Lock()
		f.gen = -1 // releases barrier waiters
		f.cond.Broadcast()
		f.mu.Unlock()
	})
}

func (f *fakePMI) serve(slot int, conn net.Conn) {
	defer f.done.Done()
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		line := sc.Text()
		if len(line)+1 > pmiLineMax {
			f.t.Errorf("slot %d sent a command of %d bytes, more than %d", slot, len(line)+1, pmiLineMax)
		}
		cmd := map[string]string{}
		for _, fld := range strings.Fields(line) {
			k, v, _ := strings.Cut(fld, "=")
			cmd[k] = v
		}
		var ans string
		switch cmd["cmd"] {
		case "init":
			ans = "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0"
		case "get_maxes":
			ans = "cmd=maxes rc=0 kvsname_max=256 keylen_max=64 vallen_max=1024"
		case "get_my_kvsname":
			ans = "cmd=my_kvsname rc=0 kvsname=4711.0"
		case "put":
			if len(cmd["value"]) > 1024 || len(cmd["key"]) > 64 {
				f.t.Errorf("slot %d put %d bytes under a key of %d", slot, len(cmd["value"]), len(cmd["key"]))
			}
			f.mu.Lock()
			f.kvs[cmd["key"]] = cmd["value"]
			f.mu.Unlock()
			ans = "cmd=put_result rc=0"
		case "barrier_in":
			f.mu.Lock()
			g := f.gen
			f.inBar++
			if f.inBar == f.n {
				f.inBar = 0
				f.gen++
				f.cond.Broadcast()
			}
			for f.gen == g {
				f.cond.Wait()
			}
			gone := f.gen < 0
			f.mu.Unlock()
			if gone {
				return
			}
			ans = "cmd=barrier_out rc=0"
		case "get":
			f.mu.Lock()
			v, ok := f.kvs[cmd["key"]]
			f.mu.Unlock()
			ans = "cmd=get_result rc=1"
			if ok {
				ans = "cmd=get_result rc=0 value=" + v
			}
		case "finalize":
			ans = "cmd=finalize_ack rc=0"
		default:
			ans = "cmd=unknown rc=1"
		}
		if f.tamper != nil {
			ans = f.tamper(slot, cmd, ans)
			if ans == "" {
				conn.Close()
				return
			}
		}
		if _, err := conn.Write([]byte(ans + "\n")); err != nil {
			return
		}
	}
}

// records returns every record the slots published, decoded.
func (f *fakePMI) records() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out [][]byte
	for k, ns := range f.kvs {
		base, ok := strings.CutSuffix(k, ".n")
		if !ok {
			continue
		}
		n, _ := strconv.Atoi(ns)
		var enc string
		for i := 0; i < n; i++ {
			enc += f.kvs[base+"."+strconv.Itoa(i)]
		}
		b, err := base64.RawURLEncoding.DecodeString(enc)
		if err != nil {
			f.t.Errorf("record %s is not base64url: %v", base, err)
		}
		out = append(out, b)
	}
	return out
}

type pmiResult struct {
	j   *Job
	err error
}

// bootAll bootstraps every slot of f at once and returns their results.
// When slot stop (≥ 0) has its result, the others are stopped (as srun -K
// ends a step).
func (f *fakePMI) bootAll(ctx context.Context, env func(slot int) Env, stop int) []pmiResult {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := make([]pmiResult, f.n)
	var wg sync.WaitGroup
	for i := 0; i < f.n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := Env{PMI: PMIEnv{FD: f.fds[i], Rank: strconv.Itoa(i), Size: strconv.Itoa(f.n), LaunchIP: "127.0.0.1"}}
			if env != nil {
				e = env(i)
			}
			res[i].j, res[i].err = FromPMI(ctx, e)
			if i == stop {
				cancel()
			}
		}()
	}
	wg.Wait()
	for _, r := range res {
		if r.j != nil && r.j.Listener != nil {
			f.t.Cleanup(func() { r.j.Listener.Close() })
		}
	}
	return res
}

func pmiCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestPMIBootstrap: three slots bootstrap over a fake PMI and each gets a
// valid description of its slot (TestPMIBootstrapJoins, in
// pmi_join_test.go, joins them). No private key or job secret was ever published: every
// record the process manager holds is searched for each slot's key seed
// and for slot 0's job secret. Only slot 0 holds the job secret.
func TestPMIBootstrap(t *testing.T) {
	const n = 3
	f := newFakePMI(t, n)
	f.start()
	ctx := pmiCtx(t)
	res := f.bootAll(ctx, nil, -1)
	for i, r := range res {
		if r.err != nil {
			t.Fatalf("slot %d: %v", i, r.err)
		}
		if r.j.Rank != i || r.j.Size != n || r.j.Hosts[i].Host != "127.0.0.1" {
			t.Errorf("slot %d: rank %d size %d host %v", i, r.j.Rank, r.j.Size, r.j.Hosts[i])
		}
		if (len(r.j.JobSecret) != 0) != (i == 0) {
			t.Errorf("slot %d holds a job secret of %d bytes", i, len(r.j.JobSecret))
		}
	}
	recs := f.records()
	if len(recs) != 2*n+1 {
		t.Errorf("the process manager holds %d records, want %d", len(recs), 2*n+1)
	}
	for _, rec := range recs {
		for i, r := range res {
			secrets := [][]byte{r.j.Key, []byte(base64.StdEncoding.EncodeToString(r.j.Key))}
			if i == 0 {
				secrets = append(secrets, r.j.JobSecret, []byte(base64.StdEncoding.EncodeToString(r.j.JobSecret)))
			}
			for _, s := range secrets {
				if bytes.Contains(rec, s) {
					t.Errorf("a record published through PMI holds slot %d's secret", i)
				}
			}
		}
	}
	for i, r := range res {
		if err := r.j.Validate(); err != nil {
			t.Errorf("slot %d: its description does not validate: %v", i, err)
		}
	}
}

// TestPMIBootstrapRuns: with ports srun reserved (consecutive on a node),
// slot 0 publishes the host table as runs and every slot's description
// holds runs, not a table of every slot (SPEC §18: O(nodes) to read).
func TestPMIBootstrapRuns(t *testing.T) {
	const n = 4
	base := freePorts(t, n)
	f := newFakePMI(t, n)
	f.start()
	res := f.bootAll(pmiCtx(t), func(i int) Env {
		return Env{PMI: PMIEnv{FD: f.fds[i], Rank: strconv.Itoa(i), Size: strconv.Itoa(n), LaunchIP: "127.0.0.1",
			ResvPorts: fmt.Sprintf("%d-%d", base, base+n-1), LocalID: strconv.Itoa(i)}}
	}, -1)
	for i, r := range res {
		if r.err != nil {
			t.Fatalf("slot %d: %v", i, r.err)
		}
		if r.j.Hosts != nil || len(r.j.Runs) != 1 || r.j.Runs[0] != (Run{Host: "127.0.0.1", Port: base, Count: n}) {
			t.Errorf("slot %d: hosts %v runs %v, want one run of %d from port %d", i, r.j.Hosts, r.j.Runs, n, base)
		}
		if h := r.j.HostOf(i); h.Port != base+i {
			t.Errorf("slot %d listens at %v, want port %d", i, h, base+i)
		}
		if err := r.j.Validate(); err != nil {
			t.Errorf("slot %d: %v", i, err)
		}
	}
}

// freePorts returns the first of n consecutive ports free on 127.0.0.1
// now (srun's reserved range in TestPMIBootstrapRuns).
func freePorts(t *testing.T, n int) int {
	t.Helper()
	for base := 40000 + os.Getpid()%1000*16; base < 65000; base += 97 {
		var lns []net.Listener
		for p := base; p < base+n; p++ {
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				break
			}
			lns = append(lns, ln)
		}
		for _, ln := range lns {
			ln.Close()
		}
		if len(lns) == n {
			return base
		}
	}
	t.Fatalf("no %d consecutive free ports on 127.0.0.1", n)
	return 0
}

// TestPMIRefusedHost: a host table naming a refused host is H1614 on every
// slot, slot 0 refusing to certify it and the others told so.
func TestPMIRefusedHost(t *testing.T) {
	f := newFakePMI(t, 2)
	f.start()
	res := f.bootAll(pmiCtx(t), func(i int) Env {
		return Env{PMI: PMIEnv{FD: f.fds[i], Rank: strconv.Itoa(i), Size: "2", LaunchIP: "127.0.0.1"}, Refused: "127.0.0.1"}
	}, -1)
	for i, r := range res {
		if codes.Of(r.err) != codes.HostRefused || !strings.HasPrefix(fmt.Sprint(r.err), "H1614: host 127.0.0.1 of rank 0 refused") {
			t.Errorf("slot %d: %v, want H1614 naming 127.0.0.1 once", i, r.err)
		}
	}
	for _, rec := range f.records() {
		if bytes.Contains(rec, []byte(`"cert"`)) {
			t.Errorf("slot 0 published a certificate for a job with a refused host")
		}
	}
}

// TestPMIEnvironment: without PMI, or with an environment that is not
// Slurm's, the bootstrap fails with H1615 naming the variable.
func TestPMIEnvironment(t *testing.T) {
	var pipe [2]int
	if err := syscall.Pipe(pipe[:]); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(pipe[1])
	for _, tc := range []struct {
		name string
		env  PMIEnv
		want string
	}{
		{"no PMI_FD", PMIEnv{Rank: "0", Size: "1"}, "PMI_FD is not set"},
		{"PMI_FD not a number", PMIEnv{FD: "x", Rank: "0", Size: "1"}, `PMI_FD is "x"`},
		{"PMI_FD negative", PMIEnv{FD: "-3", Rank: "0", Size: "1"}, `PMI_FD is "-3"`},
		{"size 0", PMIEnv{FD: "99", Rank: "0", Size: "0"}, `PMI_SIZE is "0"`},
		{"size too large", PMIEnv{FD: "99", Rank: "0", Size: "9999999"}, `PMI_SIZE is "9999999"`},
		{"rank outside", PMIEnv{FD: "99", Rank: "2", Size: "2"}, `PMI_RANK is "2"`},
		{"PMI_FD a pipe", PMIEnv{FD: strconv.Itoa(pipe[0]), Rank: "0", Size: "1"}, "is not a socket"},
		{"spares not a number", PMIEnv{FD: "99", Rank: "0", Size: "4", Spares: "two"}, `SPERLI_SPARES is "two", want 0 to 3`},
		{"spares negative", PMIEnv{FD: "99", Rank: "0", Size: "4", Spares: "-1"}, `SPERLI_SPARES is "-1"`},
		{"spares leave no rank", PMIEnv{FD: "99", Rank: "0", Size: "4", Spares: "4"}, `SPERLI_SPARES is "4", want 0 to 3: srun -n counts the ranks and the spares, and this step has 4 tasks`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromPMI(context.Background(), Env{PMI: tc.env})
			if codes.Of(err) != codes.JobMalformed || !strings.Contains(fmt.Sprint(err), tc.want) {
				t.Errorf("%v, want H1615 saying %q", err, tc.want)
			}
		})
	}
}

// TestPMIHostileAnswers: a process manager that answers anything but the
// protocol, or publishes records that are too long, malformed or forged,
// gives H1615 naming what was wrong, never a panic, a hang past the
// deadline or an allocation of what it announced.
func TestPMIHostileAnswers(t *testing.T) {
	long := strings.Repeat("A", 1<<20)
	for _, tc := range []struct {
		name   string
		slot   int // the slot whose answers are tampered with, and checked
		tamper func(cmd map[string]string, ans string) string
		want   string
	}{
		{"garbage", 1, onCmd("init", "hello world"), "not PMI-1"},
		{"no cmd", 1, onCmd("init", "rc=0"), "has no cmd"},
		{"wrong cmd", 1, onCmd("init", "cmd=barrier_out rc=0"), "want cmd=response_to_init"},
		{"init refused", 1, onCmd("init", "cmd=response_to_init rc=-1"), "rc=-1"},
		{"version 2", 1, onCmd("init", "cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0"), `PMI version "2"`},
		{"repeated field", 1, onCmd("init", "cmd=response_to_init rc=0 rc=0 pmi_version=1"), "repeats rc"},
		{"endless line", 1, onCmd("init", long), "longer than 4096"},
		{"closed", 1, onCmd("get_maxes", ""), "closed PMI_FD"},
		{"tiny vallen", 1, onCmd("get_maxes", "cmd=maxes rc=0 kvsname_max=256 keylen_max=64 vallen_max=10"), "out of range"},
		{"huge vallen", 1, onCmd("get_maxes", "cmd=maxes rc=0 kvsname_max=256 keylen_max=64 vallen_max=99999999999"), "out of range"},
		{"kvsname overlong", 1, onCmd("get_my_kvsname", "cmd=my_kvsname rc=0 kvsname="+strings.Repeat("k", 300)), "kvsname"},
		{"put refused", 1, onCmd("put", "cmd=put_result rc=5"), "rc=5"},
		{"barrier fails", 1, onCmd("barrier_in", "cmd=barrier_out rc=1"), "rc=1"},
		{"chunk count huge", 1, onGet("sperli-job.n", "99999999"), `sperli-job.n is "99999999"`},
		{"chunk count negative", 1, onGet("sperli-c-1.n", "-1"), `sperli-c-1.n is "-1"`},
		{"chunk count not a number", 1, onGet("sperli-job.n", "x"), `sperli-job.n is "x"`},
		{"chunk missing", 1, onGetMissing("sperli-job.0"), "sperli-job.0 is missing"},
		{"chunk too long", 1, onGet("sperli-job.0", strings.Repeat("A", 2000)), "want 1 to"},
		{"not base64", 1, onGet("sperli-c-1.0", "!!!!"), "not base64url"},
		{"unknown field", 1, onRecord("sperli-c-1", base64.RawURLEncoding.EncodeToString([]byte(`{"cert":"","token":"","evil":1}`))), "does not decode"},
		{"trailing data", 1, onRecord("sperli-c-1", base64.RawURLEncoding.EncodeToString([]byte(`{"cert":"","token":""} {}`))), "data after"},
		{"cert of another slot", 1, swapGet("sperli-c-1", "sperli-c-0"), "not for this slot's key"},
		{"slot key too short", 0, onRecord("sperli-p-1", base64.RawURLEncoding.EncodeToString([]byte(`{"host":"127.0.0.1","port":5,"pub":"AAAA"}`))), "public key of 3 bytes"},
		{"slot port out of range", 0, onRecord("sperli-p-1", base64.RawURLEncoding.EncodeToString([]byte(`{"host":"127.0.0.1","port":70000,"pub":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}`))), "port 70000"},
		{"slot host bad", 0, onRecord("sperli-p-1", base64.RawURLEncoding.EncodeToString([]byte(`{"host":"a b","port":5,"pub":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="}`))), `host "a b"`},
		{"job with hosts and runs", 1, onRecord("sperli-job", base64.RawURLEncoding.EncodeToString([]byte(`{"job":"x","size":2,"hosts":[{"host":"a","port":1},{"host":"a","port":2}],"runs":[{"host":"a","port":1,"count":2}],"ca":"","jobkey":""}`))), "2 host entries and 1 runs"},
		{"job with runs of another size", 1, onRecord("sperli-job", base64.RawURLEncoding.EncodeToString([]byte(`{"job":"x","size":2,"runs":[{"host":"a","port":1,"count":1}],"ca":"","jobkey":""}`))), "runs hold 1 slots, want 2"},
		{"job with runs not holding this slot", 1, onRecord("sperli-job", base64.RawURLEncoding.EncodeToString([]byte(`{"job":"x","size":2,"runs":[{"host":"a","port":1,"count":2}],"ca":"","jobkey":""}`))), "does not hold this slot"},
		{"refusal with an unknown code", 1, onGets(map[string]string{"sperli-err.n": "1", "sperli-err.0": base64.RawURLEncoding.EncodeToString([]byte(`{"code":"H9999","msg":"forged"}`))}), "forged (from slot 0)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakePMI(t, 2)
			var orig map[string]string
			f.tamper = func(slot int, cmd map[string]string, ans string) string {
				if slot != tc.slot {
					return ans
				}
				f.mu.Lock()
				orig = f.kvs
				f.mu.Unlock()
				return tc.tamper(withKVS(cmd, orig, f), ans)
			}
			f.start()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			res := f.bootAll(ctx, nil, tc.slot)
			err := res[tc.slot].err
			if codes.Of(err) != codes.JobMalformed || !strings.Contains(fmt.Sprint(err), tc.want) {
				t.Errorf("slot %d: %v, want H1615 saying %q", tc.slot, err, tc.want)
			}
			if len(fmt.Sprint(err)) > 2000 {
				t.Errorf("the error is %d bytes long: a hostile answer is quoted whole", len(fmt.Sprint(err)))
			}
		})
	}
}

// TestPMIDeadline: a barrier that never completes (a slot that never
// starts) ends at the context's deadline with H1615 saying so.
func TestPMIDeadline(t *testing.T) {
	f := newFakePMI(t, 2)
	f.start()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := FromPMI(ctx, Env{PMI: PMIEnv{FD: f.fds[0], Rank: "0", Size: "2", LaunchIP: "127.0.0.1"}})
	if codes.Of(err) != codes.JobMalformed || !strings.Contains(fmt.Sprint(err), "barrier_out") {
		t.Errorf("%v, want H1615 naming the barrier", err)
	}
}

// TestReservedPort: SLURM_STEP_RESV_PORTS is read as srun writes it, and
// anything else is H1615 naming it.
func TestReservedPort(t *testing.T) {
	for _, tc := range []struct {
		list, local string
		want        int
		bad         string
	}{
		{"", "0", 0, ""},
		{"12000-12003", "0", 12000, ""},
		{"12000-12003", "3", 12003, ""},
		{"12000,12005", "1", 12005, ""},
		{"12000-12001,12005", "2", 12005, ""},
		{"12000-12001", "2", 0, "2 ports for this node"},
		{"12000-11000", "0", 0, "not a port"},
		{"0-3", "0", 0, "not a port"},
		{"70000", "0", 0, "not a port"},
		{"x", "0", 0, "not a port"},
		{"12000", "-1", 0, "SLURM_LOCALID"},
		{"12000", "", 0, "SLURM_LOCALID"},
	} {
		got, err := reservedPort(tc.list, tc.local)
		if tc.bad == "" {
			if err != nil || got != tc.want {
				t.Errorf("reservedPort(%q, %q) = %d, %v; want %d", tc.list, tc.local, got, err, tc.want)
			}
		} else if codes.Of(err) != codes.JobMalformed || !strings.Contains(err.Error(), tc.bad) {
			t.Errorf("reservedPort(%q, %q) = %d, %v; want H1615 saying %q", tc.list, tc.local, got, err, tc.bad)
		}
	}
}

// TestPMIWanted: a description on standard input wins over PMI: a
// regular file with data, a pipe with data; an empty file, /dev/null and
// an ended pipe mean PMI. Without PMI_FD, never PMI.
func TestPMIWanted(t *testing.T) {
	dir := t.TempDir()
	full, _ := os.Create(dir + "/rank.job")
	full.WriteString("{}\n")
	full.Seek(0, 0)
	defer full.Close()
	empty, _ := os.Create(dir + "/empty")
	defer empty.Close()
	null, _ := os.Open(os.DevNull)
	defer null.Close()
	withData, w1, _ := os.Pipe()
	w1.WriteString("{}\n")
	defer withData.Close()
	defer w1.Close()
	ended, w2, _ := os.Pipe()
	w2.Close()
	defer ended.Close()
	env := Env{PMI: PMIEnv{FD: "9"}}
	for _, tc := range []struct {
		name string
		f    *os.File
		want bool
	}{
		{"file with data", full, false},
		{"empty file", empty, true},
		{"/dev/null", null, true},
		{"pipe with data", withData, false},
		{"ended pipe", ended, true},
	} {
		if got := PMIWanted(tc.f, env); got != tc.want {
			t.Errorf("%s: PMIWanted = %v, want %v", tc.name, got, tc.want)
		}
	}
	if PMIWanted(null, Env{}) {
		t.Errorf("PMIWanted without PMI_FD = true")
	}
}

// The tampering helpers: each returns the answer to give instead of ans.

func onCmd(name, answer string) func(map[string]string, string) string {
	return func(cmd map[string]string, ans string) string {
		if cmd["cmd"] == name {
			return answer
		}
		return ans
	}
}

func onGet(key, value string) func(map[string]string, string) string {
	return func(cmd map[string]string, ans string) string {
		if cmd["cmd"] == "get" && cmd["key"] == key {
			return "cmd=get_result rc=0 value=" + value
		}
		return ans
	}
}

// onRecord answers record key (all its chunks) with the one chunk value.
func onRecord(key, value string) func(map[string]string, string) string {
	return onGets(map[string]string{key + ".n": "1", key + ".0": value})
}

func onGets(m map[string]string) func(map[string]string, string) string {
	return func(cmd map[string]string, ans string) string {
		if v, ok := m[cmd["key"]]; ok && cmd["cmd"] == "get" {
			return "cmd=get_result rc=0 value=" + v
		}
		return ans
	}
}

func onGetMissing(key string) func(map[string]string, string) string {
	return func(cmd map[string]string, ans string) string {
		if cmd["cmd"] == "get" && cmd["key"] == key {
			return "cmd=get_result rc=1"
		}
		return ans
	}
}

// swapGet answers the chunks of record from with those of record to.
func swapGet(from, to string) func(map[string]string, string) string {
	return func(cmd map[string]string, ans string) string {
		if k, ok := strings.CutPrefix(cmd["key"], from+"."); cmd["cmd"] == "get" && ok {
			if v, found := cmd["\x00kvs:"+to+"."+k]; found {
				return "cmd=get_result rc=0 value=" + v
			}
		}
		return ans
	}
}

// withKVS gives a tamper function a look at the process manager's store
// (keys prefixed "\x00kvs:").
func withKVS(cmd, kvs map[string]string, f *fakePMI) map[string]string {
	out := map[string]string{}
	for k, v := range cmd {
		out[k] = v
	}
	f.mu.Lock()
	for k, v := range kvs {
		out["\x00kvs:"+k] = v
	}
	f.mu.Unlock()
	return out
}

// FuzzPMIAnswer: any answer line either is refused with H1615 or splits
// into fields that write back to an equivalent line.
func FuzzPMIAnswer(f *testing.F) {
	for _, s := range []string{
		"cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0",
		"cmd=get_result rc=0 value=eyJhIjoxfQ",
		"cmd=get_result rc=1",
		"cmd=barrier_out",
		"hello world", "=", "cmd=", "cmd=a cmd=b", "a=b c=d",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		a, err := parsePMI(line)
		if err != nil {
			if codes.Of(err) != codes.JobMalformed {
				t.Fatalf("parsePMI(%q) = %v, want H1615", line, err)
			}
			return
		}
		if a["cmd"] == "" || len(a) > 32 {
			t.Fatalf("parsePMI(%q) = %v: no cmd, or more than 32 fields", line, a)
		}
		var b strings.Builder
		for k, v := range a {
			b.WriteString(k + "=" + v + " ")
		}
		again, err := parsePMI(b.String())
		if err != nil || len(again) != len(a) {
			t.Fatalf("parsePMI(%q) = %v, its fields written back give %v, %v", line, a, again, err)
		}
		for k, v := range a {
			if again[k] != v {
				t.Fatalf("field %s: %q, written back %q", k, v, again[k])
			}
		}
	})
}

// FuzzReservedPort: any SLURM_STEP_RESV_PORTS and SLURM_LOCALID give a
// port of 1 to 65535, 0 (none reserved, for an empty list) or H1615.
func FuzzReservedPort(f *testing.F) {
	f.Add("12000-12003", "2")
	f.Add("12000,12005", "1")
	f.Add("", "0")
	f.Add("1-65535", "65534")
	f.Fuzz(func(t *testing.T, list, local string) {
		p, err := reservedPort(list, local)
		switch {
		case err != nil:
			if codes.Of(err) != codes.JobMalformed {
				t.Fatalf("reservedPort(%q, %q) = %v, want H1615", list, local, err)
			}
		case list == "":
			if p != 0 {
				t.Fatalf("reservedPort(%q, %q) = %d, want 0", list, local, p)
			}
		case p < 1 || p > 65535:
			t.Fatalf("reservedPort(%q, %q) = %d, want 1 to 65535", list, local, p)
		}
	})
}

// TestPMISpares: with SPERLI_SPARES=2 the last two of four tasks are
// spares: every slot's description is a job of 2 ranks and 2 spares, and
// each spare holds the job secret, which slot 0 sealed to the spare's own
// HPKE key — no record the process manager holds contains it in the clear.
func TestPMISpares(t *testing.T) {
	const n, spares = 4, 2
	f := newFakePMI(t, n)
	f.start()
	res := f.bootAll(pmiCtx(t), func(i int) Env {
		return Env{PMI: PMIEnv{FD: f.fds[i], Rank: strconv.Itoa(i), Size: strconv.Itoa(n), LaunchIP: "127.0.0.1", Spares: "2"}}
	}, -1)
	for i, r := range res {
		if r.err != nil {
			t.Fatalf("slot %d: %v", i, r.err)
		}
		if r.j.Rank != i || r.j.Size != n-spares || r.j.Spares != spares || r.j.Slots() != n {
			t.Errorf("slot %d: rank %d size %d spares %d, want slot %d of 2 ranks and 2 spares", i, r.j.Rank, r.j.Size, r.j.Spares, i)
		}
		holds := len(r.j.JobSecret) != 0
		if holds != (i == 0 || i >= n-spares) {
			t.Errorf("slot %d holds a job secret of %d bytes", i, len(r.j.JobSecret))
		}
		if holds && !bytes.Equal(r.j.JobSecret, res[0].j.JobSecret) {
			t.Errorf("slot %d holds a job secret that is not slot 0's", i)
		}
		if err := r.j.Validate(); err != nil {
			t.Errorf("slot %d: its description does not validate: %v", i, err)
		}
	}
	secret := res[0].j.JobSecret
	for _, rec := range f.records() {
		for _, s := range [][]byte{secret, []byte(base64.StdEncoding.EncodeToString(secret)), []byte(base64.RawURLEncoding.EncodeToString(secret))} {
			if bytes.Contains(rec, s) {
				t.Errorf("a record published through PMI holds the job secret")
			}
		}
	}
}

// TestPMISparesDisagree: a task told another SPERLI_SPARES than slot 0
// fails with H1615 naming the two counts; a task that takes itself for a
// rank where slot 0 counts it a spare published no HPKE key, and slot 0
// refuses the job, every slot told why.
func TestPMISparesDisagree(t *testing.T) {
	for _, tc := range []struct {
		name   string
		spares func(slot int) string
		want   func(slot int) string
	}{
		{"slot 1 counts one spare", func(i int) string { return map[bool]string{true: "1", false: "2"}[i == 1] },
			func(i int) string {
				if i == 1 {
					return `slot 0 made a job with 2 spares, SPERLI_SPARES is "1" here`
				}
				return ""
			}},
		{"slot 2 counts none", func(i int) string { return map[bool]string{true: "", false: "2"}[i == 2] },
			func(int) string { return "spare slot 2 published an HPKE key of 0 bytes that is not one" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakePMI(t, 4)
			f.start()
			res := f.bootAll(pmiCtx(t), func(i int) Env {
				return Env{PMI: PMIEnv{FD: f.fds[i], Rank: strconv.Itoa(i), Size: "4", LaunchIP: "127.0.0.1", Spares: tc.spares(i)}}
			}, -1)
			for i, r := range res {
				want := tc.want(i)
				if want == "" {
					if r.err != nil {
						t.Errorf("slot %d: %v", i, r.err)
					}
					continue
				}
				if codes.Of(r.err) != codes.JobMalformed || !strings.Contains(fmt.Sprint(r.err), want) {
					t.Errorf("slot %d: %v, want H1615 saying %q", i, r.err, want)
				}
			}
		})
	}
}

// TestOpenSecret: a job secret sealed for one spare opens for that spare
// of that job only, and must be the secret half of the job key.
func TestOpenSecret(t *testing.T) {
	ident, err := NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	pub, secret, err := ident.keys()
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewIdentity()
	if err != nil {
		t.Fatal(err)
	}
	_, otherSecret, err := other.keys()
	if err != nil {
		t.Fatal(err)
	}
	kem, err := secretKEM.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	seal := func(id string, slot int, plain []byte) []byte {
		ct, err := hpke.Seal(kem.PublicKey(), secretKDF, secretAEAD, secretInfo(id, slot), plain)
		if err != nil {
			t.Fatal(err)
		}
		return ct
	}
	pj := pmiJob{ID: ident.ID, JobKey: pub}
	if got, err := openSecret(kem, pj, pmiCert{Secret: seal(ident.ID, 3, secret)}, 3); err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("the secret sealed for slot 3 opened as %d bytes, %v", len(got), err)
	}
	tampered := seal(ident.ID, 3, secret)
	tampered[len(tampered)-1] ^= 1
	for _, tc := range []struct {
		name string
		ct   []byte
		want string
	}{
		{"none", nil, "slot 0 sealed no job secret for spare slot 3"},
		{"sealed for slot 2", seal(ident.ID, 2, secret), "does not open"},
		{"sealed for another job", seal(other.ID, 3, secret), "does not open"},
		{"tampered", tampered, "does not open"},
		{"another job's secret", seal(ident.ID, 3, otherSecret), "is not the secret half of the job key"},
		{"not a key", seal(ident.ID, 3, []byte("not a key")), "the job secret slot 0 sealed for spare slot 3: "},
	} {
		if _, err := openSecret(kem, pj, pmiCert{Secret: tc.ct}, 3); codes.Of(err) != codes.JobMalformed || !strings.Contains(fmt.Sprint(err), tc.want) {
			t.Errorf("%s: %v, want H1615 saying %q", tc.name, err, tc.want)
		}
	}
}
