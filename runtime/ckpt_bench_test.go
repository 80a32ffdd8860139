package runtime_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"sperli/runtime"
)

// The checkpoint figures of docs/benchmarks.md: a checkpoint of 64 MiB per
// rank on 3 in-process ranks, beside the bare costs it is made of, each
// measured alone in the same run:
//
//	go test -run '^$' -bench 'Checkpoint64|SHA256_64|WriteFsync|TLS64' -benchtime 5x ./runtime/
//
// The bare cost of one rank's checkpoint is SHA-256 of its state + write
// and fsync of its file + one TLS transfer of the file to its buddy +
// write and fsync of the buddy copy it keeps for its other neighbour:
// SHA256_64MiB + 2 × WriteFsync64MiB + TLS64MiB (scripts/bench/checkpoint.sh
// prints the ratio).

const ckpt64 = 64 << 20

func state64(b *testing.B) []byte {
	s := make([]byte, ckpt64)
	for i := range s {
		s[i] = byte(i*7 + i>>13)
	}
	return s
}

// BenchmarkCheckpoint64MiB: every rank of 3 checkpoints 64 MiB at once;
// one op is one epoch, from the first rank's call to the last rank's
// return. Each rank keeps its files in a directory of its own, as on
// separate hosts (all in b.TempDir(), on one disk).
func BenchmarkCheckpoint64MiB(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 3
	f := newFixtureB(b, n)
	base := b.TempDir()
	comms := make([]*runtime.Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		j := f.job(r)
		j.CheckpointDir = filepath.Join(base, fmt.Sprintf("host%d", r))
		wg.Add(1)
		go func(r int) { defer wg.Done(); comms[r], errs[r] = runtime.Init(ctx, j) }(r)
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			b.Fatalf("Init(rank %d) = %v", r, err)
		}
	}
	b.Cleanup(func() {
		for _, c := range comms {
			c.Close()
		}
	})
	states := make([][]byte, n)
	for r := range states {
		states[r] = state64(b)
		states[r][0] = byte(r)
	}
	b.SetBytes(ckpt64)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for r, c := range comms {
			wg.Add(1)
			go func(r int, c *runtime.Comm) {
				defer wg.Done()
				errs[r] = c.Checkpoint(ctx, states[r])
			}(r, c)
		}
		wg.Wait()
		for r, err := range errs {
			if err != nil {
				b.Fatalf("rank %d: checkpoint %d: %v", r, i+1, err)
			}
		}
	}
	b.StopTimer()
	if e := comms[0].Epoch(); e != uint64(b.N) {
		b.Fatalf("epoch %d after %d checkpoints", e, b.N)
	}
}

// BenchmarkSHA256_64MiB: the hash of one state.
func BenchmarkSHA256_64MiB(b *testing.B) {
	s := state64(b)
	b.SetBytes(ckpt64)
	b.ResetTimer()
	var sum [32]byte
	for i := 0; i < b.N; i++ {
		sum = sha256.Sum256(s)
	}
	_ = sum
}

// BenchmarkWriteFsync64MiB: create, write, fsync and close a file of 64
// MiB in the temp dir (the previous one removed outside the timer).
func BenchmarkWriteFsync64MiB(b *testing.B) {
	s := state64(b)
	dir := b.TempDir()
	b.SetBytes(ckpt64)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		path := filepath.Join(dir, fmt.Sprintf("f%d", i))
		fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := fh.Write(s); err != nil {
			b.Fatal(err)
		}
		if err := fh.Sync(); err != nil {
			b.Fatal(err)
		}
		if err := fh.Close(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		os.Remove(path)
		b.StartTimer()
	}
}

// BenchmarkTLS64MiB: one transfer of 64 MiB over a bare crypto/tls 1.3
// connection on loopback with the job's certificates (barePair), from the
// first byte written to the last byte read.
func BenchmarkTLS64MiB(b *testing.B) {
	cli, srv := barePair(b)
	s := state64(b)
	got := make(chan error, 1)
	start := make(chan struct{})
	go func() {
		buf := make([]byte, ckpt64)
		for range start {
			_, err := io.ReadFull(srv, buf)
			got <- err
		}
	}()
	defer close(start)
	b.SetBytes(ckpt64)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start <- struct{}{}
		if _, err := cli.Write(s); err != nil {
			b.Fatal(err)
		}
		if err := <-got; err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckpointBare64MiB is the same work as BenchmarkCheckpoint64MiB
// done with the bare pieces, in the same order, by 3 goroutines at once
// on this machine: each hashes its 64 MiB, writes and fsyncs its file,
// sends it over a bare TLS 1.3 connection to the next (a ring of three
// barePair connections), receives its neighbour's and writes and fsyncs
// that copy. No framing, no agreement, no COMMIT, no pruning (the files
// of the previous op are removed outside the timer). It is what the same
// three ranks could reach sharing these two cores and this disk.
func BenchmarkCheckpointBare64MiB(b *testing.B) {
	const n = 3
	type conn interface {
		io.Reader
		io.Writer
	}
	send, recv := make([]conn, n), make([]conn, n)
	for r := 0; r < n; r++ {
		cli, srv := barePair(b) // r writes to cli, r+1 reads from srv
		send[r], recv[(r+1)%n] = cli, srv
	}
	dir := b.TempDir()
	states, bufs := make([][]byte, n), make([][]byte, n)
	for r := range states {
		states[r] = state64(b)
		states[r][0] = byte(r)
		bufs[r] = make([]byte, ckpt64)
	}
	write := func(path string, data []byte) error {
		fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		if _, err = fh.Write(data); err == nil {
			err = fh.Sync()
		}
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		return err
	}
	errs := make([]error, 2*n)
	var wg sync.WaitGroup
	b.SetBytes(ckpt64)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for r := 0; r < n; r++ {
			wg.Add(2)
			go func(r int) {
				defer wg.Done()
				sum := sha256.Sum256(states[r])
				_ = sum
				if err := write(filepath.Join(dir, fmt.Sprintf("rank-%d.%d", r, i)), states[r]); err != nil {
					errs[r] = err
					return
				}
				_, errs[r] = send[r].Write(states[r])
			}(r)
			go func(r int) {
				defer wg.Done()
				if _, err := io.ReadFull(recv[r], bufs[r]); err != nil {
					errs[n+r] = err
					return
				}
				errs[n+r] = write(filepath.Join(dir, fmt.Sprintf("buddy-%d.%d", r, i)), bufs[r])
			}(r)
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			os.Remove(filepath.Join(dir, e.Name()))
		}
		b.StartTimer()
	}
}
