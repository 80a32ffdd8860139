package job

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"sperli/codes"
	"sperli/hosts"
)

// Version is the version of the job description format.
const Version = 1

// Defaults of a job description's optional fields.
const (
	DefaultSilenceMS = 5000    // SPEC §7
	DefaultJoinMS    = 30000   // SPEC §4.2
	MinSilenceMS     = 100     // the smallest silence limit set_silence takes
	MaxLine          = 1 << 20 // the longest description line
)

// Host is one entry of a job's host table: where rank i listens.
type Host struct {
	Host string `json:"host"`
	Port int    `json:"port"`
}

// Job is a job description: everything one rank needs to join its job. It
// travels as one line of JSON (docs/protocol.md), the first line of the
// rank's standard input. It holds the rank's private key and token: treat
// it as a secret.
//
// The zero values of the optional fields mean: SilenceMS 5000, JoinMS 30000,
// ListenFD none (the rank binds its host's address itself), Launched false
// (started by hand: end-of-file on the control channel is ignored).
type Job struct {
	Version     int    `json:"v"`
	ID          string `json:"job"`
	Rank        int    `json:"rank"` // this process's slot: rank Rank at launch, a spare when Rank ≥ Size
	Size        int    `json:"size"`
	Spares      int    `json:"spares,omitempty"` // spare slots Size … Size+Spares-1 (SPEC §10)
	Incarnation uint32 `json:"inc"`
	// Hosts is where each slot listens; or Runs, the same as runs of
	// consecutive slots and ports (runs.go). A description has one of
	// them. HostOf reads either.
	Hosts         []Host `json:"hosts,omitempty"`
	Runs          []Run  `json:"runs,omitempty"`
	CA            []byte `json:"ca"`                  // the job CA's certificate, DER
	Cert          []byte `json:"cert"`                // this rank's certificate, DER
	Key           []byte `json:"key"`                 // this rank's Ed25519 private key seed (32 bytes)
	JobKey        []byte `json:"jobkey"`              // the composite job public key
	JobSecret     []byte `json:"jobsecret,omitempty"` // the composite job private key: rank 0 only
	Token         []byte `json:"token"`               // this rank's signed join token
	SilenceMS     int    `json:"silence_ms,omitempty"`
	JoinMS        int    `json:"join_ms,omitempty"`
	Launched      bool   `json:"launched,omitempty"`  // started by a launcher that holds stdin open
	ListenFD      int    `json:"listen_fd,omitempty"` // an inherited listening socket, 0 = none
	CheckpointDir string `json:"ckpt,omitempty"`
	Failures      string `json:"failures,omitempty"` // SPERLI_TEST_FAILURE_SCHEDULE, test only
	// Trace turns on the trace records of a launched rank (trace.go):
	// `sperli run --trace FILE`.
	Trace bool `json:"trace,omitempty"`
	// OneProgram says that every slot runs one program with one argument
	// list (sperli run): the slots compare their program digests on every
	// link (docs/protocol.md §3.1.1). Without it only the loss policies
	// are compared: a job may mix programs by design.
	OneProgram bool `json:"one_program,omitempty"`
	// Program is the launcher's program digest (ProgramDigest, in hex) of
	// a .star PROGRAM and its arguments: a Starlark rank checks the file
	// it read against it before it joins. "" for an executable PROGRAM.
	Program string `json:"program,omitempty"`

	// Not part of the description; set by ReadJob or by an embedder.

	// Control is the launcher's control channel (the rest of stdin after
	// the description line). ReadJob sets it to the reader it read from.
	Control io.Reader `json:"-"`
	// Listener, when set, is used instead of ListenFD or binding.
	Listener net.Listener `json:"-"`
	// Net, when set, is the network the rank listens in (when Listener
	// is not set) and dials its peers through, instead of TCP: tests and
	// simulations give an in-memory one (package memnet).
	Net Network `json:"-"`
	// Now is the job's clock: token expiry, and liveness (when a peer
	// was last heard, the silence limit's decisions); nil means time.Now.
	// A clock that stops stops the detector: tests move it on, they do
	// not freeze it.
	Now func() time.Time `json:"-"`
	// Logf receives the rank's own log lines (refusals seen while joining);
	// nil writes them to standard error prefixed "sperli: rank N: ".
	Logf func(format string, args ...any) `json:"-"`
	// OnLauncherLost, when set, is called after the job was ended because
	// the control channel of a launched rank reached its end; nil ends the
	// process (exit status 1) half a second later.
	OnLauncherLost func() `json:"-"`
	// ProgramDigest, when set, is the program digest this slot sends and
	// compares (ProgramDigest: `sperli rank` sets the Starlark file's; an
	// embedder may give one of its own). When nil and OneProgram is set,
	// the runtime digests the process's executable and os.Args[1:].
	ProgramDigest []byte `json:"-"`
	// Die, when set, replaces the SIGKILL of a scheduled test failure.
	Die      func()    `json:"-"`
	runOnce  sync.Once // runIndex
	runStart []int     // the first slot of each run

	// Env is what the process's environment said when the job was read
	// (Read sets it); nil for a description built by hand, for which
	// Validate reads the environment then (ReadEnv).
	Env *Env `json:"-"`
}

