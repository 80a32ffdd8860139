package hosts

import (
	"strconv"
	"strings"
)

// SSHPort is the port ssh dials on a remote host (SPEC §3).
const SSHPort = 62222

// BasePort is the first listening port of remote ranks, and of every rank of
// "sperli job make": rank i listens at BasePort+i unless its line gives a port.
// 21400 … 21400+4095 (the largest job) lies below Linux's ephemeral range
// (32768–60999), so no dialer's own port can take it, and clear of the
// ports of well-known cluster services (docs/hosts.md).
const BasePort = 21400

// ShellQuote returns word quoted for a POSIX sh so that the shell reads it
// back as exactly one word equal to word, for any byte string. The empty
// word becomes two single quotes. A word made only of letters, digits and
// @%_+=:,./- stays as it is, unless it would read as a variable assignment
// ("A=b"), which a shell does not take for a command. Anything else is put
// in single quotes, each single quote inside written as quote, backslash,
// quote, quote:
//
//	ShellQuote("it's") == `'it'\''s'`
//
// A word that holds a NUL byte is quoted all the same, but no argv can
// carry it, so starting such a command fails.
func ShellQuote(word string) string {
	if word == "" {
		return "''"
	}
	if isPlain(word) {
		return word
	}
	return "'" + strings.ReplaceAll(word, "'", `'\''`) + "'"
}

// isPlain reports whether word needs no quotes in any position of a
// command line.
func isPlain(word string) bool {
	for i := 0; i < len(word); i++ {
		c := word[i]
		if isLetter(c) || isDigit(c) || strings.IndexByte("@%_+=:,./-", c) >= 0 {
			continue
		}
		return false
	}
	return !isAssignment(word)
}

// isAssignment reports whether word begins with NAME=, NAME being a shell
// variable name.
func isAssignment(word string) bool {
	name, _, ok := strings.Cut(word, "=")
	if !ok || name == "" || isDigit(name[0]) {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isLetter(c) && !isDigit(c) && c != '_' {
			return false
		}
	}
	return true
}

// SSHArgv returns the argv that starts command on a remote host:
// ssh -p 62222 -o BatchMode=yes HOST WORD..., each word of command quoted by
// ShellQuote as an element of its own (ssh joins them with spaces for the
// remote shell). host must be valid by Parse; in particular it does not
// begin with '-'. The result is a new slice; command is not changed.
func SSHArgv(host string, command []string) []string {
	argv := make([]string, 0, 6+len(command))
	argv = append(argv, "ssh", "-p", strconv.Itoa(SSHPort), "-o", "BatchMode=yes", host)
	for _, w := range command {
		argv = append(argv, ShellQuote(w))
	}
	return argv
}

// LastDefaultPort is the last port BasePort + rank may give: the ports
// above are Linux's ephemeral ones, where a dialer's own port could take
// it. A rank beyond (rank > LastDefaultPort - BasePort) needs a port on
// its line.
const LastDefaultPort = 32767

// RankPort returns the port a rank listens at when the launcher does not
// hand it a socket: the port of its line, else BasePort + rank.
func RankPort(l Line, rank int) int {
	if l.Port != 0 {
		return l.Port
	}
	return BasePort + rank
}
