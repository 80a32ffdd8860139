package runtime

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"sperli/codes"
	"sperli/hosts"
	"sperli/job"
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

// accept runs the listener's side of the join on one connection: TLS with a
// client certificate of the job CA, the dialer's hello and token, our hello,
// and the dialer's confirmation. Every refusal is logged, told to the dialer
// where TLS allows, and leaves the listener waiting for the right peer.
func (s *joinState) accept(ctx context.Context, raw net.Conn) (joined, error) {
	leave := s.gate.Enter(raw)
	defer leave()
	raw.SetDeadline(s.handshakeDeadline())
	cfg := mesh.TLSConfig(s.cert)
	cfg.ClientAuth = tls.RequireAndVerifyClientCert
	cfg.ClientCAs = s.pool
	tc := tls.Server(raw, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		if ctx.Err() != nil {
			return joined{}, err // the slot is closing: no refusal
		}
		if mesh.Broken(err) {
			// The dialer's connection broke, or it said nothing more
			// until the deadline, before the handshake's end: its dial
			// was ended (the link made by this slot's own dial, its slot
			// closing), its process died, or it is no Sperli rank at all.
			// Nothing was refused here.
			return joined{}, err
		}
		e := codes.Wrap(codes.CertRefused, err, "peer certificate refused in the TLS handshake: %v", err)
		switch a := mesh.RemoteAlert(err); {
		case mesh.NoCommonGroup(err):
			e = codes.Wrap(codes.CertRefused, err, "a dialer offered %s", mesh.GroupNeeded)
		case a != nil:
			e = codes.Wrap(codes.CertRefused, err, "a dialer refused this rank's certificate: %v", a)
		}
		s.refused(-1, e)
		return joined{}, e
	}
	state := tc.ConnectionState()
	job, rank, err := pki.CertIdentity(state.PeerCertificates[0])
	if err == nil && job != s.j.ID {
		err = codes.New(codes.CertRefused, "certificate is for job %s, want %s", job, s.j.ID)
	}
	if err != nil {
		s.refuseConn(tc, -1, err)
		return joined{}, err
	}
	hello, dup, err := readHello(tc, rank)
	if err == nil && dup {
		err = codes.New(codes.HelloMalformed, "rank %d dialed with the dup flag, which only a listener sends", rank)
	}
	if err != nil && hungUp(err) {
		tc.Close() // the dialer's dial ended (see the handshake's above)
		return joined{}, err
	}
	if err != nil {
		s.refuseConn(tc, rank, err)
		return joined{}, err
	}
	if rank >= s.j.Slots() {
		err = codes.New(codes.TokenRank, "certificate names rank %d, outside the job (%d slots)", rank, s.j.Slots())
		s.refuseConn(tc, rank, err)
		return joined{}, err
	}
	if _, err := pki.VerifyToken(hello.Token, s.c.jobPub, pki.Expect{
		Job: s.j.ID, Rank: rank, Size: s.j.Slots(), Incarnation: s.j.Incarnation,
		Host: s.j.HostOf(rank).Host, Now: s.j.Clock(),
	}); err != nil {
		s.refuseConn(tc, rank, err)
		return joined{}, err
	}
	if rank == s.j.Rank {
		err = codes.New(codes.TokenRank, "rank %d dialed itself", rank)
		s.refuseConn(tc, rank, err)
		return joined{}, err
	}
	if err := s.compare(rank, hello); err != nil {
		s.mismatch(tc, rank, err)
		return joined{}, err
	}
	l := s.c.links
	dup, p, done := l.arbitrate(rank)
	// What is left is no work to speak of: the turn goes to a handshake
	// that computes, and the confirmation does not wait for one.
	leave()
	if err := writeHello(tc, s.j, s.c, dup); err != nil || dup {
		// A dup: the dial of this slot (the lower) wins, or the link is
		// there already; the dialer closes this connection.
		if err == nil {
			err = errDup
		}
		return joined{}, err
	}
	defer done()
	// The dialer checks our token and confirms with a heartbeat, or refuses.
	var hb [wire.HeaderSize]byte
	h, err := wire.ReadHeader(tc, hb[:], rank)
	if err == nil && h.Type == wire.Refuse {
		p := make([]byte, h.Length)
		if _, err = io.ReadFull(tc, p); err == nil {
			r, derr := wire.DecodeReason(p)
			if derr == nil {
				err = &codes.Error{Code: r.Code, Rank: rank, Msg: fmt.Sprintf("rank %d refused this rank: %s", rank, reasonText(r))}
			} else {
				err = derr
			}
		}
	} else if err == nil && h.Type != wire.Heartbeat {
		err = codes.New(codes.HelloMalformed, "rank %d sent a %s frame, want its confirmation", rank, h.Type)
	}
	if err != nil {
		if codes.As(err) == nil {
			err = codes.Wrap(codes.HelloMalformed, err, "rank %d did not confirm the join: %v", rank, err)
		}
		s.refused(rank, err)
		tc.Close()
		return joined{}, err
	}
	jn := joined{rank: rank, conn: tc, silence: hello.SilenceMS, key: peerKey(tc)}
	l.attach(p, jn)
	return jn, nil
}