// Network is a network a rank listens in and dials through (Job.Net).
type Network interface {
	Listen(addr string) (net.Listener, error)
	DialContext(ctx context.Context, addr string) (net.Conn, error)
}

// Read reads a job description, the first line of r, and checks it
// (Validate) with the process's environment (ReadEnv, read here once and
// kept in Job.Env). It reads up to the line end and no further (readLine),
// so the rest of r stays the control channel, which it records in
// Job.Control. A missing, overlong or malformed line is H1615; a host
// table naming a refused host is H1614.
//
// Under Slurm (PMI_FD set) with no description on r, when r is the
// process's standard input, Read makes the description through PMI
// instead (FromPMI, PMIWanted; SPEC §17).
func Read(r io.Reader) (*Job, error) {
	return ReadWith(r, ReadEnv())
}

// ReadWith is Read with the environment env.
func ReadWith(r io.Reader, env Env) (*Job, error) {
	if f, ok := r.(*os.File); ok && f == os.Stdin && PMIWanted(f, env) {
		return FromPMI(context.Background(), env)
	}
	line, err := readLine(r)
	if err != nil {
		if e := codes.As(err); e != nil && env.SlurmStep && env.PMI.FD == "" {
			e.Msg += ", and srun gave no PMI_FD: start the ranks with srun --mpi=pmi2, or give each its description (sperli job make)"
		}
		return nil, err
	}
	j, err := parse(line, &env)
	if err != nil {
		return nil, err
	}
	j.Control = r
	return j, nil
}

// Parse decodes one job description line and checks it (Validate) with the
// process's environment (ReadEnv).
func Parse(line []byte) (*Job, error) {
	env := ReadEnv()
	return parse(line, &env)
}

