package job

// The PMI-1 bootstrap of SPEC §17: a rank started by `srun --mpi=pmi2`
// with no job description on standard input makes its description with
// the other slots of its job step through the process manager's key-value
// space, spoken as PMI-1's text protocol on the descriptor PMI_FD. No
// library is linked and nothing secret crosses PMI: every slot makes its
// own Ed25519 key and publishes only its public half, slot 0 makes the CA
// and the job key, certifies every slot's key, signs every token and
// publishes certificates and tokens (which are not secret without the
// private keys). docs/hosts.md (Slurm) says how to run it; the exchange is:
//
//	every slot:  put sperli-p-<slot> = {host, port, pub}; barrier
//	slot 0:      get every sperli-p-*; put sperli-job = {id, ca, jobkey,
//	             hosts or runs} and sperli-c-<slot> = {cert, token} for each slot,
//	             or sperli-err = {code, msg} if it refuses; barrier
//	every slot:  barrier (the second); get sperli-err, sperli-job,
//	             sperli-c-<own slot>; check; finalize
//
// A value travels as base64url without padding, cut into chunks that fit
// one PMI command line (Slurm reads a command with one read of 1024 bytes):
// KEY.n holds the number of chunks, KEY.0 … the chunks. Everything read
// from PMI is length- and range-checked before it is used; any failure is
// H1615 naming what was wrong (H1614 for a refused host).

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/hpke"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"sperli/codes"
	"sperli/pki"
)

// Limits of the PMI exchange.
const (
	pmiLineMax   = 1024    // the longest command line sent (Slurm's MAX_READLINE)
	pmiAnswerMax = 4096    // the longest answer line accepted
	pmiRecordMax = 2 << 20 // the largest record assembled from chunks
	pmiKeyMax    = 64      // PMI-1's key length limit
	pmiNameMax   = 256     // the longest KVS name accepted
)

// PMI keys.
const (
	pmiKeyPeer = "sperli-p-" // + slot
	pmiKeyCert = "sperli-c-" // + slot
	pmiKeyJob  = "sperli-job"
	pmiKeyErr  = "sperli-err"
)

// pmiErr is the error of a PMI bootstrap: H1615.
func pmiErr(format string, args ...any) error {
	return codes.New(codes.JobMalformed, "PMI bootstrap: "+format, args...)
}

// PMIWanted reports whether a rank whose standard input is stdin should
// bootstrap through PMI (FromPMI) instead of reading a description: PMI_FD
// is set and stdin holds no description, that is, stdin is not a regular
// file with data (`< rank-1.job`) and not a pipe or socket on which data
// is waiting or comes within a second (a launcher writes the description
// at once). srun gives every task but the first /dev/null, and the first
// srun's own standard input.
func PMIWanted(stdin *os.File, env Env) bool {
	if env.PMI.FD == "" || stdin == nil {
		return false
	}
	fi, err := stdin.Stat()
	if err != nil {
		return true
	}
	switch m := fi.Mode(); {
	case m.IsRegular():
		return fi.Size() == 0
	case m&(os.ModeNamedPipe|os.ModeSocket) != 0:
		return !dataWaiting(stdin, time.Second)
	}
	return true // a terminal, /dev/null
}

// pmiSlot is what every slot publishes: where it listens and its public
// key; a spare also an HPKE public key, to which slot 0 seals the job
// secret (a spare may become rank 0, which signs the checkpoints).
type pmiSlot struct {
	Host string `json:"host"`
	Port int    `json:"port"`
	Pub  []byte `json:"pub"`
	KEM  []byte `json:"kem,omitempty"`
}

// pmiJob is what slot 0 publishes for all.
type pmiJob struct {
	ID     string `json:"job"`
	Size   int    `json:"size"`             // the slots: ranks and spares
	Spares int    `json:"spares,omitempty"` // the last Spares slots are spares
	Hosts  []Host `json:"hosts,omitempty"`
	// Runs is the host table as runs (Compact) when that is shorter —
	// with srun's reserved ports a run a node, so that what every slot
	// reads is O(nodes), not O(ranks) (SPEC §18) — and Hosts is empty.
	Runs   []Run  `json:"runs,omitempty"`
	CA     []byte `json:"ca"`
	JobKey []byte `json:"jobkey"`
}

