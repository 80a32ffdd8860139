package runtime

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"sperli/codes"
	"sperli/job"
	"sperli/pki"
	"sperli/runtime/mesh"
	"sperli/wire"
)

// The handshakes of a link (docs/protocol.md §1, §3): the listener's
// (accept) and the dialer's (dialOnce), each TLS 1.3 with certificates of
// the job CA, then hellos with tokens and digests, then the dialer's
// confirmation. Both sides check everything the peer sends before it is
// used, and refuse with the code of the check that failed.

// accept runs the listener's side of the join on one connection: TLS with a
// client certificate of the job CA, the dialer's hello and token, our hello,
// and the dialer's confirmation. Every refusal is logged, told to the dialer
// where TLS allows, and leaves the listener waiting for the right peer.
func (s *joinState) accept(ctx context.Context, raw net.Conn) (joined, error) {
	leave := s.gate.Enter(raw)
	defer leave()
	raw.SetDeadline(s.handshakeDeadline())
	tc, err := s.serverTLS(ctx, raw)
	if err != nil {
		return joined{}, err
	}
	rank, hello, err := s.acceptHello(tc)
	if err != nil {
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
	if err := s.confirmed(tc, rank); err != nil {
		return joined{}, err
	}
	jn := joined{rank: rank, conn: tc, silence: hello.SilenceMS, key: peerKey(tc)}
	l.attach(p, jn)
	return jn, nil
}

// serverTLS is the listener's TLS handshake on raw, with a client
// certificate of the job CA. A refusal is logged; a connection that broke
// or a slot that closes refused nothing.
func (s *joinState) serverTLS(ctx context.Context, raw net.Conn) (*tls.Conn, error) {
	cfg := mesh.TLSConfig(s.cert)
	cfg.ClientAuth = tls.RequireAndVerifyClientCert
	cfg.ClientCAs = s.pool
	tc := tls.Server(raw, cfg)
	err := tc.HandshakeContext(ctx)
	if err == nil {
		return tc, nil
	}
	if ctx.Err() != nil {
		return nil, err // the slot is closing: no refusal
	}
	if mesh.Broken(err) {
		// The dialer's connection broke, or it said nothing more
		// until the deadline, before the handshake's end: its dial
		// was ended (the link made by this slot's own dial, its slot
		// closing), its process died, or it is no Sperli rank at all.
		// Nothing was refused here.
		return nil, err
	}
	e := codes.Wrap(codes.CertRefused, err, "peer certificate refused in the TLS handshake: %v", err)
	switch a := mesh.RemoteAlert(err); {
	case mesh.NoCommonGroup(err):
		e = codes.Wrap(codes.CertRefused, err, "a dialer offered %s", mesh.GroupNeeded)
	case a != nil:
		e = codes.Wrap(codes.CertRefused, err, "a dialer refused this rank's certificate: %v", a)
	}
	s.refused(-1, e)
	return nil, e
}

// acceptHello checks the dialer of tc: its certificate's job and rank,
// its hello and token, and its digests against this slot's. A refusal is
// told to the dialer and closes tc.
func (s *joinState) acceptHello(tc *tls.Conn) (int, wire.HelloBody, error) {
	job, rank, err := pki.CertIdentity(tc.ConnectionState().PeerCertificates[0])
	if err == nil && job != s.j.ID {
		err = codes.New(codes.CertRefused, "certificate is for job %s, want %s", job, s.j.ID)
	}
	if err != nil {
		s.refuseConn(tc, -1, err)
		return 0, wire.HelloBody{}, err
	}
	hello, dup, err := readHello(tc, rank)
	if err == nil && dup {
		err = codes.New(codes.HelloMalformed, "rank %d dialed with the dup flag, which only a listener sends", rank)
	}
	if err != nil && hungUp(err) {
		tc.Close() // the dialer's dial ended (see serverTLS)
		return 0, wire.HelloBody{}, err
	}
	switch {
	case err != nil:
	case rank >= s.j.Slots():
		err = codes.New(codes.TokenRank, "certificate names rank %d, outside the job (%d slots)", rank, s.j.Slots())
	default:
		_, err = pki.VerifyToken(hello.Token, s.c.jobPub, pki.Expect{
			Job: s.j.ID, Rank: rank, Size: s.j.Slots(), Incarnation: s.j.Incarnation,
			Host: s.j.HostOf(rank).Host, Now: s.j.Clock(),
		})
		if err == nil && rank == s.j.Rank {
			err = codes.New(codes.TokenRank, "rank %d dialed itself", rank)
		}
	}
	if err != nil {
		s.refuseConn(tc, rank, err)
		return 0, wire.HelloBody{}, err
	}
	if err := s.compare(rank, hello); err != nil {
		s.mismatch(tc, rank, err)
		return 0, wire.HelloBody{}, err
	}
	return rank, hello, nil
}

// confirmed waits for the dialer's confirmation of the join (a
// heartbeat), which it sends once it checked this slot's token, or its
// refusal. A connection that does not confirm is logged and closed.
func (s *joinState) confirmed(tc *tls.Conn, rank int) error {
	var hb [wire.HeaderSize]byte
	h, err := wire.ReadHeader(tc, hb[:], rank)
	switch {
	case err == nil && h.Type == wire.Refuse:
		p := make([]byte, h.Length) // a reason's length, bounded by wire.Decode
		if _, err = io.ReadFull(tc, p); err == nil {
			r, derr := wire.DecodeReason(p)
			if derr == nil {
				err = &codes.Error{Code: r.Code, Rank: rank, Msg: fmt.Sprintf("rank %d refused this rank: %s", rank, reasonText(r))}
			} else {
				err = derr
			}
		}
	case err == nil && h.Type != wire.Heartbeat:
		err = codes.New(codes.HelloMalformed, "rank %d sent a %s frame, want its confirmation", rank, h.Type)
	}
	if err != nil {
		if codes.As(err) == nil {
			err = codes.Wrap(codes.HelloMalformed, err, "rank %d did not confirm the join: %v", rank, err)
		}
		s.refused(rank, err)
		tc.Close()
	}
	return err
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
	raw, err := s.dialRaw(ctx, addr)
	if err != nil {
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
	tc, err, final := s.clientTLS(ctx, raw, r, addr)
	if err != nil {
		return joined{}, err, final
	}
	hello, err, final := s.dialHello(ctx, tc, r)
	if err != nil {
		return joined{}, err, final
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

// dialRaw opens a connection to addr on the job's network.
func (s *joinState) dialRaw(ctx context.Context, addr string) (net.Conn, error) {
	var tcp net.Conn
	var err error
	if s.j.Net != nil {
		tcp, err = s.j.Net.DialContext(ctx, addr)
	} else {
		var d net.Dialer
		tcp, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	raw, err := mesh.Wrap(tcp, s.spin)
	if err != nil {
		tcp.Close()
		return nil, err
	}
	return raw, nil
}

// clientTLS is the dialer's TLS handshake with rank r at addr: the
// listener's certificate must be of the job CA, for this job and rank r.
// A failure closes raw; final when the listener refused this rank.
func (s *joinState) clientTLS(ctx context.Context, raw net.Conn, r int, addr string) (*tls.Conn, error, bool) {
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
	err := tc.HandshakeContext(ctx)
	if err == nil {
		return tc, nil, false
	}
	raw.Close()
	switch {
	case mesh.NoCommonGroup(err):
		e := &codes.Error{Code: codes.CertRefused, Op: "join", Rank: r, Err: err, Msg: fmt.Sprintf("rank %d ended the TLS handshake (%v): %s", r, err, mesh.GroupNeeded)}
		s.refused(r, e)
		return nil, e, false
	case mesh.RemoteAlert(err) != nil:
		return nil, &codes.Error{Code: codes.CertRefused, Op: "join", Rank: r, Err: err, Msg: fmt.Sprintf("rank %d refused this rank's certificate: %v", r, err)}, true
	case ctx.Err() != nil:
		return nil, err, false
	case mesh.Broken(err):
		// The listener went away mid-handshake: gone or not
		// reachable, refusing nothing (an alert or a certificate
		// that fails its checks is never Broken).
		return nil, &brokenError{err}, false
	}
	e := codes.Wrap(codes.CertRefused, err, "certificate of rank %d at %s refused: %v", r, addr, err)
	e.Rank = r
	s.refused(r, e)
	return nil, e, false
}

// dialHello sends this slot's hello on tc and checks rank r's: its token
// and its digests against this slot's. A failure closes tc (telling r
// what it refused); final when r refused this rank or runs another
// program.
func (s *joinState) dialHello(ctx context.Context, tc *tls.Conn, r int) (wire.HelloBody, error, bool) {
	if err := writeHello(tc, s.j, s.c, false); err != nil {
		tc.Close()
		return wire.HelloBody{}, err, false
	}
	hello, dup, err := readHello(tc, r)
	if err == nil && dup {
		tc.Close()
		return wire.HelloBody{}, errDup, false
	}
	if err != nil {
		var re *refusedError
		switch {
		case errors.As(err, &re):
			tc.Close()
			return wire.HelloBody{}, re.err, true
		case mesh.RemoteAlert(err) != nil:
			tc.Close()
			return wire.HelloBody{}, &codes.Error{Code: codes.CertRefused, Op: "join", Rank: r, Err: err, Msg: fmt.Sprintf("rank %d refused this rank's certificate: %v", r, mesh.RemoteAlert(err))}, true
		case ctx.Err() != nil:
			tc.Close() // ended here, not refused
			return wire.HelloBody{}, err, false
		case hungUp(err):
			// The listener's slot closed its end (it ended, or this
			// dial's link was made the other way): not reached, not
			// refused; the dialer's limits judge it.
			tc.Close()
			return wire.HelloBody{}, err, false
		}
		s.refuseConn(tc, r, err)
		return wire.HelloBody{}, err, false
	}
	if _, err := pki.VerifyToken(hello.Token, s.c.jobPub, pki.Expect{
		Job: s.j.ID, Rank: r, Size: s.j.Slots(), Incarnation: s.j.Incarnation,
		Host: s.j.HostOf(r).Host, Now: s.j.Clock(),
	}); err != nil {
		s.refuseConn(tc, r, err)
		return wire.HelloBody{}, err, false
	}
	if err := s.compare(r, hello); err != nil {
		s.mismatch(tc, r, err)
		return wire.HelloBody{}, err, true
	}
	return hello, nil, false
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