func parse(line []byte, env *Env) (*Job, error) {
	line = bytes.TrimRight(line, "\r\n")
	if len(bytes.TrimSpace(line)) == 0 {
		return nil, codes.New(codes.JobMalformed, "job description missing: empty line")
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	j := Job{Env: env}
	if err := dec.Decode(&j); err != nil {
		return nil, codes.Wrap(codes.JobMalformed, err, "job description is not valid: %s", jsonErr(err))
	}
	if dec.More() {
		return nil, codes.New(codes.JobMalformed, "job description has data after its JSON object")
	}
	if err := j.Validate(); err != nil {
		return nil, err
	}
	return &j, nil
}

func jsonErr(err error) string {
	// json's messages name Go types; keep them, they say what was wrong.
	return strings.TrimPrefix(err.Error(), "json: ")
}

// Encode returns the job description as one line of JSON, without the line end.
func (j *Job) Encode() []byte {
	b, err := json.Marshal(j)
	if err != nil {
		panic("job: job description does not encode: " + err.Error()) // only plain fields: cannot happen
	}
	return b
}

// Validate checks the description's fields: H1615 naming the first field
// that is wrong, or H1614 for a host table that names a refused host
// (SPEC §4.4, with the environment's SPERLI_REFUSED_HOSTS as Job.Env
// holds it, or as ReadEnv reads it now when Env is nil).
func (j *Job) Validate() error {
	bad := func(format string, args ...any) error {
		return codes.New(codes.JobMalformed, "job description: "+format, args...)
	}
	switch {
	case j.Version != Version:
		return bad("version is %d, want %d", j.Version, Version)
	case !validJobID(j.ID):
		return bad("job id %q is not 32 hex digits", j.ID)
	case j.Size < 1 || j.Size > MaxSize:
		return bad("size is %d, want 1 to %d", j.Size, MaxSize)
	case j.Spares < 0 || j.Size+j.Spares > MaxSize:
		return bad("spares is %d, want 0 to %d", j.Spares, MaxSize-j.Size)
	case j.Rank < 0 || j.Rank >= j.Slots():
		return bad("rank is %d, want 0 to %d", j.Rank, j.Slots()-1)
	case (j.Hosts == nil) == (j.Runs == nil):
		return bad("it has %d host entries and %d runs, want one of the two", len(j.Hosts), len(j.Runs))
	case j.Runs == nil && len(j.Hosts) != j.Slots():
		return bad("host table has %d entries, want %d (the size and the spares)", len(j.Hosts), j.Slots())
	case len(j.CA) == 0:
		return bad("ca is missing")
	case len(j.Cert) == 0:
		return bad("cert is missing")
	case len(j.Key) != 32:
		return bad("key is %d bytes, want 32", len(j.Key))
	case len(j.JobKey) == 0:
		return bad("jobkey is missing")
	case len(j.Token) == 0:
		return bad("token is missing")
	case j.Rank != 0 && j.Rank < j.Size && len(j.JobSecret) != 0:
		return bad("jobsecret given to rank %d; only rank 0 and the spares hold it", j.Rank)
	case j.SilenceMS != 0 && (j.SilenceMS < MinSilenceMS || j.SilenceMS > MaxSilenceMS):
		return bad("silence_ms is %d, want %d to %d", j.SilenceMS, MinSilenceMS, MaxSilenceMS)
	case j.JoinMS < 0 || j.JoinMS > 3600000:
		return bad("join_ms is %d, want 0 to 3600000", j.JoinMS)
	case j.ListenFD < 0:
		return bad("listen_fd is %d, want 0 (none) or a descriptor", j.ListenFD)
	case j.Program != "" && !validDigest(j.Program):
		return bad("program %q is not 64 lower-case hex digits", j.Program)
	case j.Program != "" && !j.OneProgram:
		return bad("program is given without one_program")
	case j.ProgramDigest != nil && len(j.ProgramDigest) != DigestSize:
		return bad("program digest is %d bytes, want %d", len(j.ProgramDigest), DigestSize)
	}
	if j.Runs != nil {
		if err := checkRuns(j.Runs, j.Slots()); err != nil {
			return bad("%v", err)
		}
	}
	for i, h := range j.hostEntries() {
		if h.Host == "" || len(h.Host) > 253 || strings.ContainsAny(h.Host, " \t\r\n/") {
			return bad("host %d is %q, not a host name or address", i, h.Host)
		}
		if h.Port < 1 || h.Port > 65535 {
			return bad("host %d (%s) has port %d, want 1 to 65535", i, h.Host, h.Port)
		}
	}
	if err := checkFailures(j.Failures); err != nil {
		return err
	}
	if j.Runs != nil {
		j.runIndex()
		return checkHosts(j.hostEntries(), func(i int) int { return j.runStart[i] }, j.Environment().Refused)
	}
	return checkHostTable(j.Hosts, j.Environment().Refused)
}

// Slots is the number of processes of the job: its ranks and its spares.
func (j *Job) Slots() int { return j.Size + j.Spares }

// MaxSize is the largest job this version runs (1,048,576 slots): slots
// are u32 on the wire (docs/protocol.md §12.2, §12.4), so that a job of
// 100,000 (SPEC §18's simulation, docs/scale.md) is not refused.
const MaxSize = 1 << 20

// MaxSilenceMS is the longest silence limit (one day).
const MaxSilenceMS = 86400000

func validJobID(s string) bool { return len(s) == 32 && lowerHex(s) }

// validDigest reports whether s is a digest in hex: 64 lower-case digits.
func validDigest(s string) bool { return len(s) == 2*DigestSize && lowerHex(s) }

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Silence is the silence limit after which a peer is declared lost.
func (j *Job) Silence() time.Duration {
	if j.SilenceMS == 0 {
		return DefaultSilenceMS * time.Millisecond
	}
	return time.Duration(j.SilenceMS) * time.Millisecond
}

// JoinWindow is how long the join may take.
func (j *Job) JoinWindow() time.Duration {
	if j.JoinMS == 0 {
		return DefaultJoinMS * time.Millisecond
	}
	return time.Duration(j.JoinMS) * time.Millisecond
}

// Clock is the time now by the job's clock (Now, else time.Now).
func (j *Job) Clock() time.Time {
	if j.Now != nil {
		return j.Now()
	}
	return time.Now()
}

// Log writes one of the rank's own log lines (Logf, else standard error
// prefixed "sperli: rank N: ").
func (j *Job) Log(format string, args ...any) {
	if j.Logf != nil {
		j.Logf(format, args...)
		return
	}
	fmt.Fprintf(os.Stderr, "sperli: rank %d: "+format+"\n", append([]any{j.Rank}, args...)...)
}

// checkHostTable applies the refused-host rule of SPEC §4.4 to a job's host
// table, as every part that reads hosts must.
func checkHostTable(table []Host, env string) error {
	return checkHosts(table, func(i int) int { return i }, env)
}

// checkHosts is checkHostTable of entries whose first slots slotOf gives.
func checkHosts(table []Host, slotOf func(i int) int, env string) error {
	r := hosts.NewRefuser(env, nil)
	for i, h := range table {
		if why, refused := r.Refused(h.Host); refused {
			return codes.New(codes.HostRefused, "host %s of rank %d refused (%s)", h.Host, slotOf(i), why)
		}
	}
	return nil
}
