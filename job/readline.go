package job

import (
	"bytes"
	"io"
	"os"

	"sperli/codes"
)

// lineSource gives the bytes of a job description line and never takes a
// byte past its line end: next fills p with at least one byte, and the
// bytes it returns end at the first "\n" if they hold one (what follows
// stays unread in the source). It returns 0 and io.EOF at the end.
type lineSource interface {
	next(p []byte) (int, error)
	close()
}

// readLine reads r up to its first line end and no further (docs/protocol.md
// §"Job description"): what follows is the launcher's control channel, and
// for a rank started by hand it may be the program's own input. A byte per
// read system call made a description of 32 ranks (7-8 KB) cost 4-5% of the
// CPU of their join, so a file is read in blocks where the system lets it
// look ahead without taking: a regular file is read at its offset and the
// offset moved to the line end; on Linux a pipe is looked at with tee(2)
// and a stream socket with MSG_PEEK (readline_linux.go). Anything else is
// read a byte at a time. It returns the line without its "\n".
func readLine(r io.Reader) ([]byte, error) {
	src := sourceOf(r)
	defer src.close()
	buf := make([]byte, 0, 16<<10)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		// Never more than the limit allows: the line and its "\n".
		n, err := src.next(buf[len(buf):min(cap(buf), MaxLine+1)])
		if i := bytes.IndexByte(buf[len(buf):len(buf)+n], '\n'); i >= 0 {
			return buf[:len(buf)+i], nil
		}
		buf = buf[:len(buf)+n]
		if len(buf) > MaxLine {
			return nil, codes.New(codes.JobMalformed, "job description is longer than %d bytes", MaxLine)
		}
		if err == io.EOF {
			if len(buf) == 0 {
				return nil, codes.New(codes.JobMalformed, "job description missing: standard input is empty")
			}
			return buf, nil
		}
		if err != nil {
			return nil, codes.Wrap(codes.JobMalformed, err, "job description unreadable: %v", err)
		}
	}
}

// sourceOf picks how r is read: ahead where the system allows it, else a
// byte at a time.
func sourceOf(r io.Reader) lineSource {
	if f, ok := r.(*os.File); ok {
		if st, err := f.Stat(); err == nil {
			if st.Mode().IsRegular() {
				if off, err := f.Seek(0, io.SeekCurrent); err == nil {
					return &regularSource{f: f, off: off}
				}
			} else if src := peekSource(f, st.Mode()); src != nil {
				return src
			}
		}
	}
	return &byteSource{r: r}
}

// byteSource reads one byte per call.
type byteSource struct{ r io.Reader }

func (s *byteSource) next(p []byte) (int, error) {
	if br, ok := s.r.(io.ByteReader); ok {
		b, err := br.ReadByte()
		if err != nil {
			return 0, err
		}
		p[0] = b
		return 1, nil
	}
	for {
		n, err := s.r.Read(p[:1])
		if n > 0 || err != nil {
			return n, err
		}
	}
}

func (s *byteSource) close() {}

// regularSource reads a regular file in blocks at its offset and moves the
// offset to just past what it returns (the offset is shared with every
// process that holds the file open, as a shell's "< rank-1.job" does).
type regularSource struct {
	f   *os.File
	off int64
}

func (s *regularSource) next(p []byte) (int, error) {
	n, err := s.f.ReadAt(p, s.off)
	if n == 0 {
		if err == nil {
			err = io.ErrNoProgress
		}
		return 0, err
	}
	n = cutLine(p[:n])
	s.off += int64(n)
	if _, err := s.f.Seek(s.off, io.SeekStart); err != nil {
		return 0, err
	}
	return n, nil
}

func (s *regularSource) close() {}

// cutLine is the length of p up to and with its first "\n", or len(p).
func cutLine(p []byte) int {
	if i := bytes.IndexByte(p, '\n'); i >= 0 {
		return i + 1
	}
	return len(p)
}
