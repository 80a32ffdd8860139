package runtime

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	goruntime "runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"sperli/codes"
	"sperli/hosts"
	"sperli/pki"
	"sperli/runtime/mesh"
	"sperli/wire"
)

// dialRetry is how often a dial to a rank that does not listen yet is tried
// again (SPEC §4.2).
const dialRetry = 100 * time.Millisecond

// joined is one connection of the mesh, handshaken and helloed.
type joined struct {
	rank    int
	conn    net.Conn
	silence uint32
	key     ed25519.PublicKey // the peer's certificate's
}

type joinState struct {
	c        *Comm
	j        *Job
	pool     *x509.CertPool
	cert     tls.Certificate
	deadline time.Time     // the end of the join window
	spin     time.Duration // the reads' spin limit once joined (spin.go)
	gate     *mesh.Gate    // bounds the handshakes computing at once (mesh/gate.go)
	fatalCh  chan error    // a dial refused for good during the join
	// program and policy are this slot's digests, sent in its hello and
	// compared with every peer's (docs/protocol.md §3.1.1); program is
	// zero when the job does not say that every slot runs one program.
	program, policy [wire.DigestSize]byte

	mu      sync.Mutex
	refusal map[int]error // the last refusal seen for each rank (-1: unknown rank)
	failed  map[int]error // the last failed dial of each rank during the join (timeout says it)
	logged  logLimit
}

// fatal ends the join with err (a dial refused for good).
func (s *joinState) fatal(err error) {
	select {
	case s.fatalCh <- err:
	default:
	}
}

// addrOf is where slot listens.
func (s *joinState) addrOf(slot int) string {
	h := s.j.HostOf(slot)
	return net.JoinHostPort(h.Host, strconv.Itoa(h.Port))
}

// refused records the last refusal seen for rank and logs it, at most one
// line per rank and code a second (logLimit): a flood of bad clients must
// not fill a disk.
func (s *joinState) refused(rank int, err error) {
	s.mu.Lock()
	s.refusal[rank] = err
	ok, more := s.logged.allow(logKey{rank, codes.Of(err)}, s.j.Clock())
	s.mu.Unlock()
	switch {
	case !ok:
	case more > 0:
		s.j.Log("refused rank %d: %v (and %d more like it not logged)", rank, err, more)
	default:
		s.j.Log("refused rank %d: %v", rank, err)
	}
}

type logKey struct {
	rank int
	code codes.Code
}

// logLimit lets one line of each key through a second; the next line let
// through says how many were held back since the last.
type logLimit map[logKey]logLine

type logLine struct {
	at   time.Time // when the last line was let through
	held int       // lines held back since
}

func (l logLimit) allow(k logKey, now time.Time) (ok bool, held int) {
	last, seen := l[k]
	if seen && now.Sub(last.at) < time.Second {
		last.held++
		l[k] = last
		return false, 0
	}
	l[k] = logLine{at: now}
	return true, last.held
}

