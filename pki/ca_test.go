package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"sperli/codes"
)

// testNow is the fixed clock of the tests.
var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// testConfig returns a Config with a fixed clock and a seeded random source,
// so that every run makes the same keys.
func testConfig(seed byte) Config {
	return Config{
		Rand: mrand.NewChaCha8([32]byte{seed}),
		Now:  func() time.Time { return testNow },
	}
}

func newTestCA(t testing.TB, job string, seed byte) *CA {
	t.Helper()
	ca, err := NewCA(job, testConfig(seed))
	if err != nil {
		t.Fatalf("NewCA(%q) = %v, want a CA", job, err)
	}
	return ca
}

// wantCode fails the test unless err carries code want (0: no error).
func wantCode(t *testing.T, op string, err error, want codes.Code) {
	t.Helper()
	if got := codes.Of(err); got != want || (want == 0) != (err == nil) {
		t.Errorf("%s = %v, want code %v", op, err, want)
		return
	}
	if err != nil && !strings.HasPrefix(err.Error(), want.String()+": ") {
		t.Errorf("%s = %q, want a message starting with %q", op, err, want.String()+": ")
	}
}

func TestNewCA(t *testing.T) {
	ca := newTestCA(t, "sum-1", 1)
	c := ca.Cert
	if !c.IsCA || !c.BasicConstraintsValid || c.KeyUsage != x509.KeyUsageCertSign {
		t.Errorf("NewCA: IsCA=%v BasicConstraintsValid=%v KeyUsage=%v, want true true CertSign", c.IsCA, c.BasicConstraintsValid, c.KeyUsage)
	}
	if c.PublicKeyAlgorithm != x509.Ed25519 || c.SignatureAlgorithm != x509.PureEd25519 {
		t.Errorf("NewCA: key %v signature %v, want Ed25519 PureEd25519", c.PublicKeyAlgorithm, c.SignatureAlgorithm)
	}
	if !c.NotBefore.Equal(testNow.Add(-time.Hour)) || !c.NotAfter.Equal(testNow.Add(caLifetime)) {
		t.Errorf("NewCA: valid %v to %v, want %v to %v", c.NotBefore, c.NotAfter, testNow.Add(-time.Hour), testNow.Add(caLifetime))
	}
	if len(c.URIs) != 1 || c.URIs[0].String() != "sperli://job/sum-1" {
		t.Errorf("NewCA: URIs %v, want [sperli://job/sum-1]", c.URIs)
	}
	if !bytes.Equal(c.Raw, ca.CertDER) {
		t.Errorf("NewCA: Cert.Raw differs from CertDER")
	}
	again := newTestCA(t, "sum-1", 1)
	if !bytes.Equal(again.CertDER, ca.CertDER) {
		t.Errorf("NewCA with the same Rand and Now made another certificate, want the same bytes")
	}
}

func TestNewCAJobIDs(t *testing.T) {
	tests := []struct {
		job  string
		want codes.Code
	}{
		{"j", 0},
		{"sum-2026.03_01", 0},
		{"0abc", 0},
		{strings.Repeat("a", 255), 0},
		{"", codes.JobMalformed},
		{strings.Repeat("a", 256), codes.JobMalformed},
		{"a/b", codes.JobMalformed},
		{".x", codes.JobMalformed},
		{"-x", codes.JobMalformed},
		{"..", codes.JobMalformed},
		{"a b", codes.JobMalformed},
		{"a%2F", codes.JobMalformed},
		{"jöb", codes.JobMalformed},
	}
	for _, tt := range tests {
		_, err := NewCA(tt.job, testConfig(1))
		wantCode(t, "NewCA("+truncate(tt.job)+")", err, tt.want)
	}
}

func TestNewCARandFails(t *testing.T) {
	_, err := NewCA("j", Config{Rand: strings.NewReader("short")})
	wantCode(t, "NewCA(short Rand)", err, codes.JobMalformed)
}