// pmiCert is what slot 0 publishes for one slot.
type pmiCert struct {
	Cert  []byte `json:"cert"`
	Token []byte `json:"token"`
	// Secret is, for a spare, the job secret sealed with HPKE to the
	// spare's KEM key (secretSuite, info secretInfo): only that spare
	// opens it.
	Secret []byte `json:"secret,omitempty"`
}

// pmiRefusal is what slot 0 publishes when it makes no job.
type pmiRefusal struct {
	Code string `json:"code"`
	Msg  string `json:"msg"`
}

// PMIEnv is what FromPMI reads from the environment (Env.PMI).
type PMIEnv struct {
	FD        string // PMI_FD
	Rank      string // PMI_RANK (else SLURM_PROCID)
	Size      string // PMI_SIZE (else SLURM_NTASKS)
	ResvPorts string // SLURM_STEP_RESV_PORTS
	LocalID   string // SLURM_LOCALID
	LaunchIP  string // SLURM_LAUNCH_NODE_IPADDR
	Spares    string // SPERLI_SPARES: the last S tasks of the step are spares
}

// FromPMI makes this process's job description through PMI-1 (SPEC §17),
// as the package comment of pmi.go describes, and returns it with its
// Listener bound (the port srun reserved for this task, else a free one).
// It waits for the other slots at most until ctx ends, or the join window
// (30 s) when ctx has no deadline. Without PMI_FD, or when the process
// manager answers anything but the protocol, it is H1615 naming what was
// wrong; a host table with a refused host (SPEC §4.4) is H1614 on every
// slot.
func FromPMI(ctx context.Context, e Env) (*Job, error) {
	env := e.PMI
	if env.FD == "" {
		return nil, pmiErr("PMI_FD is not set: start the ranks with srun --mpi=pmi2, or give each a job description on standard input (sperli job make)")
	}
	fd, err := strconv.Atoi(env.FD)
	if err != nil || fd < 0 || fd > 1<<20 {
		return nil, pmiErr("PMI_FD is %q, want a descriptor number", env.FD)
	}
	size, err := strconv.Atoi(env.Size)
	if err != nil || size < 1 || size > MaxSize {
		return nil, pmiErr("PMI_SIZE is %q, want 1 to %d", env.Size, MaxSize)
	}
	rank, err := strconv.Atoi(env.Rank)
	if err != nil || rank < 0 || rank >= size {
		return nil, pmiErr("PMI_RANK is %q, want 0 to %d", env.Rank, size-1)
	}
	spares, err := pmiSpares(env.Spares, size)
	if err != nil {
		return nil, err
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(DefaultJoinMS * time.Millisecond)
	}
	f := os.NewFile(uintptr(fd), "pmi")
	conn, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, pmiErr("PMI_FD %d is not a socket to the process manager: %v", fd, err)
	}
	p := &pmiClient{conn: conn, ctx: ctx, deadline: deadline}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	j, err := p.bootstrap(rank, size, spares, e)
	if err != nil {
		return nil, err
	}
	return j, nil
}

// pmiSpares reads SPERLI_SPARES: how many of the step's size tasks, the
// last ones, are spares (SPEC §10); "" is none. A job keeps one rank at
// least.
func pmiSpares(v string, size int) (int, error) {
	if v == "" {
		return 0, nil
	}
	s, err := strconv.Atoi(v)
	if err != nil || s < 0 || s >= size {
		return 0, pmiErr("SPERLI_SPARES is %q, want 0 to %d: srun -n counts the ranks and the spares, and this step has %d tasks", v, size-1, size)
	}
	return s, nil
}

// The suite the job secret is sealed with to a spare: HPKE (RFC 9180) with
// the hybrid ML-KEM-768 + X25519 KEM, as the job key itself pairs a
// classical and a post-quantum signature.
var (
	secretKEM  = hpke.MLKEM768X25519()
	secretKDF  = hpke.HKDFSHA256()
	secretAEAD = hpke.AES256GCM()
)

// secretInfo binds a sealed job secret to its job and slot: one sealed for
// another slot or job does not open.
func secretInfo(id string, slot int) []byte {
	return fmt.Appendf(nil, "sperli job secret\x00%s\x00%d", id, slot)
}

