package runtime_test

import (
	"context"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"sperli/codes"
	"sperli/runtime"
)

// TestListenFDNotAListener: a description whose listen_fd is no listening
// socket — standard output, standard error, a pipe, a file, a connected
// socket, a descriptor not open — is H1615, and the descriptor is left
// open, the same file as before (it was closed first, and H1615 after).
func TestListenFDNotAListener(t *testing.T) {
	f := newFixtureTCP(t, 1)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	file, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	connFile, err := conn.(*net.TCPConn).File()
	if err != nil {
		t.Fatal(err)
	}
	defer connFile.Close()
	for _, tc := range []struct {
		name, want string
		fd         int
	}{
		{"stdout", "not a listening socket", 1},
		{"stderr", "not a listening socket", 2},
		{"a pipe", "not a listening socket", int(pw.Fd())},
		{"a file", "not a listening socket", int(file.Fd())},
		{"a connected socket", "does not listen", int(connFile.Fd())},
	} {
		var before syscall.Stat_t
		if err := syscall.Fstat(tc.fd, &before); err != nil {
			t.Fatal(err)
		}
		j := f.job(0)
		j.Listener, j.ListenFD = nil, tc.fd
		c, err := runtime.Init(context.Background(), j)
		if err == nil {
			c.Close()
		}
		wantCode(t, "Init(listen_fd "+tc.name+")", err, codes.JobMalformed)
		if err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Init(listen_fd %s) = %v, want it to say %q", tc.name, err, tc.want)
		}
		var after syscall.Stat_t
		if err := syscall.Fstat(tc.fd, &after); err != nil || after.Dev != before.Dev || after.Ino != before.Ino {
			t.Errorf("listen_fd %s (%d): after Init it is not the file it was (fstat: %v)", tc.name, tc.fd, err)
		}
	}
	// A listening socket is taken over (a raw descriptor: Init closes it).
	lnFile, err := f.lns[0].(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := syscall.Dup(int(lnFile.Fd()))
	lnFile.Close()
	if err != nil {
		t.Fatal(err)
	}
	j := f.job(0)
	j.Listener, j.ListenFD = nil, raw
	c, err := runtime.Init(context.Background(), j)
	if err != nil {
		t.Fatalf("Init(listen_fd a listening socket) = %v", err)
	}
	c.Close()
	// A descriptor that is not open at all.
	j = f.job(0)
	j.Listener, j.ListenFD = nil, 1<<20
	_, err = runtime.Init(context.Background(), j)
	wantCode(t, "Init(listen_fd not open)", err, codes.JobMalformed)
}