// temporaryAccept reports whether an accept error passes: out of
// descriptors, buffers or memory, or a connection aborted before it was
// taken.
func temporaryAccept(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// join joins the job of j (SPEC §4, §6, §18) in the process pr
// describes: it listens (for its whole life: links are made on demand
// after the join too), makes the links of the spanning tree and the
// observation ring (package topo) — dialing the slots above it, waiting
// for those below — exchanging and checking tokens, and returns the
// communicator once they are all up. It fails with the code of the first
// check that refused this rank, or when the join window ends without a
// peer with that peer's last refusal code (H1610 if there was none).
// Cancelling ctx cancels the join; so does the end of the launcher's
// control channel.
func join(ctx context.Context, j *Job, pr proc) (_ *Comm, err error) {
	if err := j.Validate(); err != nil {
		return nil, err
	}
	pool, _, err := pki.Pool(j.CA)
	if err != nil {
		return nil, err
	}
	leaf, key, err := ownCert(j)
	if err != nil {
		return nil, err
	}
	spin, err := spinLimit(j)
	if err != nil {
		return nil, err
	}
	c := newComm(j)
	c.links.own = key
	c.spin = spin
	c.links.shared.Spins = spin > 0
	c.links.proc = pr
	if c.jobPub, err = pki.UnmarshalPublicKey(j.JobKey); err != nil {
		return nil, err
	}
	if len(j.JobSecret) > 0 {
		if c.jobPriv, err = pki.UnmarshalPrivateKey(j.JobSecret); err != nil {
			return nil, err
		}
	}
	s := &joinState{
		c: c, j: j, pool: pool,
		cert:     tls.Certificate{Certificate: [][]byte{j.Cert}, PrivateKey: key, Leaf: leaf},
		deadline: time.Now().Add(j.JoinWindow()),
		spin:     spin,
		gate:     mesh.NewGate(goruntime.GOMAXPROCS(0)),
		fatalCh:  make(chan error, 1),
		refusal:  make(map[int]error),
		failed:   make(map[int]error),
		logged:   make(logLimit),
	}
	if j.OneProgram && j.ProgramDigest != nil {
		copy(s.program[:], j.ProgramDigest)
	}
	s.policy = j.PolicyDigest()
	c.links.hs = s
	ln, err := s.listener()
	if err != nil {
		return nil, err
	}
	c.links.ln = ln
	if pr.crashed != nil {
		go c.links.takeCrashes(pr.crashed)
	}
	if j.Slots() == 1 {
		c.start()
		c.links.joined.Store(true)
		countJoined()
		return c, nil
	}
	c.links.acceptWG.Add(1)
	go func() { defer c.links.acceptWG.Done(); s.acceptLoop(c.links.life, ln) }()
	go c.monitor() // heartbeats on the links made so far while the others come

	jctx, cancel := context.WithDeadline(ctx, s.deadline)
	defer cancel()
	if err := c.links.joinLinks(jctx, pr.ctlGone, func(k int) { c.failurePoint("join", k) }); err != nil {
		cancel() // the join's dials end with it: closeJoin waits for them
		c.closeJoin()
		return nil, err
	}
	c.links.joined.Store(true)
	countJoined()
	for _, p := range c.links.peerList() {
		p.StartReading() // silence counts from now (protocol.md §6.1)
	}
	c.links.heal() // around a loss learned as the join ended, if any
	c.startRest()
	return c, nil
}

// closeJoin ends a join that failed: its connections, listener, dials and
// monitor.
func (c *Comm) closeJoin() {
	c.closingNow.Store(true)
	c.end(codes.New(codes.Finished, "the join failed"), nil)
	c.links.stopLinks()
	// The links the join made are closed after what the end told on
	// them (a loss or an abort learned while joining, which ended the
	// join): the peers learn why this slot leaves, not a loss of it.
	c.links.closePeers()
	close(c.stopMon)
	<-c.monDone
	close(c.stopRec)
	close(c.recDone)
}

// ownCert checks j's certificate and key: this rank's, and a pair.
func ownCert(j *Job) (*x509.Certificate, ed25519.PrivateKey, error) {
	leaf, err := x509.ParseCertificate(j.Cert)
	if err != nil {
		return nil, nil, codes.Wrap(codes.JobMalformed, err, "job description: cert does not parse: %v", err)
	}
	if job, rank, err := pki.CertIdentity(leaf); err != nil || job != j.ID || rank != j.Rank {
		return nil, nil, codes.New(codes.JobMalformed, "job description: cert is not this rank's (job %s rank %d, want job %s rank %d)", job, rank, j.ID, j.Rank)
	}
	key := ed25519.NewKeyFromSeed(j.Key)
	if !key.Public().(ed25519.PublicKey).Equal(leaf.PublicKey) {
		return nil, nil, codes.New(codes.JobMalformed, "job description: key does not match cert")
	}
	return leaf, key, nil
}

// timeout builds the error of a join window that ended: the last refusal
// seen for the first link not made, else H1610.
func (s *joinState) timeout(ps []*peer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range ps {
		r := p.rank
		if p.Attached() || s.c.links.knownLost(r) {
			continue
		}
		if err := s.refusal[r]; err != nil {
			return err
		}
		if err := s.refusal[-1]; err != nil && r < s.j.Rank {
			return err
		}
		msg := fmt.Sprintf("rank %d at %s not reachable within the join window (%v)", r, s.addrOf(r), s.j.JoinWindow())
		if err := s.failed[r]; err != nil {
			msg += ": " + err.Error()
		}
		return &codes.Error{Code: codes.Unreachable, Op: "join", Rank: r, Msg: msg}
	}
	return codes.New(codes.Unreachable, "join window ended")
}

// start launches the communicator's own goroutines (a job of one slot).
func (c *Comm) start() {
	go c.monitor()
	c.startRest()
}

// startRest launches the goroutines that begin once the join is done.
func (c *Comm) startRest() {
	go c.links.rec.loop()
	if c.links.proc.ctlGone != nil {
		go c.watchControl()
	}
}

func (s *joinState) listener() (net.Listener, error) {
	j := s.j
	if j.Listener != nil {
		return j.Listener, nil
	}
	if j.ListenFD > 0 {
		return inheritListener(j.ListenFD)
	}
	h := j.HostOf(j.Rank)
	addr := net.JoinHostPort(hosts.ListenHost(h.Host), strconv.Itoa(h.Port))
	if !hosts.IsLocal(h.Host) {
		addr = net.JoinHostPort("", strconv.Itoa(h.Port))
	}
	listen := func(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }
	if j.Net != nil {
		listen = j.Net.Listen
	}
	ln, err := listen(addr)
	if err != nil {
		// No peer can reach this rank: the join cannot succeed (H1610).
		return nil, listenFailed(j.Rank, addr, h.Port, err)
	}
	return ln, nil
}

// acceptLoop accepts the connections of the slots that dial this one,
// for its whole life (links are made on demand after the join too): each
// is handshaken by a goroutine of its own, so that a slow or hostile
// client never holds the others up, and becomes a link when it passes
// (accept).
func (s *joinState) acceptLoop(ctx context.Context, ln net.Listener) {
	// Closed when the slot's life ends; AfterFunc, not a goroutine
	// waiting for it: one goroutine a slot is 100,000 of them in the
	// simulation.
	context.AfterFunc(ctx, func() { ln.Close() })
	var wg sync.WaitGroup
	defer wg.Wait()
	var backoff time.Duration
	for {
		raw, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || !temporaryAccept(err) {
				return
			}
			// Out of descriptors or buffers (a flood of idle clients):
			// wait and go on, as net/http's server does; the right peer
			// gets in once they leave.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.refused(-1, codes.Wrap(codes.Unreachable, err, "accept failed, trying again in %v: %v", backoff, err))
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return
			}
			continue
		}
		backoff = 0
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := mesh.Wrap(raw, s.spin)
			if err != nil {
				raw.Close()
				return
			}
			if _, err := s.accept(ctx, conn); err != nil {
				conn.Close()
			}
		}()
	}
}

// watchControl waits for the end of the launcher's control channel. A
// rank started by a launcher that loses it ends the job (SPEC §3); what
// the process does then is the shell's (proc.launcherLost).
func (c *Comm) watchControl() {
	select {
	case <-c.links.proc.ctlGone:
	case <-c.stopMon:
		return
	}
	select {
	case <-c.stopMon:
		return
	default:
	}
	c = c.links.cur.Load() // the generation the slot is in now
	err := &codes.Error{Code: codes.JobEnded, Rank: -1, Msg: "the launcher is gone (end of the control channel)",
		Cause: &codes.Cause{Kind: codes.CauseLauncher, Rank: -1, Code: codes.JobEnded}}
	c.end(err, &wire.Reason{Code: codes.JobEnded, Cause: codes.CauseLauncher, Rank: int32(c.origin()), Msg: err.Error()})
	if lost := c.links.proc.launcherLost; lost != nil {
		lost(c, err)
	}
}