func TestIssueVerify(t *testing.T) {
	ca := newTestCA(t, "job-7", 1)
	pool, _, err := Pool(ca.CertDER)
	if err != nil {
		t.Fatalf("Pool(ca) = %v, want a pool", err)
	}
	tests := []struct {
		host    string
		wantIP  string // the IP SAN, or ""
		wantDNS string // the DNS SAN, or ""
		check   string // a name VerifyHostname must accept
		wrong   string // a name it must refuse
	}{
		{"127.0.0.1", "127.0.0.1", "", "127.0.0.1", "127.0.0.2"},
		{"10.1.2.3", "10.1.2.3", "", "10.1.2.3", "localhost"},
		{"::1", "::1", "", "::1", "127.0.0.1"},
		{"[fe80::1]", "fe80::1", "", "fe80::1", "fe80::2"},
		{"::ffff:192.0.2.1", "192.0.2.1", "", "192.0.2.1", "192.0.2.2"},
		{"localhost", "", "localhost", "localhost", "127.0.0.1"},
		{"Node-1.Example.", "", "node-1.example", "node-1.example", "node-2.example"},
		{"gpu_03.cluster.internal", "", "gpu_03.cluster.internal", "gpu_03.cluster.internal", "cluster.internal"},
	}
	notAfter := testNow.Add(24 * time.Hour)
	for i, tt := range tests {
		der, key, err := ca.Issue("job-7", i, tt.host, notAfter)
		if err != nil {
			t.Errorf("Issue(%q) = %v, want a certificate", tt.host, err)
			continue
		}
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatalf("ParseCertificate(Issue(%q)) = %v", tt.host, err)
		}
		var ips []string
		for _, ip := range cert.IPAddresses {
			ips = append(ips, ip.String())
		}
		if got := strings.Join(ips, ","); got != tt.wantIP {
			t.Errorf("Issue(%q) IP SANs = %q, want %q", tt.host, got, tt.wantIP)
		}
		if got := strings.Join(cert.DNSNames, ","); got != tt.wantDNS {
			t.Errorf("Issue(%q) DNS SANs = %q, want %q", tt.host, got, tt.wantDNS)
		}
		if got, want := cert.Subject.CommonName, "sperli rank "+itoa(i); got != want {
			t.Errorf("Issue(%q) subject CN = %q, want %q", tt.host, got, want)
		}
		if len(cert.URIs) != 1 || cert.URIs[0].String() != "sperli://job/job-7/rank/"+itoa(i) {
			t.Errorf("Issue(%q) URIs = %v, want [sperli://job/job-7/rank/%d]", tt.host, cert.URIs, i)
		}
		if !key.Public().(ed25519.PublicKey).Equal(cert.PublicKey) {
			t.Errorf("Issue(%q): certificate key is not the returned key's public half", tt.host)
		}
		if cert.IsCA || cert.KeyUsage != x509.KeyUsageDigitalSignature {
			t.Errorf("Issue(%q): IsCA=%v KeyUsage=%v, want false DigitalSignature", tt.host, cert.IsCA, cert.KeyUsage)
		}
		if !cert.NotBefore.Equal(testNow.Add(-time.Hour)) || !cert.NotAfter.Equal(notAfter) {
			t.Errorf("Issue(%q): valid %v to %v, want %v to %v", tt.host, cert.NotBefore, cert.NotAfter, testNow.Add(-time.Hour), notAfter)
		}
		if cert.SerialNumber.BitLen() > 128 || cert.SerialNumber.Sign() <= 0 {
			t.Errorf("Issue(%q): serial %v, want a positive number of at most 128 bits", tt.host, cert.SerialNumber)
		}
		for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			opts := x509.VerifyOptions{Roots: pool, DNSName: "", CurrentTime: testNow, KeyUsages: []x509.ExtKeyUsage{usage}}
			if _, err := cert.Verify(opts); err != nil {
				t.Errorf("Issue(%q).Verify(usage %v) = %v, want nil", tt.host, usage, err)
			}
		}
		if err := cert.VerifyHostname(tt.check); err != nil {
			t.Errorf("Issue(%q).VerifyHostname(%q) = %v, want nil", tt.host, tt.check, err)
		}
		if err := cert.VerifyHostname(tt.wrong); err == nil {
			t.Errorf("Issue(%q).VerifyHostname(%q) = nil, want an error", tt.host, tt.wrong)
		}
		opts := x509.VerifyOptions{Roots: pool, CurrentTime: notAfter.Add(time.Second)}
		if _, err := cert.Verify(opts); err == nil {
			t.Errorf("Issue(%q).Verify(after notAfter) = nil, want an error", tt.host)
		}
	}
}

