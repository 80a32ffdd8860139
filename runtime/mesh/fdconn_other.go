//go:build !linux

package mesh

import "net"

// ownConn keeps the connection in Go's poller where this package has no
// poller of its own: reads block at once, with no spin.
func ownConn(c net.Conn) (net.Conn, error) { return c, nil }

// unreadBytes is 0: this system's unread bytes are not asked.
func unreadBytes(net.Conn) int { return 0 }

// pollOwn keeps c as it is.
func pollOwn(c net.Conn) net.Conn { return c }
