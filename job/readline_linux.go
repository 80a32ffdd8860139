//go:build linux

package job

import (
	"io"
	"io/fs"
	"os"
	"syscall"
)

// peekSource looks ahead in a pipe (tee(2) into a pipe of its own) or a
// stream socket (recv with MSG_PEEK), then takes from the file only the
// bytes up to the line end; nil for any other kind of file.
func peekSource(f *os.File, mode fs.FileMode) lineSource {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	switch {
	case mode&fs.ModeNamedPipe != 0:
		var p [2]int
		if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
			return nil
		}
		return &peeker{f: f, rc: rc, r: p[0], w: p[1]}
	case mode&fs.ModeSocket != 0:
		typ, serr := 0, error(nil)
		err := rc.Control(func(fd uintptr) { typ, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TYPE) })
		if err != nil || serr != nil || typ != syscall.SOCK_STREAM {
			return nil
		}
		return &peeker{f: f, rc: rc, r: -1, w: -1}
	}
	return nil
}

// peeker is a pipe's or a socket's lineSource. r and w are its own pipe
// for tee(2) (-1 for a socket). A pipe tee(2) refuses falls back to a byte
// at a time.
type peeker struct {
	f     *os.File
	rc    syscall.RawConn
	r, w  int
	bytes *byteSource
}

func (s *peeker) next(p []byte) (int, error) {
	if s.bytes != nil {
		return s.bytes.next(p)
	}
	n, err := s.peek(p)
	if s.w >= 0 && (err == syscall.EINVAL || err == syscall.ENOSYS) {
		s.bytes = &byteSource{r: s.f}
		return s.bytes.next(p)
	}
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, io.EOF
	}
	k := cutLine(p[:n])
	// The k bytes are in the file: take them (the same bytes again).
	for got := 0; got < k; {
		m, err := s.sys(func(fd int) (int, error) { return syscall.Read(fd, p[got:k]) })
		if err != nil {
			return 0, err
		}
		if m == 0 {
			return 0, io.ErrUnexpectedEOF
		}
		got += m
	}
	return k, nil
}

// peek copies what the file holds, up to len(p) bytes, into p without
// taking it; it waits for at least one byte or the end (0).
func (s *peeker) peek(p []byte) (int, error) {
	if s.w < 0 {
		return s.sys(func(fd int) (int, error) {
			n, _, err := syscall.Recvfrom(fd, p, syscall.MSG_PEEK)
			return n, err
		})
	}
	n, err := s.sys(func(fd int) (int, error) {
		n, err := syscall.Tee(fd, s.w, len(p), 0)
		return int(n), err
	})
	if err != nil || n == 0 {
		return 0, err
	}
	// The copy is in our pipe: read all of it back.
	for got := 0; got < n; {
		m, err := syscall.Read(s.r, p[got:n])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if m == 0 {
			return 0, io.ErrUnexpectedEOF
		}
		got += m
	}
	return n, nil
}

// sys runs a system call on the file's descriptor, through Go's poller
// when the descriptor is non-blocking, again after EINTR.
func (s *peeker) sys(call func(fd int) (int, error)) (int, error) {
	for {
		var n int
		var err error
		if rerr := s.rc.Read(func(fd uintptr) bool {
			n, err = call(int(fd))
			return err != syscall.EAGAIN
		}); rerr != nil {
			return 0, rerr
		}
		if err != syscall.EINTR {
			return n, err
		}
	}
}

func (s *peeker) close() {
	if s.w >= 0 {
		syscall.Close(s.r)
		syscall.Close(s.w)
	}
}