func itoa(i int) string { return big.NewInt(int64(i)).String() }

func TestIssueSerialsDiffer(t *testing.T) {
	ca := newTestCA(t, "j", 1)
	seen := map[string]bool{}
	for i := range 20 {
		der, _, err := ca.Issue("j", i, "127.0.0.1", testNow.Add(time.Hour))
		if err != nil {
			t.Fatalf("Issue(rank %d) = %v", i, err)
		}
		cert, _ := x509.ParseCertificate(der)
		s := cert.SerialNumber.String()
		if seen[s] {
			t.Errorf("Issue(rank %d) serial %s repeats, want a fresh one", i, s)
		}
		seen[s] = true
	}
}

func TestIssueOtherCAFails(t *testing.T) {
	ca := newTestCA(t, "j", 1)
	other := newTestCA(t, "j", 2) // same job id, another CA: must still be refused
	pool, _, err := Pool(ca.CertDER)
	if err != nil {
		t.Fatal(err)
	}
	der, _, err := other.Issue("j", 0, "127.0.0.1", testNow.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	_, err = cert.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: testNow, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Errorf("Verify(cert of another CA) = %v, want x509.UnknownAuthorityError", err)
	}
}

func TestIssueRefusals(t *testing.T) {
	ca := newTestCA(t, "j", 1)
	later := testNow.Add(time.Hour)
	tests := []struct {
		name     string
		job      string
		rank     int
		host     string
		notAfter time.Time
		want     codes.Code
	}{
		{"ok", "j", 0, "127.0.0.1", later, 0},
		{"max rank", "j", 1<<31 - 1, "h", later, 0},
		{"other job", "k", 0, "127.0.0.1", later, codes.JobMalformed},
		{"negative rank", "j", -1, "127.0.0.1", later, codes.OutOfRange},
		{"rank too large", "j", 1 << 31, "127.0.0.1", later, codes.OutOfRange},
		{"empty host", "j", 0, "", later, codes.OutOfRange},
		{"only a dot", "j", 0, ".", later, codes.OutOfRange},
		{"blank in host", "j", 0, "a b", later, codes.OutOfRange},
		{"empty label", "j", 0, "a..b", later, codes.OutOfRange},
		{"wildcard", "j", 0, "*.example", later, codes.OutOfRange},
		{"ipv6 zone", "j", 0, "fe80::1%eth0", later, codes.OutOfRange},
		{"not after now", "j", 0, "h", testNow, codes.OutOfRange},
		{"past", "j", 0, "h", testNow.Add(-time.Hour), codes.OutOfRange},
		{"outlives ca", "j", 0, "h", ca.Cert.NotAfter.Add(time.Second), codes.OutOfRange},
	}
	for _, tt := range tests {
		der, key, err := ca.Issue(tt.job, tt.rank, tt.host, tt.notAfter)
		wantCode(t, "Issue("+tt.name+")", err, tt.want)
		if err != nil && (der != nil || key != nil) {
			t.Errorf("Issue(%s) returned bytes with error %v, want nil", tt.name, err)
		}
	}
}

