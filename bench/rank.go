package bench

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"

	"sperli/job"
	"sperli/pki"
	"sperli/runtime"
)

// GoRank is the Go side of `sperli bench` (the hidden `sperli bench-rank`):
// a rank embedding runtime that runs one measurement, args MODE SIZE COUNT
// [T0], and prints {"ns": N} on rank 0.
func GoRank(args []string) int {
	j, err := job.Read(os.Stdin)
	if err != nil {
		return runtime.Exit(nil, err)
	}
	ctx := context.Background()
	c, err := runtime.Init(ctx, j)
	if err != nil {
		return runtime.Exit(nil, err)
	}
	return runtime.Exit(c, goMeasure(ctx, c, args))
}

func parseArgs(args []string) (mode string, size, count int, err error) {
	if len(args) < 3 {
		return "", 0, 0, fmt.Errorf("bench rank: want MODE SIZE COUNT, got %q", args)
	}
	size, err = strconv.Atoi(args[1])
	if err == nil {
		count, err = strconv.Atoi(args[2])
	}
	return args[0], size, count, err
}

func goMeasure(ctx context.Context, c *runtime.Comm, args []string) error {
	mode, size, count, err := parseArgs(args)
	if err != nil {
		return err
	}
	other := 1 - c.Rank()
	var msg []byte
	if mode == "pingpong" || mode == "stream" {
		msg = make([]byte, size)
	}
	warm := max(1, count/10)
	switch mode {
	case "pingpong":
		return pingpong(ctx, c, other, msg, warm, count)
	case "stream":
		return stream(ctx, c, other, msg, count)
	case "allreduce":
		data := make([]byte, size-size%8)
		for i := 0; i < warm; i++ {
			if _, err := c.Allreduce(ctx, runtime.Int64, runtime.Sum, data); err != nil {
				return err
			}
		}
		if err := c.Barrier(ctx); err != nil {
			return err
		}
		t0 := time.Now()
		for i := 0; i < count; i++ {
			if _, err := c.Allreduce(ctx, runtime.Int64, runtime.Sum, data); err != nil {
				return err
			}
		}
		if c.Rank() == 0 {
			fmt.Printf("{\"ns\": %d}\n", time.Since(t0).Nanoseconds()/int64(count))
		}
	case "idle":
		_, err := c.Recv(ctx, other, 99)
		return err
	case "join":
		// size is the start time (unix ns) the bench took before spawning.
		if err := c.Barrier(ctx); err != nil {
			return err
		}
		if c.Rank() == 0 {
			fmt.Printf("{\"ns\": %d}\n", time.Now().UnixNano()-int64(size))
		}
	default:
		return fmt.Errorf("bench rank: unknown mode %q", mode)
	}
	return nil
}

// pingpong: rank 0 sends msg and takes the answer, warm times and then
// count times on the clock, and prints the round trip's mean; rank 1
// answers.
func pingpong(ctx context.Context, c *runtime.Comm, other int, msg []byte, warm, count int) error {
	if c.Rank() == 0 {
		var t0 time.Time
		for i := 0; i < warm+count; i++ {
			if i == warm {
				t0 = time.Now()
			}
			if err := c.Send(ctx, other, 1, msg); err != nil {
				return err
			}
			if _, err := c.Recv(ctx, other, 1); err != nil {
				return err
			}
		}
		fmt.Printf("{\"ns\": %d}\n", time.Since(t0).Nanoseconds()/int64(count))
		return nil
	}
	for i := 0; i < warm+count; i++ {
		m, err := c.Recv(ctx, other, 1)
		if err != nil {
			return err
		}
		if err := c.Send(ctx, other, 1, m); err != nil {
			return err
		}
	}
	return nil
}