// bootstrap is FromPMI after the environment was read.
func (p *pmiClient) bootstrap(rank, size, spares int, e Env) (_ *Job, err error) {
	env := e.PMI
	if err := p.init(); err != nil {
		return nil, err
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, pmiErr("making the rank key: %v", err)
	}
	port, err := reservedPort(env.ResvPorts, env.LocalID)
	if err != nil {
		return nil, err
	}
	host, err := pmiHost(env.LaunchIP)
	if err != nil {
		return nil, err
	}
	// An address is listened at itself; a name at every address.
	bind := ""
	if ip := net.ParseIP(host); ip != nil {
		bind = host
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(bind, strconv.Itoa(port)))
	if err != nil {
		if port != 0 {
			return nil, codes.Wrap(codes.Unreachable, err, "rank %d cannot listen at port %d, which srun reserved for it (SLURM_STEP_RESV_PORTS=%s): %v: another process holds it; start the step again, or without --resv-ports (a free port is taken)", rank, port, env.ResvPorts, err)
		}
		return nil, codes.Wrap(codes.Unreachable, err, "rank %d cannot listen at a free port: %v", rank, err)
	}
	defer func() {
		if err != nil {
			ln.Close()
		}
	}()
	self := pmiSlot{Host: host, Port: ln.Addr().(*net.TCPAddr).Port, Pub: pub}
	spare := rank >= size-spares
	var kem hpke.PrivateKey
	if spare {
		if kem, err = secretKEM.GenerateKey(); err != nil {
			return nil, pmiErr("making the spare's HPKE key: %v", err)
		}
		self.KEM = kem.PublicKey().Bytes()
	}
	if err := p.putRecord(pmiKeyPeer+strconv.Itoa(rank), self); err != nil {
		return nil, err
	}
	if err := p.barrier(); err != nil {
		return nil, err
	}
	var jobSecret []byte
	if rank == 0 {
		if jobSecret, err = p.certifyAll(size, spares, e.Refused); err != nil {
			return nil, err
		}
	}
	if err := p.barrier(); err != nil {
		return nil, err
	}
	var refusal pmiRefusal
	if found, err := p.getRecord(pmiKeyErr, &refusal, false); err != nil {
		return nil, err
	} else if found {
		c, ok := codes.Parse(refusal.Code)
		if !ok {
			c = codes.JobMalformed
		}
		return nil, codes.New(c, "%s (from slot 0)", codes.OneLine(truncateMsg(refusal.Msg)))
	}
	var pj pmiJob
	if _, err := p.getRecord(pmiKeyJob, &pj, true); err != nil {
		return nil, err
	}
	var pc pmiCert
	if _, err := p.getRecord(pmiKeyCert+strconv.Itoa(rank), &pc, true); err != nil {
		return nil, err
	}
	if pj.Size != size {
		return nil, pmiErr("slot 0 made a job of %d ranks, PMI_SIZE is %d", pj.Size, size)
	}
	if pj.Spares != spares {
		return nil, pmiErr("slot 0 made a job with %d spares, SPERLI_SPARES is %q here: give every task of the step the same", pj.Spares, e.PMI.Spares)
	}
	if spare {
		if jobSecret, err = openSecret(kem, pj, pc, rank); err != nil {
			return nil, err
		}
	}
	j := &Job{Version: Version, ID: pj.ID, Rank: rank, Size: size - spares, Spares: spares, Hosts: pj.Hosts, Runs: pj.Runs}
	if (pj.Hosts == nil) == (pj.Runs == nil) {
		return nil, pmiErr("slot 0's job has %d host entries and %d runs, want one of the two", len(pj.Hosts), len(pj.Runs))
	}
	if pj.Runs != nil {
		if err := checkRuns(pj.Runs, size); err != nil {
			return nil, pmiErr("slot 0's host table: %v", err)
		}
	}
	if len(pj.Hosts) != 0 && len(pj.Hosts) != size {
		return nil, pmiErr("slot 0's host table has %d entries, want %d", len(pj.Hosts), size)
	}
	if h := j.HostOf(rank); h.Host != self.Host || h.Port != self.Port {
		return nil, pmiErr("slot 0's host table does not hold this slot as it published itself (%s port %d)", self.Host, self.Port)
	}
	cert, err := x509.ParseCertificate(pc.Cert)
	if err != nil {
		return nil, pmiErr("the certificate slot 0 made for slot %d does not parse: %v", rank, err)
	}
	if certPub, ok := cert.PublicKey.(ed25519.PublicKey); !ok || !certPub.Equal(pub) {
		return nil, pmiErr("the certificate slot 0 made for slot %d is not for this slot's key", rank)
	}
	j.CA, j.Cert, j.Key, j.JobKey, j.JobSecret, j.Token, j.Env = pj.CA, pc.Cert, priv.Seed(), pj.JobKey, jobSecret, pc.Token, &e
	if err := j.Validate(); err != nil {
		return nil, err
	}
	p.finalize()
	j.Listener = ln
	return j, nil
}