// handshakeDeadline is when a connection's handshake must be done: the
// end of the join window during the join, a join window from now after.
func (s *joinState) handshakeDeadline() time.Time {
	if s.c.links.joined.Load() {
		return time.Now().Add(s.j.JoinWindow())
	}
	return s.deadline
}

// compare checks the digests of slot's hello against this slot's own
// (docs/protocol.md §3.1.1): the loss policies always, the programs when
// both say one. A difference is H1628 naming both slots and both digests.
func (s *joinState) compare(slot int, h wire.HelloBody) error {
	self := s.j.Rank
	if h.Policy != s.policy {
		return &codes.Error{Code: codes.ProgramMismatch, Op: "join", Rank: slot, Msg: fmt.Sprintf(
			"slots %d and %d have different loss policies (size, spares, silence limit, checkpoints, one program): slot %d's digest %x, slot %d's %x",
			slot, self, slot, h.Policy[:], self, s.policy[:])}
	}
	var zero [wire.DigestSize]byte
	if h.Program != zero && s.program != zero && h.Program != s.program {
		return &codes.Error{Code: codes.ProgramMismatch, Op: "join", Rank: slot, Msg: fmt.Sprintf(
			"slots %d and %d run different programs or arguments: slot %d's digest %x, slot %d's %x",
			slot, self, slot, h.Program[:], self, s.program[:])}
	}
	return nil
}

// mismatch ends the job for a difference compare found with slot: the
// peer is refused with it, and every slot this one has a link to is told
// (an abort, cause failed), so that none takes it for a loss; the join,
// when under way, ends with it too — this is no wrong peer to wait past.
func (s *joinState) mismatch(tc *tls.Conn, slot int, err error) {
	ce := codes.As(err)
	c := s.c
	if cur := c.links.cur.Load(); cur != nil {
		c = cur // the generation the slot is in now
	}
	c.end(err, &wire.Reason{Code: ce.Code, Cause: codes.CauseFailed, Rank: int32(s.j.Rank), Msg: ce.Error()})
	s.refuseConn(tc, slot, err)
	if !s.c.links.joined.Load() {
		s.fatal(err)
	}
}

// refuseConn tells the peer the code of its refusal, then closes.
func (s *joinState) refuseConn(tc *tls.Conn, rank int, err error) {
	s.refused(rank, err)
	ce := codes.As(err)
	if ce != nil {
		tc.SetWriteDeadline(time.Now().Add(time.Second))
		sendFrame(tc, wire.Refuse, s.j, wire.AppendReason(nil, wire.Reason{Code: ce.Code, Rank: int32(rank), Msg: ce.Error()}))
	}
	tc.Close()
}

func sendFrame(w io.Writer, t wire.Type, j *Job, payload []byte) error {
	buf := make([]byte, wire.HeaderSize+len(payload))
	h := wire.Header{Type: t, Incarnation: j.Incarnation, Source: uint32(j.Rank), Length: uint32(len(payload))}
	h.Put(buf)
	copy(buf[wire.HeaderSize:], payload)
	_, err := w.Write(buf)
	return err
}

// writeHello sends this rank's hello; a listener's with dup set tells the
// dialer that this connection is not the link (protocol.md §1.6).
func writeHello(w io.Writer, j *Job, c *Comm, dup bool) error {
	s := c.links.hs
	payload := wire.AppendHello(nil, wire.HelloBody{SilenceMS: uint32(c.silenceMS.Load()), Token: j.Token, Program: s.program, Policy: s.policy})
	h := wire.Header{Type: wire.Hello, Incarnation: j.Incarnation, Source: uint32(j.Rank), Length: uint32(len(payload))}
	if dup {
		h.Flags = wire.FlagDup
	}
	buf := make([]byte, wire.HeaderSize+len(payload))
	h.Put(buf)
	copy(buf[wire.HeaderSize:], payload)
	_, err := w.Write(buf)
	return err
}

