package runtime

import (
	"net"
	"os"
	"syscall"

	"sperli/codes"
)

// inheritListener takes over fd, the inherited listening socket of a job
// description's listen_fd. It checks first and closes fd only once fd is
// known to be a listening socket: a description naming any other
// descriptor (standard output, standard error, a file, a connected
// socket, none at all) is H1615 and leaves that descriptor as it was.
func inheritListener(fd int) (net.Listener, error) {
	bad := func(err error) error {
		return codes.Wrap(codes.JobMalformed, err, "job description: listen_fd %d is not a listening socket: %v", fd, err)
	}
	// The checks work on a duplicate, so that nothing here can close fd
	// (under ForkLock: no child started meanwhile inherits it).
	syscall.ForkLock.RLock()
	dup, err := syscall.Dup(fd)
	if err == nil {
		syscall.CloseOnExec(dup)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, bad(err)
	}
	f := os.NewFile(uintptr(dup), "sperli-listener")
	defer f.Close()
	v, err := syscall.GetsockoptInt(dup, syscall.SOL_SOCKET, syscall.SO_ACCEPTCONN)
	if err != nil {
		return nil, bad(err)
	}
	if v == 0 {
		return nil, codes.New(codes.JobMalformed, "job description: listen_fd %d is not a listening socket: a socket that does not listen", fd)
	}
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, bad(err)
	}
	syscall.Close(fd)
	return ln, nil
}
