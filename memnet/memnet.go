// Package memnet is an in-memory network for tests and simulations: the
// runtime's join, links and recovery run over it as over TCP (the job
// description's Net field, package job), with no socket and no interface,
// so that they run in a network namespace with none up.
//
// A connection is a pair of buffered pipes with the semantics of a TCP
// socket that the runtime relies on: a write returns once its bytes are in
// the peer's buffer (it blocks while the buffer is full); a read returns
// what is there, or waits; read and write deadlines, set at any time, end
// a waiting call with an error whose Timeout() is true
// (os.ErrDeadlineExceeded); Close ends both directions (the peer reads
// what was written before, then io.EOF; its writes fail with EPIPE);
// CloseWrite ends this side's direction only. Dialling an address nobody
// listens at is ECONNREFUSED; listening at one in use is EADDRINUSE. A
// listener at ":port" (or 0.0.0.0, ::) takes the dials to that port of any
// host.
//
// Addresses are TCP's (*net.TCPAddr where the host is an IP address), so
// that code reading a listener's port reads it the same way.
package memnet

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// DefaultBuffer is the bytes a connection buffers in each direction.
const DefaultBuffer = 1 << 20

// backlog is the dials a listener holds before Accept takes them.
const backlog = 256

// firstPort is where the ports of listeners at port 0 start.
const firstPort = 20000

// Network is one in-memory network. The zero value is not usable: New.
type Network struct {
	// Buffer is the bytes a connection buffers in each direction
	// (DefaultBuffer when 0); set it before the first Dial.
	Buffer int
	// Latency is how long after a write its bytes can be read (0: at
	// once); set it before the first Dial. With a fake clock
	// (testing/synctest) it is simulated time: a simulation's network.
	Latency time.Duration

	mu       sync.Mutex
	lns      map[string]*Listener // by "host:port"; ":port" for any host
	nextPort int
	dials    int64
}

// New makes an empty network.
func New() *Network {
	return &Network{lns: map[string]*Listener{}, nextPort: firstPort}
}

// Dials is the number of connections made so far.
func (n *Network) Dials() int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.dials
}

func key(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }

func anyHost(host string) bool { return host == "" || host == "0.0.0.0" || host == "::" }

// Listen listens at addr ("host:port"; port 0 picks a free one).
func (n *Network) Listen(addr string) (net.Listener, error) {
	host, port, err := splitAddr(addr)
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: "tcp", Err: err}
	}
	if anyHost(host) {
		host = ""
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if port == 0 {
		for n.taken(host, n.nextPort) {
			n.nextPort++
		}
		port = n.nextPort
		n.nextPort++
	}
	if n.taken(host, port) {
		return nil, &net.OpError{Op: "listen", Net: "tcp", Addr: addrOf(host, port), Err: syscall.EADDRINUSE}
	}
	l := &Listener{n: n, key: key(host, port), addr: addrOf(host, port), pending: make(chan *Conn, backlog), done: make(chan struct{})}
	n.lns[l.key] = l
	return l, nil
}

// taken reports whether a listener at host:port would clash with one there
// already: the same address, or a wildcard and a host of the same port.
func (n *Network) taken(host string, port int) bool {
	if _, ok := n.lns[key(host, port)]; ok {
		return true
	}
	if host == "" {
		suffix := ":" + strconv.Itoa(port)
		for k := range n.lns {
			if len(k) > len(suffix) && k[len(k)-len(suffix):] == suffix {
				return true
			}
		}
		return false
	}
	_, ok := n.lns[key("", port)]
	return ok
}

// Dial connects to addr.
func (n *Network) Dial(addr string) (net.Conn, error) {
	return n.DialContext(context.Background(), addr)
}

// DialContext connects to addr, waiting while the listener's backlog is
// full until ctx ends.
func (n *Network) DialContext(ctx context.Context, addr string) (net.Conn, error) {
	host, port, err := splitAddr(addr)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: err}
	}
	n.mu.Lock()
	l := n.lns[key(host, port)]
	if l == nil {
		l = n.lns[key("", port)]
	}
	if l == nil {
		n.mu.Unlock()
		return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: addrOf(host, port), Err: syscall.ECONNREFUSED}
	}
	n.dials++
	// The dialer's port is only what its address says (the ports of a
	// large simulation's dials would run past 65535).
	local := addrOf("127.0.0.1", 1024+int(n.dials%64000))
	size := n.Buffer
	n.mu.Unlock()
	if size <= 0 {
		size = DefaultBuffer
	}
	mine, theirs := pipeOf(size, n.Latency, local, addrOf(host, port))
	select {
	case l.pending <- theirs:
		return mine, nil
	case <-l.done:
	case <-ctx.Done():
		mine.Close()
		theirs.Close()
		return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: addrOf(host, port), Err: ctx.Err()}
	}
	mine.Close()
	theirs.Close()
	return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: addrOf(host, port), Err: syscall.ECONNREFUSED}
}

func splitAddr(addr string) (string, int, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(ps)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("port %q: want 0 to 65535", ps)
	}
	return host, port, nil
}

// Addr is the address of a host that is not an IP address.
type Addr struct {
	Host string
	Port int
}

func (a Addr) Network() string { return "tcp" }
func (a Addr) String() string  { return key(a.Host, a.Port) }

func addrOf(host string, port int) net.Addr {
	if host == "" {
		return &net.TCPAddr{IP: net.IPv4zero, Port: port}
	}
	if ip := net.ParseIP(host); ip != nil {
		return &net.TCPAddr{IP: ip, Port: port}
	}
	return Addr{Host: host, Port: port}
}

// Listener is a listener of a Network.
type Listener struct {
	n       *Network
	key     string
	addr    net.Addr
	pending chan *Conn
	once    sync.Once
	done    chan struct{}
}

// Accept waits for the next connection.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.pending:
		return c, nil
	case <-l.done:
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.addr, Err: net.ErrClosed}
	}
}

// Close stops listening; dials not yet accepted are refused (their
// connections end).
func (l *Listener) Close() error {
	l.once.Do(func() {
		l.n.mu.Lock()
		if l.n.lns[l.key] == l {
			delete(l.n.lns, l.key)
		}
		l.n.mu.Unlock()
		close(l.done)
		for {
			select {
			case c := <-l.pending:
				c.Close()
			default:
				return
			}
		}
	})
	return nil
}

// Addr is where l listens.
func (l *Listener) Addr() net.Addr { return l.addr }