// openSecret opens the job secret slot 0 sealed for spare slot: it must be
// the secret half of the job's key.
func openSecret(kem hpke.PrivateKey, pj pmiJob, pc pmiCert, slot int) ([]byte, error) {
	if len(pc.Secret) == 0 {
		return nil, pmiErr("slot 0 sealed no job secret for spare slot %d", slot)
	}
	secret, err := hpke.Open(kem, secretKDF, secretAEAD, secretInfo(pj.ID, slot), pc.Secret)
	if err != nil {
		return nil, pmiErr("the job secret slot 0 sealed for spare slot %d does not open: %v", slot, err)
	}
	priv, err := pki.UnmarshalPrivateKey(secret)
	if err != nil {
		return nil, pmiErr("the job secret slot 0 sealed for spare slot %d: %v", slot, err)
	}
	pub, err := priv.Public().MarshalBinary()
	if err != nil || !bytes.Equal(pub, pj.JobKey) {
		return nil, pmiErr("the job secret slot 0 sealed for spare slot %d is not the secret half of the job key", slot)
	}
	return secret, nil
}

// certifyAll is slot 0's part: it reads every slot's record, checks the
// host table, makes the job identity and publishes the job, or publishes
// why it refuses. It returns the job key's secret half. An error of PMI
// itself is returned; a refusal is published and returned.
func (p *pmiClient) certifyAll(size, spares int, refusedEnv string) ([]byte, error) {
	slots := make([]pmiSlot, size)
	hosts := make([]Host, size)
	for r := range slots {
		hosts[r] = Host{Host: slots[r].Host, Port: slots[r].Port}
	}
	refuse := func(err error) ([]byte, error) {
		c, msg := codes.JobMalformed, err.Error()
		if e := codes.As(err); e != nil {
			c, msg = e.Code, e.Msg
		}
		if perr := p.putRecord(pmiKeyErr, pmiRefusal{Code: c.String(), Msg: msg}); perr != nil {
			return nil, perr
		}
		// The others learn it after the second barrier.
		if perr := p.barrier(); perr != nil {
			return nil, perr
		}
		return nil, err
	}
	for r := range slots {
		if _, err := p.getRecord(pmiKeyPeer+strconv.Itoa(r), &slots[r], true); err != nil {
			// Tell the others, if PMI still carries it.
			return refuse(err)
		}
		hosts[r] = Host{Host: slots[r].Host, Port: slots[r].Port}
	}
	for r, s := range slots {
		if len(s.Pub) != ed25519.PublicKeySize {
			return refuse(pmiErr("slot %d published a public key of %d bytes, want %d", r, len(s.Pub), ed25519.PublicKeySize))
		}
		if !validHostName(s.Host) {
			return refuse(pmiErr("slot %d published host %q, not a host name or address", r, truncateMsg(s.Host)))
		}
		if s.Port < 1 || s.Port > 65535 {
			return refuse(pmiErr("slot %d published port %d, want 1 to 65535", r, s.Port))
		}
		if r >= size-spares {
			if _, err := secretKEM.NewPublicKey(s.KEM); err != nil {
				return refuse(pmiErr("spare slot %d published an HPKE key of %d bytes that is not one (%v)", r, len(s.KEM), err))
			}
		}
	}
	if err := checkHostTable(hosts, refusedEnv); err != nil {
		return refuse(err)
	}
	ident, err := NewIdentity()
	if err != nil {
		return refuse(pmiErr("%v", err))
	}
	pubBytes, secret, err := ident.keys()
	if err != nil {
		return refuse(err)
	}
	now := time.Now()
	// Tokens serve the join only; certificates last the job (a week).
	tokenEnd := now.Add(DefaultJoinMS*time.Millisecond + 10*time.Minute)
	certEnd := now.Add(7 * 24 * time.Hour)
	certs := make([]pmiCert, size)
	for r, s := range slots {
		der, err := ident.CA.Certify(ident.ID, r, s.Host, ed25519.PublicKey(s.Pub), certEnd)
		if err != nil {
			return refuse(err)
		}
		tok, err := ident.token(r, size, 0, s.Host, tokenEnd)
		if err != nil {
			return refuse(pmiErr("%v", err))
		}
		certs[r] = pmiCert{Cert: der, Token: tok}
		if r >= size-spares {
			kem, _ := secretKEM.NewPublicKey(s.KEM) // checked above
			if certs[r].Secret, err = hpke.Seal(kem, secretKDF, secretAEAD, secretInfo(ident.ID, r), secret); err != nil {
				return refuse(pmiErr("sealing the job secret for spare slot %d: %v", r, err))
			}
		}
	}
	pj := pmiJob{ID: ident.ID, Size: size, Spares: spares, Hosts: hosts, CA: ident.CA.CertDER, JobKey: pubBytes}
	if runs := Compact(hosts); runs != nil {
		pj.Hosts, pj.Runs = nil, runs
	}
	if err := p.putRecord(pmiKeyJob, pj); err != nil {
		return nil, err
	}
	for r := range certs {
		if err := p.putRecord(pmiKeyCert+strconv.Itoa(r), certs[r]); err != nil {
			return nil, err
		}
	}
	return secret, nil
}

