package hosts

import (
	"net/netip"
	"strings"
)

// Loopback is the host of every rank when no host list is given.
const Loopback = "127.0.0.1"

// Local returns n lines of 127.0.0.1 without ports, the host list of a job
// started without --hosts. Their Line numbers are 0: they come from no file.
// It returns nil for n <= 0.
func Local(n int) []Line {
	if n <= 0 {
		return nil
	}
	out := make([]Line, n)
	for i := range out {
		out[i] = Line{Host: Loopback}
	}
	return out
}

// IsLocal reports whether a rank on host runs on this machine: host is
// "localhost" (any case, with or without a trailing dot), an IPv4 address in
// 127.0.0.0/8, or the IPv6 loopback address ::1 (also IPv4-mapped loopback
// addresses such as ::ffff:127.0.0.1). Names below localhost
// ("x.localhost") are not local: they are started over ssh like any other.
func IsLocal(host string) bool {
	if isLocalhost(host) {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Zone() == "" && a.Unmap().IsLoopback()
}

// ListenHost returns the address a local rank on host listens at:
// 127.0.0.1 for "localhost", otherwise host itself.
func ListenHost(host string) string {
	if isLocalhost(host) {
		return Loopback
	}
	return host
}

func isLocalhost(host string) bool {
	return strings.EqualFold(strings.TrimSuffix(host, "."), "localhost")
}
