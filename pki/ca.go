package pki

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math"
	"math/big"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"sperli/codes"
)

// Config holds what a CA draws on. The zero value is ready to use.
type Config struct {
	// Rand is the source of keys and serial numbers; nil means crypto/rand.
	Rand io.Reader
	// Now is the clock that sets validity periods; nil means time.Now.
	Now func() time.Time
}

func (c Config) rand() io.Reader {
	if c.Rand == nil {
		return rand.Reader
	}
	return c.Rand
}

func (c Config) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

// The validity of a CA: from an hour before it is made (clocks of the job's
// hosts differ a little) to ten years after.
const (
	clockSkew  = time.Hour
	caLifetime = 10 * 365 * 24 * time.Hour
)

// CA is a job's certificate authority: a self-signed Ed25519 certificate
// that signs the certificate of every rank of that one job. A CA is safe for
// concurrent use when its Config's Rand is.
type CA struct {
	Cert    *x509.Certificate // the parsed CA certificate
	CertDER []byte            // its DER bytes, as handed to ranks; do not modify

	job string
	key ed25519.PrivateKey
	cfg Config
}

// NewCA makes the CA of the job named job, valid from an hour before
// cfg.Now() for ten years. A job id is 1 to 255 bytes of ASCII letters,
// digits, '.', '_' and '-', starting with a letter or digit; any other id is
// refused with H1615. On error NewCA returns a nil CA.
func NewCA(job string, cfg Config) (*CA, error) {
	if err := checkJob(job); err != nil {
		return nil, err
	}
	seed := make([]byte, ed25519.SeedSize)
	if _, err := io.ReadFull(cfg.rand(), seed); err != nil {
		return nil, codes.Wrap(codes.JobMalformed, err, "ca key: cannot read randomness: %v", err)
	}
	key := ed25519.NewKeyFromSeed(seed)
	serial, err := newSerial(cfg.rand())
	if err != nil {
		return nil, err
	}
	now := cfg.now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "sperli ca " + job},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(caLifetime),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true, // it signs rank certificates only, never another CA
		KeyUsage:              x509.KeyUsageCertSign,
		URIs:                  []*url.URL{jobURI(job)},
	}
	der, err := x509.CreateCertificate(cfg.rand(), tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, codes.Wrap(codes.JobMalformed, err, "ca certificate cannot be made: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, codes.Wrap(codes.JobMalformed, err, "ca certificate does not parse: %v", err)
	}
	return &CA{Cert: cert, CertDER: der, job: job, key: key, cfg: cfg}, nil
}

// LoadCA rebuilds a CA from its certificate and key, so that a restarted
// job can issue a moved rank's certificate from the CA it already has. It
// refuses with H1615 a certificate that Pool refuses, one that names no job,
// or a key that is not the certificate's. The CA keeps key; the caller must
// not modify it afterwards.
func LoadCA(certDER []byte, key ed25519.PrivateKey, cfg Config) (*CA, error) {
	_, cert, err := Pool(certDER)
	if err != nil {
		return nil, err
	}
	job, err := caJob(cert)
	if err != nil {
		return nil, err
	}
	if len(key) != ed25519.PrivateKeySize {
		return nil, codes.New(codes.JobMalformed, "ca key is %d bytes, want %d", len(key), ed25519.PrivateKeySize)
	}
	if !bytes.Equal(key.Public().(ed25519.PublicKey), cert.PublicKey.(ed25519.PublicKey)) {
		return nil, codes.New(codes.JobMalformed, "ca key is not the key of the ca certificate, want its pair")
	}
	return &CA{Cert: cert, CertDER: bytes.Clone(certDER), job: job, key: key, cfg: cfg}, nil
}

// Key returns the CA's private key, for a caller that stores the job's
// identity (0600, only where told: SPEC §4.5). The caller must not modify it.
func (ca *CA) Key() ed25519.PrivateKey { return ca.key }

// Issue makes the certificate of one rank of the CA's job and its fresh
// Ed25519 key. The certificate is for TLS on both sides (ServerAuth and
// ClientAuth) and names:
//
//   - the rank's host: an IP literal (IPv4 or IPv6, brackets allowed) as an
//     IP address, any other name as a DNS name, lower case and without a
//     trailing dot;
//   - its job and rank, as the one URI "sperli://job/<job>/rank/<rank>"
//     (read back by CertIdentity) and the subject "sperli rank <rank>".
//
// It is valid from an hour before now (not before the CA) to notAfter.
// Issue refuses with H1615 a job that is not the CA's, and with H1616 a
// rank outside 0..2147483647, a malformed host, or a notAfter that is not
// after now or is after the CA's own end. The caller owns the returned
// slices. On error both are nil.
func (ca *CA) Issue(job string, rank int, host string, notAfter time.Time) (certDER []byte, key ed25519.PrivateKey, err error) {
	seed := make([]byte, ed25519.SeedSize)
	if _, err := io.ReadFull(ca.cfg.rand(), seed); err != nil {
		return nil, nil, codes.Wrap(codes.JobMalformed, err, "rank key: cannot read randomness: %v", err)
	}
	key = ed25519.NewKeyFromSeed(seed)
	certDER, err = ca.Certify(job, rank, host, key.Public().(ed25519.PublicKey), notAfter)
	if err != nil {
		return nil, nil, err
	}
	return certDER, key, nil
}