// readHello reads the peer's first frame, which must be a hello from rank
// (or a refusal, returned as its code).
func readHello(r io.Reader, rank int) (_ wire.HelloBody, dup bool, _ error) {
	var hb [wire.HeaderSize]byte
	h, err := wire.ReadHeader(r, hb[:], wire.AnySource)
	if err != nil {
		if codes.As(err) == nil {
			return wire.HelloBody{}, false, codes.Wrap(codes.HelloMalformed, err, "hello missing: %v", err)
		}
		return wire.HelloBody{}, false, err
	}
	if h.Type != wire.Hello && h.Type != wire.Refuse {
		return wire.HelloBody{}, false, codes.New(codes.HelloMalformed, "first frame is %s, want hello", h.Type)
	}
	if int(h.Source) != rank {
		return wire.HelloBody{}, false, codes.New(codes.FrameMalformed, "hello says it is from rank %d, its certificate names rank %d", h.Source, rank)
	}
	if h.Type == wire.Hello && h.Length > wire.HelloFixed+wire.MaxToken {
		// Checked before the payload is allocated: a hello is small.
		return wire.HelloBody{}, false, codes.New(codes.HelloMalformed, "hello is %d bytes, limit %d", h.Length, wire.HelloFixed+wire.MaxToken)
	}
	p := make([]byte, h.Length)
	if _, err := io.ReadFull(r, p); err != nil {
		return wire.HelloBody{}, false, codes.Wrap(codes.HelloMalformed, err, "hello cut short: %v", err)
	}
	if h.Type == wire.Refuse {
		r, err := wire.DecodeReason(p)
		if err != nil {
			return wire.HelloBody{}, false, err
		}
		return wire.HelloBody{}, false, &refusedError{&codes.Error{Code: r.Code, Rank: rank, Msg: fmt.Sprintf("refused by rank %d: %s", rank, reasonText(r))}}
	}
	hello, err := wire.DecodeHello(p)
	if err == nil && (hello.SilenceMS < job.MinSilenceMS || hello.SilenceMS > job.MaxSilenceMS) {
		err = codes.New(codes.HelloMalformed, "hello of rank %d says a silence limit of %d ms, want %d to %d", rank, hello.SilenceMS, job.MinSilenceMS, job.MaxSilenceMS)
	}
	return hello, h.Flags&wire.FlagDup != 0, err
}

// reasonText is a refusal's message without its leading code, which the
// refuse frame carries (protocol.md §3.2) and the error built from it adds
// again.
func reasonText(r wire.Reason) string {
	return strings.TrimPrefix(r.Msg, r.Code.String()+": ")
}

// refusedError marks an error the peer told us: we are the refused one.
type refusedError struct{ err *codes.Error }

