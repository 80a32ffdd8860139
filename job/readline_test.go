package job_test

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"
	"time"

	"sperli/codes"
	"sperli/job"
)

// TestReadJobStopsAtLineEnd: ReadJob of a file takes the description line
// and not one byte more, whatever kind of file standard input is and
// however the writer splits the line: a program that reads the file
// afterwards (or a launcher's control channel) gets the rest whole.
func TestReadJobStopsAtLineEnd(t *testing.T) {
	good := goodJobLine(t)
	// JSON may start with blanks: a line longer than a pipe's buffer (64 KiB).
	long := append(bytes.Repeat([]byte(" "), 200<<10), good...)
	const rest = "the program's own input\nsecond line\n"
	// write writes the chunks to w, a millisecond apart, and closes it.
	write := func(w io.WriteCloser, chunks [][]byte) {
		defer w.Close()
		for i, c := range chunks {
			if i > 0 {
				time.Sleep(time.Millisecond)
			}
			if _, err := w.Write(c); err != nil {
				return
			}
		}
	}
	pipe := func(t *testing.T, chunks [][]byte) *os.File {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		go write(w, chunks)
		return r
	}
	socket := func(t *testing.T, chunks [][]byte) *os.File {
		fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
		if err != nil {
			t.Fatal(err)
		}
		go write(os.NewFile(uintptr(fds[1]), "writer"), chunks)
		return os.NewFile(uintptr(fds[0]), "reader")
	}
	regular := func(t *testing.T, chunks [][]byte) *os.File {
		p := filepath.Join(t.TempDir(), "rank.job")
		if err := os.WriteFile(p, bytes.Join(chunks, nil), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	// split cuts b into pieces of n bytes.
	split := func(b []byte, n int) [][]byte {
		var out [][]byte
		for len(b) > n {
			out = append(out, b[:n])
			b = b[n:]
		}
		return append(out, b)
	}
	whole := append(append(append([]byte(nil), good...), '\n'), rest...)
	longInput := append(append(append([]byte(nil), long...), '\n'), rest...)
	for _, kind := range []struct {
		name string
		open func(*testing.T, [][]byte) *os.File
	}{{"pipe", pipe}, {"socket", socket}, {"regular file", regular}} {
		for _, tc := range []struct {
			name   string
			chunks [][]byte
		}{
			{"whole", [][]byte{whole}},
			{"in pieces", split(whole, 500)},
			// a byte at a time for the first 20 bytes, then the rest
			{"bytes", append(split(whole[:20], 1), whole[20:])},
			// the line end alone, then the rest
			{"line end alone", [][]byte{good, whole[len(good) : len(good)+1], []byte(rest)}},
			{"long", [][]byte{longInput}},
		} {
			t.Run(kind.name+"/"+tc.name, func(t *testing.T) {
				f := kind.open(t, tc.chunks)
				defer f.Close()
				j, err := job.Read(f)
				if err != nil {
					t.Fatalf("ReadJob = %v", err)
				}
				if j.Rank != 1 || !bytes.Equal(j.Encode(), good) {
					t.Errorf("ReadJob read another description")
				}
				got, err := io.ReadAll(f) // the file itself, not j.Control
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != rest {
					t.Errorf("after ReadJob the file holds %q, want %q", got, rest)
				}
			})
		}
	}
	// Too long and empty, through a pipe.
	over := append(bytes.Repeat([]byte("x"), job.MaxLine+1), '\n')
	f := pipe(t, [][]byte{over})
	_, err := job.Read(f)
	f.Close()
	wantCode(t, "ReadJob(over the limit, a pipe)", err, codes.JobMalformed)
	if err != nil && !strings.Contains(err.Error(), "longer than") {
		t.Errorf("ReadJob(over the limit) = %v, want it to say the description is too long", err)
	}
	f = pipe(t, nil)
	_, err = job.Read(f)
	f.Close()
	wantCode(t, "ReadJob(empty pipe)", err, codes.JobMalformed)
}

// BenchmarkReadJobPipe: reading a description of a job of 32 ranks from a
// pipe, as a launched rank does ("bytes": a byte per read system call).
func BenchmarkReadJobPipe(b *testing.B) {
	f := newJobs(b, 32)
	line := append(f.job(5).Encode(), '\n')
	for _, tc := range []struct {
		name string
		wrap func(*os.File) io.Reader
	}{
		{"peek", func(f *os.File) io.Reader { return f }},
		{"bytes", func(f *os.File) io.Reader { return iotest.OneByteReader(f) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				r, w, err := os.Pipe()
				if err != nil {
					b.Fatal(err)
				}
				w.Write(line)
				if _, err := job.Read(tc.wrap(r)); err != nil {
					b.Fatal(err)
				}
				r.Close()
				w.Close()
			}
		})
	}
}