// Certify is Issue for a key the rank made itself: it returns a
// certificate, as Issue describes, for the Ed25519 public key pub, whose
// private half the CA never sees (SPEC §17: a slot started by Slurm keeps
// its key in its process). A pub that is not 32 bytes is H1615.
func (ca *CA) Certify(job string, rank int, host string, pub ed25519.PublicKey, notAfter time.Time) (certDER []byte, err error) {
	if job != ca.job {
		return nil, codes.New(codes.JobMalformed, "certificate asked for job %q, want the ca's job %q", job, ca.job)
	}
	if len(pub) != ed25519.PublicKeySize {
		return nil, codes.New(codes.JobMalformed, "certificate asked for a public key of %d bytes, want %d", len(pub), ed25519.PublicKeySize)
	}
	if rank < 0 || rank > math.MaxInt32 {
		return nil, codes.New(codes.OutOfRange, "certificate asked for rank %d, want 0 to %d", rank, math.MaxInt32)
	}
	ip, dns, err := parseHost(host)
	if err != nil {
		return nil, err
	}
	now := ca.cfg.now()
	if !notAfter.After(now) {
		return nil, codes.New(codes.OutOfRange, "certificate would end at %s, want a time after now (%s)", stamp(notAfter), stamp(now))
	}
	if notAfter.After(ca.Cert.NotAfter) {
		return nil, codes.New(codes.OutOfRange, "certificate would end at %s, want no later than its ca (%s)", stamp(notAfter), stamp(ca.Cert.NotAfter))
	}
	notBefore := now.Add(-clockSkew)
	if notBefore.Before(ca.Cert.NotBefore) {
		notBefore = ca.Cert.NotBefore
	}
	serial, err := newSerial(ca.cfg.rand())
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "sperli rank " + strconv.Itoa(rank)},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:                  []*url.URL{rankURI(job, rank)},
	}
	if ip.IsValid() {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip.AsSlice())
	} else {
		tmpl.DNSNames = []string{dns}
	}
	certDER, err = x509.CreateCertificate(ca.cfg.rand(), tmpl, ca.Cert, pub, ca.key)
	if err != nil {
		return nil, codes.Wrap(codes.OutOfRange, err, "rank %d certificate cannot be made: %v", rank, err)
	}
	return certDER, nil
}