func validHostName(h string) bool {
	return h != "" && len(h) <= 253 && !strings.ContainsAny(h, " \t\r\n/")
}

func truncateMsg(s string) string {
	if len(s) > 512 {
		return s[:512] + "…"
	}
	return s
}

// reservedPort returns the port srun reserved for this task: entry
// SLURM_LOCALID of SLURM_STEP_RESV_PORTS ("12000-12003" or "12000,12005"
// or both mixed), or 0 (a free port) when none was reserved.
func reservedPort(list, localID string) (int, error) {
	if list == "" {
		return 0, nil
	}
	idx, err := strconv.Atoi(localID)
	if err != nil || idx < 0 || idx > 65535 {
		return 0, pmiErr("SLURM_LOCALID is %q, want a task number on this node", localID)
	}
	n := 0
	for _, part := range strings.Split(list, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		b := a
		var err2 error
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || a < 1 || b > 65535 || a > b {
			return 0, pmiErr("SLURM_STEP_RESV_PORTS is %q: %q is not a port or a range of ports", list, part)
		}
		if idx < n+(b-a+1) {
			return a + idx - n, nil
		}
		n += b - a + 1
	}
	return 0, pmiErr("SLURM_STEP_RESV_PORTS is %q: %d ports for this node, but this task's SLURM_LOCALID is %d (reserve one port per task: srun --resv-ports=N, N at least the tasks per node)", list, n, idx)
}

// pmiHost returns the name the other slots reach this one by: its address
// on the route towards srun (SLURM_LAUNCH_NODE_IPADDR), else the host name.
// Finding the route sends nothing (a UDP socket is only connected).
func pmiHost(launchIP string) (string, error) {
	if ip := net.ParseIP(launchIP); ip != nil {
		c, err := net.Dial("udp", net.JoinHostPort(ip.String(), "9"))
		if err == nil {
			local := c.LocalAddr().(*net.UDPAddr).IP
			c.Close()
			if !local.IsUnspecified() {
				return local.String(), nil
			}
		}
	}
	h, err := os.Hostname()
	if err != nil || !validHostName(h) {
		return "", pmiErr("this node has no usable host name (%q, %v) and SLURM_LAUNCH_NODE_IPADDR is %q", h, err, launchIP)
	}
	return h, nil
}

// pmiClient speaks PMI-1 on one connection, one command at a time.
type pmiClient struct {
	conn     net.Conn
	ctx      context.Context
	deadline time.Time
	kvs      string
	chunk    int    // the longest value sent in one put
	buf      []byte // answer bytes read past the last line end
}