// stream: rank 0 sends count messages of msg after a first one, the
// receiver's answers to the first and the last bound the time it prints.
func stream(ctx context.Context, c *runtime.Comm, other int, msg []byte, count int) error {
	if c.Rank() == 0 {
		if err := c.Send(ctx, other, 2, msg); err != nil {
			return err
		}
		if _, err := c.Recv(ctx, other, 3); err != nil {
			return err
		}
		t0 := time.Now()
		for i := 0; i < count; i++ {
			if err := c.Send(ctx, other, 2, msg); err != nil {
				return err
			}
		}
		if _, err := c.Recv(ctx, other, 3); err != nil {
			return err
		}
		fmt.Printf("{\"ns\": %d}\n", time.Since(t0).Nanoseconds())
		return nil
	}
	for i := 0; i < count+1; i++ {
		m, err := c.Recv(ctx, other, 2)
		if err != nil {
			return err
		}
		c.Release(m) // as an MPI program receives into one buffer
		if i == 0 || i == count {
			if err := c.Send(ctx, other, 3, []byte("k")); err != nil {
				return err
			}
		}
	}
	return nil
}

// TLSRank is the bare crypto/tls pair (the hidden `sperli bench-tls`): the
// same measurement over one TLS 1.3 connection with the job's certificates,
// with no Sperli framing: the ceiling of any TLS transport here.
func TLSRank(args []string) int {
	j, err := job.Read(os.Stdin)
	if err == nil {
		err = tlsMeasure(j, args)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func tlsMeasure(j *job.Job, args []string) error {
	mode, size, count, err := parseArgs(args)
	if err != nil {
		return err
	}
	pool, _, err := pki.Pool(j.CA)
	if err != nil {
		return err
	}
	leaf, err := x509.ParseCertificate(j.Cert)
	if err != nil {
		return err
	}
	cert := tls.Certificate{Certificate: [][]byte{j.Cert}, PrivateKey: ed25519.NewKeyFromSeed(j.Key), Leaf: leaf}
	var conn *tls.Conn
	if j.Rank == 1 {
		ln, err := net.FileListener(os.NewFile(uintptr(j.ListenFD), "listener"))
		if err != nil {
			return err
		}
		raw, err := ln.Accept()
		if err != nil {
			return err
		}
		ln.Close()
		conn = tls.Server(raw, &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool})
	} else {
		peer := j.HostOf(1)
		addr := net.JoinHostPort(peer.Host, strconv.Itoa(peer.Port))
		raw, err := net.Dial("tcp", addr)
		if err != nil {
			return err
		}
		conn = tls.Client(raw, &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: peer.Host})
	}
	defer conn.Close()
	if err := conn.Handshake(); err != nil {
		return err
	}
	buf := make([]byte, max(size, 8))[:size]
	ack := make([]byte, 1)
	warm := max(1, count/10)
	switch mode {
	case "pingpong":
		var t0 time.Time
		for i := 0; i < warm+count; i++ {
			if i == warm {
				t0 = time.Now()
			}
			if j.Rank == 0 {
				if _, err := conn.Write(buf); err != nil {
					return err
				}
				if _, err := io.ReadFull(conn, buf); err != nil {
					return err
				}
			} else {
				if _, err := io.ReadFull(conn, buf); err != nil {
					return err
				}
				if _, err := conn.Write(buf); err != nil {
					return err
				}
			}
		}
		if j.Rank == 0 {
			fmt.Printf("{\"ns\": %d}\n", time.Since(t0).Nanoseconds()/int64(count))
		}
	case "stream":
		if j.Rank == 0 {
			t0 := time.Now()
			for i := 0; i < count; i++ {
				if _, err := conn.Write(buf); err != nil {
					return err
				}
			}
			if _, err := io.ReadFull(conn, ack); err != nil {
				return err
			}
			fmt.Printf("{\"ns\": %d}\n", time.Since(t0).Nanoseconds())
		} else {
			for i := 0; i < count; i++ {
				if _, err := io.ReadFull(conn, buf); err != nil {
					return err
				}
			}
			if _, err := conn.Write(ack); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("bench tls: unknown mode %q", mode)
	}
	return nil
}
