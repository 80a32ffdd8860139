package runtime

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
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

// listenFailed is the error (H1610) of a rank that cannot listen at its
// port: it names the port and the fix.
func listenFailed(rank int, addr string, port int, err error) error {
	fix := "give this rank's host line a free port (\"HOST PORT\") and make the job again"
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		fix = fmt.Sprintf("port %d is taken on this host; %s, or end what holds it (ss -ltnp 'sport = %d')", port, fix, port)
		if lo, hi, ok := ephemeralRange(); ok && port >= lo && port <= hi {
			fix += fmt.Sprintf("; port %d lies in this host's ephemeral range %d-%d (net.ipv4.ip_local_port_range), where any outgoing connection may take it", port, lo, hi)
		}
	case errors.Is(err, syscall.EACCES):
		fix = fmt.Sprintf("port %d needs privileges on this host; %s", port, fix)
	default:
		fix = fmt.Sprintf("port %d: %s", port, fix)
	}
	return codes.Wrap(codes.Unreachable, err, "rank %d cannot listen at %s: %v: %s", rank, addr, err, fix)
}

// ephemeralRange reads Linux's range of local ports for outgoing
// connections.
func ephemeralRange() (lo, hi int, ok bool) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0, false
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	return lo, hi, err1 == nil && err2 == nil && 0 < lo && lo <= hi && hi <= 65535
}