func TestPool(t *testing.T) {
	ca := newTestCA(t, "j", 1)
	leaf, _, err := ca.Issue("j", 0, "127.0.0.1", testNow.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ecdsaCA := func() []byte {
		key, err := ecdsa.GenerateKey(elliptic.P256(), mrand.NewChaCha8([32]byte{9}))
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ec"},
			NotBefore: testNow, NotAfter: testNow.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
			KeyUsage: x509.KeyUsageCertSign}
		der, err := x509.CreateCertificate(nil, tmpl, tmpl, key.Public(), key)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}()
	badSig := bytes.Clone(ca.CertDER)
	badSig[len(badSig)-1] ^= 1 // the last byte is the signature's

	tests := []struct {
		name string
		der  []byte
		want codes.Code
		msg  string
	}{
		{"ca", ca.CertDER, 0, ""},
		{"empty", nil, codes.JobMalformed, "ca certificate is empty"},
		{"garbage", []byte("not a certificate"), codes.JobMalformed, "does not parse"},
		{"leaf", leaf, codes.JobMalformed, "is not a ca"},
		{"ecdsa", ecdsaCA, codes.JobMalformed, "key is ECDSA, want Ed25519"},
		{"bad signature", badSig, codes.JobMalformed, "not self-signed"},
	}
	for _, tt := range tests {
		pool, cert, err := Pool(tt.der)
		wantCode(t, "Pool("+tt.name+")", err, tt.want)
		if err != nil {
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("Pool(%s) = %q, want it to say %q", tt.name, err, tt.msg)
			}
			continue
		}
		if pool == nil || cert == nil || !bytes.Equal(cert.Raw, tt.der) {
			t.Errorf("Pool(%s) = %v, %v, want a pool and the certificate", tt.name, pool, cert)
		}
	}
}

func TestCertIdentity(t *testing.T) {
	ca := newTestCA(t, "sum-9", 1)
	der, _, err := ca.Issue("sum-9", 12, "localhost", testNow.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	issued, _ := x509.ParseCertificate(der)
	withURIs := func(uris ...string) *x509.Certificate {
		c := new(x509.Certificate)
		for _, s := range uris {
			u, err := url.Parse(s)
			if err != nil {
				t.Fatalf("url.Parse(%q) = %v", s, err)
			}
			c.URIs = append(c.URIs, u)
		}
		return c
	}
	tests := []struct {
		name     string
		cert     *x509.Certificate
		wantJob  string
		wantRank int
		want     codes.Code
	}{
		{"issued", issued, "sum-9", 12, 0},
		{"rank 0", withURIs("sperli://job/j/rank/0"), "j", 0, 0},
		{"max rank", withURIs("sperli://job/j/rank/2147483647"), "j", 2147483647, 0},
		{"nil", nil, "", 0, codes.CertRefused},
		{"ca", ca.Cert, "", 0, codes.CertRefused},
		{"none", withURIs(), "", 0, codes.CertRefused},
		{"two", withURIs("sperli://job/j/rank/0", "sperli://job/j/rank/1"), "", 0, codes.CertRefused},
		{"leading zero", withURIs("sperli://job/j/rank/01"), "", 0, codes.CertRefused},
		{"negative", withURIs("sperli://job/j/rank/-1"), "", 0, codes.CertRefused},
		{"plus", withURIs("sperli://job/j/rank/+1"), "", 0, codes.CertRefused},
		{"word", withURIs("sperli://job/j/rank/x"), "", 0, codes.CertRefused},
		{"empty rank", withURIs("sperli://job/j/rank/"), "", 0, codes.CertRefused},
		{"too large", withURIs("sperli://job/j/rank/2147483648"), "", 0, codes.CertRefused},
		{"other scheme", withURIs("https://job/j/rank/1"), "", 0, codes.CertRefused},
		{"other host", withURIs("sperli://jobs/j/rank/1"), "", 0, codes.CertRefused},
		{"slash in job", withURIs("sperli://job/a/b/rank/1"), "", 0, codes.CertRefused},
		{"empty job", withURIs("sperli://job//rank/1"), "", 0, codes.CertRefused},
		{"query", withURIs("sperli://job/j/rank/1?x=1"), "", 0, codes.CertRefused},
		{"trailing slash", withURIs("sperli://job/j/rank/1/"), "", 0, codes.CertRefused},
		{"escaped job", withURIs("sperli://job/a%2Fb/rank/1"), "", 0, codes.CertRefused},
	}
	for _, tt := range tests {
		job, rank, err := CertIdentity(tt.cert)
		wantCode(t, "CertIdentity("+tt.name+")", err, tt.want)
		if job != tt.wantJob || rank != tt.wantRank {
			t.Errorf("CertIdentity(%s) = %q, %d, want %q, %d", tt.name, job, rank, tt.wantJob, tt.wantRank)
		}
	}
}

func TestLoadCA(t *testing.T) {
	ca := newTestCA(t, "j", 1)
	loaded, err := LoadCA(ca.CertDER, ca.Key(), testConfig(3))
	if err != nil {
		t.Fatalf("LoadCA(NewCA) = %v, want a CA", err)
	}
	pool, _, _ := Pool(ca.CertDER)
	der, _, err := loaded.Issue("j", 1, "127.0.0.1", testNow.Add(time.Hour))
	if err != nil {
		t.Fatalf("LoadCA(...).Issue = %v", err)
	}
	cert, _ := x509.ParseCertificate(der)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: testNow}); err != nil {
		t.Errorf("Verify(cert of the loaded CA) = %v, want nil", err)
	}
	other := newTestCA(t, "j", 2)
	_, err = LoadCA(ca.CertDER, other.Key(), Config{})
	wantCode(t, "LoadCA(another key)", err, codes.JobMalformed)
	_, err = LoadCA(ca.CertDER, ca.Key()[:10], Config{})
	wantCode(t, "LoadCA(short key)", err, codes.JobMalformed)
	_, err = LoadCA(der, ca.Key(), Config{})
	wantCode(t, "LoadCA(leaf)", err, codes.JobMalformed)
}

