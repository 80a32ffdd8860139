package runtime_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	"sperli/pki"
	"sperli/runtime"
)

// The figures of docs/benchmarks.md: a Sperli pair of Go ranks against a
// bare crypto/tls 1.3 pair with the same certificates on the same loopback.
//
//	go test -run '^$' -bench 'RoundTrip|Rate' -benchtime 3s ./runtime/

func benchPair(b *testing.B) (context.Context, *runtime.Comm, *runtime.Comm) {
	ctx := context.Background()
	f := newFixtureB(b, 2)
	comms := make([]*runtime.Comm, 2)
	errs := make(chan error, 2)
	for r := 0; r < 2; r++ {
		go func(r int) {
			c, err := runtime.Init(ctx, f.job(r))
			comms[r] = c
			errs <- err
		}(r)
	}
	for i := 0; i < 2; i++ {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() { comms[0].Close(); comms[1].Close() })
	return ctx, comms[0], comms[1]
}

func BenchmarkRoundTrip64(b *testing.B) {
	ctx, a, c := benchPair(b)
	msg := make([]byte, 64)
	done := make(chan error, 1)
	go func() {
		for i := 0; i < b.N; i++ {
			m, err := c.Recv(ctx, 0, 1)
			if err == nil {
				err = c.Send(ctx, 0, 1, m)
			}
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := a.Send(ctx, 1, 1, msg); err != nil {
			b.Fatal(err)
		}
		if _, err := a.Recv(ctx, 1, 1); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/roundtrip")
}

func BenchmarkRate1MiB(b *testing.B) {
	ctx, a, c := benchPair(b)
	msg := make([]byte, 1<<20)
	done := make(chan error, 1)
	go func() {
		for i := 0; i < b.N; i++ {
			if _, err := c.Recv(ctx, 0, 1); err != nil {
				done <- err
				return
			}
		}
		done <- c.Send(ctx, 0, 2, nil)
	}()
	b.SetBytes(1 << 20)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := a.Send(ctx, 1, 1, msg); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := a.Recv(ctx, 1, 2); err != nil { // the last message is in
		b.Fatal(err)
	}
	b.StopTimer()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// barePair is two crypto/tls 1.3 connections with the job's certificates,
// the ceiling any TLS transport can reach here.
func barePair(b *testing.B) (*tls.Conn, *tls.Conn) {
	f := newFixtureB(b, 2)
	j0, j1 := f.job(0), f.job(1)
	pool, _, err := pki.Pool(j0.CA)
	if err != nil {
		b.Fatal(err)
	}
	srvCfg := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{rankCert(j1)}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	cliCfg := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{rankCert(j0)}, RootCAs: pool, ServerName: "127.0.0.1"}
	srvc := make(chan *tls.Conn, 1)
	go func() {
		raw, err := f.lns[1].Accept()
		if err != nil {
			srvc <- nil
			return
		}
		s := tls.Server(raw, srvCfg)
		s.Handshake()
		srvc <- s
	}()
	cli, err := tls.Dial("tcp", f.lns[1].Addr().String(), cliCfg)
	if err != nil {
		b.Fatal(err)
	}
	srv := <-srvc
	if srv == nil {
		b.Fatal("accept failed")
	}
	b.Cleanup(func() { cli.Close(); srv.Close() })
	return cli, srv
}

func BenchmarkBareTLSRoundTrip64(b *testing.B) {
	cli, srv := barePair(b)
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 64)
		for i := 0; i < b.N; i++ {
			if _, err := io.ReadFull(srv, buf); err != nil {
				done <- err
				return
			}
			if _, err := srv.Write(buf); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	buf := make([]byte, 64)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := cli.Write(buf); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(cli, buf); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/roundtrip")
}

func BenchmarkBareTLSRate1MiB(b *testing.B) {
	cli, srv := barePair(b)
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 1<<20)
		for i := 0; i < b.N; i++ {
			if _, err := io.ReadFull(srv, buf); err != nil {
				done <- err
				return
			}
		}
		_, err := srv.Write([]byte{1})
		done <- err
	}()
	msg := make([]byte, 1<<20)
	b.SetBytes(1 << 20)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := cli.Write(msg); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := io.ReadFull(cli, make([]byte, 1)); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

var _ = time.Second
var _ net.Conn

// BenchmarkRoundTrip64Traced is BenchmarkRoundTrip64 with the trace
// records of --trace on (written to nowhere): what tracing costs a round
// trip (two calls, their waits, four records).
func BenchmarkRoundTrip64Traced(b *testing.B) {
	defer runtime.TraceTo(io.Discard)()
	BenchmarkRoundTrip64(b)
}