// init is the PMI-1 handshake: init, get_maxes, get_my_kvsname.
func (p *pmiClient) init() error {
	a, err := p.do("cmd=init pmi_version=1 pmi_subversion=1", "response_to_init")
	if err != nil {
		return err
	}
	if a["pmi_version"] != "1" {
		return pmiErr("the process manager answers PMI version %q, want 1 (srun --mpi=pmi2 speaks it)", truncateMsg(a["pmi_version"]))
	}
	a, err = p.do("cmd=get_maxes", "maxes")
	if err != nil {
		return err
	}
	vallen, err1 := strconv.Atoi(a["vallen_max"])
	keylen, err2 := strconv.Atoi(a["keylen_max"])
	if err1 != nil || err2 != nil || vallen < 64 || vallen > 1<<20 || keylen < 16 || keylen > 1<<20 {
		return pmiErr("the process manager's limits vallen_max=%q keylen_max=%q are out of range (want 64 to 1048576 and 16 to 1048576)", truncateMsg(a["vallen_max"]), truncateMsg(a["keylen_max"]))
	}
	a, err = p.do("cmd=get_my_kvsname", "my_kvsname")
	if err != nil {
		return err
	}
	p.kvs = a["kvsname"]
	if p.kvs == "" || len(p.kvs) > pmiNameMax || !printable(p.kvs) {
		return pmiErr("the process manager's kvsname %q is empty, longer than %d bytes or not printable", truncateMsg(p.kvs), pmiNameMax)
	}
	// A put line is "cmd=put kvsname=K key=KEY value=V\n": the value gets
	// what the line limit leaves.
	room := pmiLineMax - len("cmd=put kvsname= key= value=\n") - len(p.kvs) - pmiKeyMax
	p.chunk = min(vallen, room)
	if p.chunk < 64 {
		return pmiErr("the kvsname %q leaves no room for values in a PMI line", truncateMsg(p.kvs))
	}
	return nil
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f || s[i] == '=' {
			return false
		}
	}
	return true
}

// finalize ends the PMI session; its answer is not waited for long.
func (p *pmiClient) finalize() {
	p.deadline = time.Now().Add(2 * time.Second)
	_, _ = p.do("cmd=finalize", "finalize_ack")
}

func (p *pmiClient) barrier() error {
	_, err := p.do("cmd=barrier_in", "barrier_out")
	return err
}

func (p *pmiClient) put(key, value string) error {
	_, err := p.do("cmd=put kvsname="+p.kvs+" key="+key+" value="+value, "put_result")
	return err
}

// get returns the value of key, found false when the process manager has
// none (rc not 0).
func (p *pmiClient) get(key string) (value string, found bool, err error) {
	a, err := p.send("cmd=get kvsname="+p.kvs+" key="+key, "get_result")
	if err != nil {
		return "", false, err
	}
	if a["rc"] != "0" {
		return "", false, nil
	}
	v, ok := a["value"]
	if !ok {
		return "", false, pmiErr("the answer to get %s has rc=0 and no value", key)
	}
	return v, true, nil
}

// putRecord publishes v as JSON, base64url, chunked.
func (p *pmiClient) putRecord(key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return pmiErr("encoding %s: %v", key, err)
	}
	enc := base64.RawURLEncoding.EncodeToString(b)
	if len(enc) > pmiRecordMax {
		return pmiErr("%s is %d bytes, more than %d", key, len(enc), pmiRecordMax)
	}
	n := (len(enc) + p.chunk - 1) / p.chunk
	for i := 0; i < n; i++ {
		part := enc[i*p.chunk : min(len(enc), (i+1)*p.chunk)]
		if err := p.put(key+"."+strconv.Itoa(i), part); err != nil {
			return err
		}
	}
	return p.put(key+".n", strconv.Itoa(n))
}