// Pool parses the DER bytes of a job's CA certificate and returns a pool
// holding only it, for tls.Config's RootCAs and ClientCAs, and the parsed
// certificate. It refuses with H1615, saying what is wrong, bytes that are
// not a certificate, one that is not a CA that may sign certificates, one
// whose key is not Ed25519, or one that is not validly self-signed.
// Pool does not keep caDER.
func Pool(caDER []byte) (*x509.CertPool, *x509.Certificate, error) {
	if len(caDER) == 0 {
		return nil, nil, codes.New(codes.JobMalformed, "ca certificate is empty, want DER bytes")
	}
	cert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, codes.Wrap(codes.JobMalformed, err, "ca certificate does not parse: %v", err)
	}
	if !cert.BasicConstraintsValid || !cert.IsCA {
		return nil, nil, codes.New(codes.JobMalformed, "ca certificate is not a ca, want basic constraints with ca true")
	}
	if cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, nil, codes.New(codes.JobMalformed, "ca certificate may not sign certificates, want key usage cert sign")
	}
	if cert.PublicKeyAlgorithm != x509.Ed25519 {
		return nil, nil, codes.New(codes.JobMalformed, "ca certificate key is %v, want Ed25519", cert.PublicKeyAlgorithm)
	}
	if err := cert.CheckSignatureFrom(cert); err != nil {
		return nil, nil, codes.Wrap(codes.JobMalformed, err, "ca certificate is not self-signed: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool, cert, nil
}

// CertIdentity returns the job and rank a rank certificate names in its one
// URI, "sperli://job/<job>/rank/<rank>". A nil certificate, one with no URI
// or more than one, or one whose URI is not of that form (a rank in
// canonical decimal, 0 to 2147483647; a job id as NewCA takes) is refused
// with H1601. CertIdentity does not check the certificate's signature: use
// it on a certificate TLS has verified against the job's CA.
func CertIdentity(cert *x509.Certificate) (job string, rank int, err error) {
	if cert == nil {
		return "", 0, codes.New(codes.CertRefused, "no certificate, want one naming a job and rank")
	}
	switch n := len(cert.URIs); n {
	case 0:
		return "", 0, codes.New(codes.CertRefused, "certificate names no job and rank, want one URI sperli://job/<job>/rank/<rank>")
	case 1:
	default:
		return "", 0, codes.New(codes.CertRefused, "certificate has %d URIs, want one sperli://job/<job>/rank/<rank>", n)
	}
	s := cert.URIs[0].String()
	job, rank, ok := parseRankURI(s)
	if !ok {
		return "", 0, codes.New(codes.CertRefused, "certificate URI %q is malformed, want sperli://job/<job>/rank/<rank>", truncate(s))
	}
	return job, rank, nil
}

func jobURI(job string) *url.URL {
	return &url.URL{Scheme: "sperli", Host: "job", Path: "/" + job}
}

func rankURI(job string, rank int) *url.URL {
	return &url.URL{Scheme: "sperli", Host: "job", Path: "/" + job + "/rank/" + strconv.Itoa(rank)}
}

// parseRankURI reads "sperli://job/<job>/rank/<rank>" by hand rather than
// through url.Parse, so that escapes, queries and non-canonical numbers are
// refused instead of normalised.
func parseRankURI(s string) (job string, rank int, ok bool) {
	rest, ok := strings.CutPrefix(s, "sperli://job/")
	if !ok {
		return "", 0, false
	}
	job, num, ok := strings.Cut(rest, "/rank/")
	if !ok || checkJob(job) != nil {
		return "", 0, false
	}
	rank, ok = parseRank(num)
	return job, rank, ok
}

// caJob reads the job a CA certificate names in its URI "sperli://job/<job>".
func caJob(cert *x509.Certificate) (string, error) {
	if len(cert.URIs) != 1 {
		return "", codes.New(codes.JobMalformed, "ca certificate has %d URIs, want one sperli://job/<job>", len(cert.URIs))
	}
	s := cert.URIs[0].String()
	job, ok := strings.CutPrefix(s, "sperli://job/")
	if !ok || checkJob(job) != nil {
		return "", codes.New(codes.JobMalformed, "ca certificate URI %q is malformed, want sperli://job/<job>", truncate(s))
	}
	return job, nil
}

func parseRank(s string) (int, bool) {
	if s == "" || len(s) > 10 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if n > math.MaxInt32 {
		return 0, false
	}
	return n, true
}

// checkJob enforces the job id rule. Ids go verbatim into certificate URIs
// and tokens, so the rule keeps them free of anything a URI would escape.
func checkJob(job string) error {
	if job == "" || len(job) > 255 {
		return codes.New(codes.JobMalformed, "job id is %d bytes, want 1 to 255", len(job))
	}
	for i := 0; i < len(job); i++ {
		c := job[i]
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return codes.New(codes.JobMalformed, "job id %q has %q at byte %d, want letters, digits, '.', '_' or '-', starting with a letter or digit", truncate(job), c, i)
		}
	}
	return nil
}

// parseHost splits a host into an IP address or a normalised DNS name.
func parseHost(host string) (netip.Addr, string, error) {
	h := host
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		if ip.Zone() != "" {
			return netip.Addr{}, "", codes.New(codes.OutOfRange, "host %q has an IPv6 zone, want an address without one", truncate(host))
		}
		return ip.Unmap(), "", nil
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if name == "" || len(name) > 253 {
		return netip.Addr{}, "", codes.New(codes.OutOfRange, "host %q is %d bytes, want a name of 1 to 253", truncate(host), len(name))
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return netip.Addr{}, "", codes.New(codes.OutOfRange, "host %q has a label of %d bytes, want 1 to 63", truncate(host), len(label))
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return netip.Addr{}, "", codes.New(codes.OutOfRange, "host %q has %q, want letters, digits, '-', '_' and dots", truncate(host), c)
			}
		}
	}
	return netip.Addr{}, name, nil
}

// newSerial draws a 128-bit serial number. Zero is not a valid serial
// (RFC 5280 §4.1.2.2); a source that yields it is taken as broken.
func newSerial(r io.Reader) (*big.Int, error) {
	b := make([]byte, 16)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, codes.Wrap(codes.JobMalformed, err, "serial number: cannot read randomness: %v", err)
	}
	n := new(big.Int).SetBytes(b)
	if n.Sign() == 0 {
		return nil, codes.New(codes.JobMalformed, "serial number is zero, want 128 random bits")
	}
	return n, nil
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// truncate bounds a name quoted in a message, since the name may come from a
// peer and messages end up on one log line.
func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