// TestTLSHandshake runs mutual TLS 1.3 between two ranks as SPEC §4.2 has
// it: the dialer checks the listener's address, the listener requires the
// dialer's certificate, both against the job's CA.
func TestTLSHandshake(t *testing.T) {
	ca := newTestCA(t, "j", 1)
	other := newTestCA(t, "j", 2)
	pool, _, _ := Pool(ca.CertDER)
	pair := func(c *CA, rank int, host string) tls.Certificate {
		der, key, err := c.Issue("j", rank, host, testNow.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	}
	listener := pair(ca, 0, "127.0.0.1")
	tests := []struct {
		name       string
		dialer     tls.Certificate
		serverName string
		wantOK     bool
	}{
		{"right peer", pair(ca, 1, "127.0.0.1"), "127.0.0.1", true},
		{"wrong address", pair(ca, 1, "127.0.0.1"), "127.0.0.2", false},
		{"dialer of another CA", pair(other, 1, "127.0.0.1"), "127.0.0.1", false},
		{"dialer without certificate", tls.Certificate{}, "127.0.0.1", false},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, tt := range tests {
		// Loopback TCP rather than net.Pipe: a refusing side writes its
		// alert while the other may still be writing, which an unbuffered
		// pipe turns into a deadlock.
		b, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		a, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		a.SetDeadline(deadline)
		b.SetDeadline(deadline)
		srv := tls.Server(a, &tls.Config{
			MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{listener},
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, Time: func() time.Time { return testNow },
		})
		ccfg := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool, ServerName: tt.serverName, Time: func() time.Time { return testNow }}
		if tt.dialer.Certificate != nil {
			ccfg.Certificates = []tls.Certificate{tt.dialer}
		}
		cli := tls.Client(b, ccfg)
		errc := make(chan error, 1)
		go func() {
			err := srv.Handshake()
			if err == nil {
				// In TLS 1.3 the client learns of a refused certificate only
				// when it reads; give it something to read.
				_, err = srv.Write([]byte("x"))
			}
			a.Close()
			errc <- err
		}()
		cerr := cli.Handshake()
		if cerr == nil {
			_, cerr = io.ReadFull(cli, make([]byte, 1))
		}
		b.Close()
		serr := <-errc
		if ok := cerr == nil && serr == nil; ok != tt.wantOK {
			t.Errorf("handshake(%s): client %v, server %v, want ok %v", tt.name, cerr, serr, tt.wantOK)
		}
		if tt.wantOK && cerr == nil {
			state := cli.ConnectionState()
			if state.Version != tls.VersionTLS13 {
				t.Errorf("handshake(%s): version %x, want TLS 1.3", tt.name, state.Version)
			}
			job, rank, err := CertIdentity(srv.ConnectionState().PeerCertificates[0])
			if job != "j" || rank != 1 || err != nil {
				t.Errorf("CertIdentity(dialer) = %q, %d, %v, want \"j\", 1, nil", job, rank, err)
			}
		}
	}
}