// getRecord reads a record that putRecord published into v (strictly:
// no unknown field). found is false when need is false and the record is
// absent. Every chunk count, chunk and decoded byte is checked.
func (p *pmiClient) getRecord(key string, v any, need bool) (found bool, err error) {
	ns, found, err := p.get(key + ".n")
	if err != nil {
		return false, err
	}
	if !found {
		if need {
			return false, pmiErr("the process manager has no %s (slot 0 did not publish the job)", key)
		}
		return false, nil
	}
	maxChunks := (pmiRecordMax + p.chunk - 1) / p.chunk
	n, err := strconv.Atoi(ns)
	if err != nil || n < 1 || n > maxChunks {
		return false, pmiErr("%s.n is %q, want a chunk count of 1 to %d", key, truncateMsg(ns), maxChunks)
	}
	var enc strings.Builder
	for i := 0; i < n; i++ {
		part, ok, err := p.get(key + "." + strconv.Itoa(i))
		if err != nil {
			return false, err
		}
		if !ok {
			return false, pmiErr("%s.%d is missing (%d chunks announced)", key, i, n)
		}
		if len(part) == 0 || len(part) > p.chunk {
			return false, pmiErr("%s.%d is %d bytes, want 1 to %d", key, i, len(part), p.chunk)
		}
		enc.WriteString(part)
	}
	b, err := base64.RawURLEncoding.DecodeString(enc.String())
	if err != nil {
		return false, pmiErr("%s is not base64url: %v", key, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return false, pmiErr("%s does not decode: %s", key, truncateMsg(jsonErr(err)))
	}
	if dec.More() {
		return false, pmiErr("%s has data after its record", key)
	}
	return true, nil
}

// do sends one command and reads its answer, which must have rc=0.
func (p *pmiClient) do(line, want string) (map[string]string, error) {
	a, err := p.send(line, want)
	if err != nil {
		return nil, err
	}
	if rc, ok := a["rc"]; ok && rc != "0" {
		return nil, pmiErr("the process manager answers %s with rc=%s%s", want, truncateMsg(rc), msgOf(a))
	}
	return a, nil
}

func msgOf(a map[string]string) string {
	if m := a["msg"]; m != "" {
		return ": " + truncateMsg(m)
	}
	return ""
}

// send writes line (one write: the server reads a command in one read)
// and reads the answer line, whose cmd must be want.
func (p *pmiClient) send(line, want string) (map[string]string, error) {
	if len(line)+1 > pmiLineMax {
		return nil, pmiErr("command %.40q… is %d bytes, more than PMI's %d", line, len(line)+1, pmiLineMax)
	}
	if err := p.ctx.Err(); err != nil {
		return nil, p.ioErr(want, err)
	}
	p.conn.SetDeadline(p.deadline)
	if _, err := p.conn.Write([]byte(line + "\n")); err != nil {
		return nil, p.ioErr(want, err)
	}
	ans, err := p.readLine()
	if err != nil {
		return nil, p.ioErr(want, err)
	}
	a, err := parsePMI(ans)
	if err != nil {
		return nil, err
	}
	if a["cmd"] != want {
		return nil, pmiErr("the process manager answers %q, want cmd=%s", truncateMsg(ans), want)
	}
	return a, nil
}

func (p *pmiClient) ioErr(want string, err error) error {
	var ne net.Error
	switch {
	case p.ctx.Err() != nil:
		return codes.Wrap(codes.JobMalformed, err, "PMI bootstrap: waiting for %s: %v", want, p.ctx.Err())
	case errors.As(err, &ne) && ne.Timeout():
		return codes.Wrap(codes.JobMalformed, err, "PMI bootstrap: no %s from the process manager before the deadline (a slot of the step did not start, or slot 0 failed)", want)
	}
	return codes.Wrap(codes.JobMalformed, err, "PMI bootstrap: waiting for %s: %v", want, err)
}

// readLine reads one answer line of at most pmiAnswerMax bytes.
func (p *pmiClient) readLine() (string, error) {
	for {
		if i := bytes.IndexByte(p.buf, '\n'); i >= 0 {
			line := string(p.buf[:i])
			p.buf = p.buf[i+1:]
			return line, nil
		}
		if len(p.buf) >= pmiAnswerMax {
			return "", pmiErr("an answer of the process manager is longer than %d bytes", pmiAnswerMax)
		}
		var b [1024]byte
		n, err := p.conn.Read(b[:min(len(b), pmiAnswerMax+1-len(p.buf))])
		p.buf = append(p.buf, b[:n]...)
		if err != nil {
			if n > 0 {
				continue
			}
			if errors.Is(err, io.EOF) {
				return "", fmt.Errorf("the process manager closed PMI_FD")
			}
			return "", err
		}
	}
}

// parsePMI splits a PMI-1 answer, "cmd=NAME key=value …", into its
// fields; each must be key=value with a key of letters, digits and _.
func parsePMI(line string) (map[string]string, error) {
	a := map[string]string{}
	for _, f := range strings.Fields(line) {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" || len(a) >= 32 {
			return nil, pmiErr("the process manager's answer %q is not PMI-1 (key=value fields)", truncateMsg(line))
		}
		for i := 0; i < len(k); i++ {
			if c := k[i]; !(c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
				return nil, pmiErr("the process manager's answer %q has a field %q that is not PMI-1", truncateMsg(line), truncateMsg(k))
			}
		}
		if _, dup := a[k]; dup {
			return nil, pmiErr("the process manager's answer %q repeats %s", truncateMsg(line), k)
		}
		a[k] = v
	}
	if a["cmd"] == "" {
		return nil, pmiErr("the process manager's answer %q has no cmd", truncateMsg(line))
	}
	return a, nil
}
