package mesh

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

func TestBroken(t *testing.T) {
	opErr := func(op string, err error) error { return &net.OpError{Op: op, Net: "tcp", Err: err} }
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"reset", opErr("read", os.NewSyscallError("read", syscall.ECONNRESET)), true},
		{"broken pipe", opErr("write", os.NewSyscallError("write", syscall.EPIPE)), true},
		{"aborted", opErr("read", os.NewSyscallError("read", syscall.ECONNABORTED)), true},
		{"refused mid-way", opErr("read", os.NewSyscallError("read", syscall.ECONNREFUSED)), true},
		{"timed out by TCP", opErr("read", os.NewSyscallError("read", syscall.ETIMEDOUT)), true},
		{"host unreachable", opErr("write", os.NewSyscallError("write", syscall.EHOSTUNREACH)), true},
		{"end of stream", io.EOF, true},
		{"cut in a record", io.ErrUnexpectedEOF, true},
		{"deadline", opErr("read", os.ErrDeadlineExceeded), true},
		{"wrapped reset", fmt.Errorf("handshake: %w", opErr("read", syscall.ECONNRESET)), true},
		{"peer's alert", opErr("remote error", tls.AlertError(42)), false},
		{"own alert", opErr("local error", tls.AlertError(48)), false},
		{"alert", tls.AlertError(40), false},
		{"another CA", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, false},
		{"wrong name", &tls.CertificateVerificationError{Err: x509.HostnameError{Host: "127.0.0.1"}}, false},
		{"not TLS", tls.RecordHeaderError{Msg: "tls: first record does not look like a TLS handshake"}, false},
		{"closed here", opErr("read", net.ErrClosed), false},
		{"other", errors.New("tls: unexpected message"), false},
	}
	for _, tc := range cases {
		if got := Broken(tc.err); got != tc.want {
			t.Errorf("Broken(%s: %v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// TestBrokenHandshakes: what real TLS 1.3 handshakes return — a
// certificate refused on either side is not broken; a connection reset
// while the dialer waits for the listener's answer is.
func TestBrokenHandshakes(t *testing.T) {
	t.Run("certificate refused", func(t *testing.T) {
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		server := tls.Server(a, &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{untrusted(t)}})
		client := tls.Client(b, &tls.Config{MinVersion: tls.VersionTLS13, ServerName: "127.0.0.1", RootCAs: x509.NewCertPool()})
		done := make(chan error, 1)
		go func() { done <- server.Handshake() }()
		cerr := client.Handshake()
		b.Close()
		serr := <-done
		for _, side := range []struct {
			name string
			err  error
		}{{"dialer", cerr}, {"listener", serr}} {
			if side.err == nil {
				t.Fatalf("the %s's handshake succeeded with an untrusted certificate", side.name)
			}
			if Broken(side.err) {
				t.Errorf("Broken(%s's %v) = true, want false", side.name, side.err)
			}
		}
	})
	t.Run("reset", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			c.Read(make([]byte, 1<<10)) // the ClientHello
			c.(*net.TCPConn).SetLinger(0)
			c.Close()
		}()
		raw, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		raw.SetDeadline(time.Now().Add(10 * time.Second))
		err = tls.Client(raw, &tls.Config{MinVersion: tls.VersionTLS13, ServerName: "127.0.0.1"}).Handshake()
		if err == nil || !Broken(err) {
			t.Fatalf("a handshake reset by the listener = %v, want an error Broken reports", err)
		}
	})
}

// untrusted is a certificate for 127.0.0.1 that no pool trusts.
func untrusted(t *testing.T) tls.Certificate {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