func (e *refusedError) Error() string { return e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

// brokenError is a dial whose connection broke, or ran out of time, before
// its TLS handshake's end: the listener is gone or not reachable, and it
// refused nothing (a rank killed while the handshake was under way resets
// it). It is tried again as a dial that found nobody listening, and has no
// code of its own: the verdict is its dialer's when it gives up — H1610 at
// the end of the join window (timeout), a loss (H1611) after the join when
// no link could be made (links.dialer) — and this text says why.
type brokenError struct{ err error }

func (e *brokenError) Error() string {
	if errors.Is(e.err, os.ErrDeadlineExceeded) {
		return "its handshake did not end before its deadline: " + e.err.Error()
	}
	return "its connection broke during the handshake: " + e.err.Error()
}

func (e *brokenError) Unwrap() error { return e.err }

// dialOnce makes one try at the link to rank r at addr. A failure that is
// final ends the join or the link at once (the peer refused this rank);
// any other is tried again by the caller. During the join, the last
// failure of each rank is kept for the message of a window that ends
// without it (timeout).
func (s *joinState) dialOnce(ctx context.Context, r int, addr string) (jn joined, err error, final bool) {
	defer func() {
		if err != nil && !final && ctx.Err() == nil && !errors.Is(err, errDup) && !s.c.links.joined.Load() {
			s.mu.Lock()
			s.failed[r] = err
			s.mu.Unlock()
		}
	}()
	var tcp net.Conn
	if s.j.Net != nil {
		tcp, err = s.j.Net.DialContext(ctx, addr)
	} else {
		var d net.Dialer
		tcp, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return joined{}, err, false
	}
	raw, err := mesh.Wrap(tcp, s.spin)
	if err != nil {
		tcp.Close()
		return joined{}, err, false
	}
	// A dial that ends (the peer's own connection was attached first, or
	// the slot closes) closes its connection: a handshake or a hello
	// under way ends at once, not at its deadline.
	unhook := context.AfterFunc(ctx, func() { raw.Close() })
	defer unhook()
	leave := s.gate.Enter(raw) // given back before the caller attaches
	defer leave()
	raw.SetDeadline(s.handshakeDeadline())
	cfg := mesh.TLSConfig(s.cert)
	cfg.RootCAs = s.pool
	cfg.ServerName = s.j.HostOf(r).Host
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		job, rank, err := pki.CertIdentity(cs.PeerCertificates[0])
		if err != nil {
			return err
		}
		if job != s.j.ID || rank != r {
			return codes.New(codes.CertRefused, "listener's certificate is for job %s rank %d, want job %s rank %d", job, rank, s.j.ID, r)
		}
		return nil
	}
	tc := tls.Client(raw, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		raw.Close()
		if mesh.NoCommonGroup(err) {
			e := &codes.Error{Code: codes.CertRefused, Op: "join", Rank: r, Err: err, Msg: fmt.Sprintf("rank %d ended the TLS handshake (%v): %s", r, err, mesh.GroupNeeded)}
			s.refused(r, e)
			return joined{}, e, false
		}
		if mesh.RemoteAlert(err) != nil {
			return joined{}, &codes.Error{Code: codes.CertRefused, Op: "join", Rank: r, Err: err, Msg: fmt.Sprintf("rank %d refused this rank's certificate: %v", r, err)}, true
		}
		if ctx.Err() != nil {
			return joined{}, err, false
		}
		if mesh.Broken(err) {
			// The listener went away mid-handshake: gone or not
			// reachable, refusing nothing (an alert or a certificate
			// that fails its checks is never Broken).
			return joined{}, &brokenError{err}, false
		}
		e := codes.Wrap(codes.CertRefused, err, "certificate of rank %d at %s refused: %v", r, addr, err)
		e.Rank = r
		s.refused(r, e)
		return joined{}, e, false
	}
	if err := writeHello(tc, s.j, s.c, false); err != nil {
		tc.Close()
		return joined{}, err, false
	}
	hello, dup, err := readHello(tc, r)
	if err == nil && dup {
		tc.Close()
		return joined{}, errDup, false
	}
	if err != nil {
		var re *refusedError
		switch {
		case errors.As(err, &re):
			tc.Close()
			return joined{}, re.err, true
		case mesh.RemoteAlert(err) != nil:
			tc.Close()
			return joined{}, &codes.Error{Code: codes.CertRefused, Op: "join", Rank: r, Err: err, Msg: fmt.Sprintf("rank %d refused this rank's certificate: %v", r, mesh.RemoteAlert(err))}, true
		case ctx.Err() != nil:
			tc.Close() // ended here, not refused
			return joined{}, err, false
		case hungUp(err):
			// The listener's slot closed its end (it ended, or this
			// dial's link was made the other way): not reached, not
			// refused; the dialer's limits judge it.
			tc.Close()
			return joined{}, err, false
		}
		s.refuseConn(tc, r, err)
		return joined{}, err, false
	}
	if _, err := pki.VerifyToken(hello.Token, s.c.jobPub, pki.Expect{
		Job: s.j.ID, Rank: r, Size: s.j.Slots(), Incarnation: s.j.Incarnation,
		Host: s.j.HostOf(r).Host, Now: s.j.Clock(),
	}); err != nil {
		s.refuseConn(tc, r, err)
		return joined{}, err, false
	}
	if err := s.compare(r, hello); err != nil {
		s.mismatch(tc, r, err)
		return joined{}, err, true
	}
	leave()
	if err := sendFrame(tc, wire.Heartbeat, s.j, nil); err != nil {
		tc.Close()
		return joined{}, err, false
	}
	if !unhook() {
		tc.Close() // the dial ended as it finished: its connection is closed
		return joined{}, ctx.Err(), false
	}
	return joined{rank: r, conn: tc, silence: hello.SilenceMS, key: peerKey(tc)}, nil, false
}

// peerKey is the Ed25519 key of the peer's certificate (its decisions in
// an agreement are signed with it), or nil.
func peerKey(tc *tls.Conn) ed25519.PublicKey {
	if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 {
		if k, ok := certs[0].PublicKey.(ed25519.PublicKey); ok {
			return k
		}
	}
	return nil
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
