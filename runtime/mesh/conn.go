package mesh

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Wrap is the connection a join runs TLS over: with a spin limit, an
// fdConn outside Go's poller (where the platform has one), else raw; in
// both cases below a cork (cork.go).
func Wrap(raw net.Conn, spin time.Duration) (net.Conn, error) {
	if spin <= 0 {
		return &corkConn{Conn: pollOwn(raw)}, nil
	}
	c, err := ownConn(raw)
	if err != nil {
		return nil, err
	}
	return &corkConn{Conn: c}, nil
}

// below is the connection under conn's TLS and cork.
func below(conn net.Conn) net.Conn {
	if nc, ok := conn.(interface{ NetConn() net.Conn }); ok {
		conn = nc.NetConn()
	}
	if cc, ok := conn.(*corkConn); ok {
		conn = cc.Conn
	}
	return conn
}

// SetSpin sets the spin limit of conn's reads, if conn (or the connection
// below its TLS) is an fdConn, and the count (busy) of this process's
// writers at work on large frames: while it is above 0 a read does not
// spin, since the writers need the processor more than a poll does (on two
// cores with two ranks, spinning reads took a third of a 1 MiB
// allreduce's processor time from the writers sealing its chunks).
func SetSpin(conn net.Conn, d time.Duration, busy *atomic.Int32) {
	conn = below(conn)
	if sc, ok := conn.(interface{ setSpin(time.Duration) }); ok {
		sc.setSpin(d)
	}
	if sc, ok := conn.(interface{ setBusy(*atomic.Int32) }); ok && busy != nil {
		sc.setBusy(busy)
	}
}

// SpinLimit is the spin limit of the peer's reads, or -1 when its
// connection stays in Go's poller (no fdConn below its TLS).
func (p *Peer) SpinLimit() time.Duration {
	if fc, ok := below(p.conn).(interface{ spinLimit() time.Duration }); ok {
		return fc.spinLimit()
	}
	return -1
}

// TLSConfig is the TLS configuration of both sides of a connection, with
// cert this rank's certificate (the caller adds what verifies the peer).
// The key exchange is the hybrid X25519MLKEM768 alone: both ends are
// Sperli, so there is no classical-only fallback to offer (and the dialer
// makes one key share, not two). Nothing resumes a session (every pair
// connects once), so the listener sends no session tickets.
func TLSConfig(cert tls.Certificate) *tls.Config {
	return &tls.Config{
		MinVersion:             tls.VersionTLS13,
		MaxVersion:             tls.VersionTLS13,
		Certificates:           []tls.Certificate{cert},
		CurvePreferences:       []tls.CurveID{tls.X25519MLKEM768},
		SessionTicketsDisabled: true,
	}
}

// GroupNeeded says what a handshake that failed on the key exchange lacked.
const GroupNeeded = "no key exchange group in common: Sperli needs X25519MLKEM768 (protocol.md §1.1)"

// NoCommonGroup reports whether a handshake failed because the two sides
// share no key exchange group: this side found none the peer offered, or
// the peer ended the handshake with handshake_failure, the alert TLS 1.3
// sends for that (certificate problems have alerts of their own).
func NoCommonGroup(err error) bool {
	msg := err.Error()
	if strings.Contains(msg, "no ECDHE curve supported") || strings.Contains(msg, "no key exchanges supported") || strings.Contains(msg, "unsupported group") {
		return true
	}
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error" && op.Err.Error() == "tls: handshake failure"
}

// RemoteAlert returns the TLS alert the peer sent, or nil.
func RemoteAlert(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "remote error" {
		return op
	}
	return nil
}

// Broken reports whether a handshake failed because its connection broke
// or ran out of time before the handshake's end — reset, cut short, shut,
// refused or unreachable mid-way, or past its deadline — rather than on
// anything either side said: the peer is gone or not reachable, and no
// certificate was refused. A TLS alert (the peer's or this side's), a
// certificate that does not verify (another CA, a wrong name) and a peer
// that speaks no TLS are never broken, whatever came after them; neither
// is a connection closed by this side (net.ErrClosed), which its caller
// judges.
func Broken(err error) bool {
	var alert tls.AlertError
	var verify *tls.CertificateVerificationError
	var record tls.RecordHeaderError
	var op *net.OpError
	switch {
	case errors.As(err, &alert), errors.As(err, &verify), errors.As(err, &record):
		return false
	case errors.As(err, &op) && (op.Op == "remote error" || op.Op == "local error"):
		return false // an alert of the TLS stack's own type
	}
	for _, e := range []error{io.EOF, io.ErrUnexpectedEOF, os.ErrDeadlineExceeded,
		syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE, syscall.ECONNREFUSED,
		syscall.ETIMEDOUT, syscall.EHOSTUNREACH, syscall.ENETUNREACH} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// WriteRaw writes b, raw bytes of frames, on the connection, bypassing
// every check of the sending side (credit, framing, the source stamp).
// It is how a test plays the hostile peer — a rank that has joined with
// valid credentials and then lies on the wire — against a receiver whose
// checks are all in place.
func (p *Peer) WriteRaw(b []byte) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if p.bw == nil {
		p.bw = newWriter(p.conn)
	}
	if _, err := p.bw.Write(b); err != nil {
		return err
	}
	return p.flush()
}

// Break closes the connection under the peer without a bye, as the crash
// of this process would; the peer must still be closed.
func (p *Peer) Break() { p.conn.Close() }
