// Package hosts reads Sperli's host list (SPEC §3), decides which hosts are
// refused (SPEC §4.4) and builds the ssh command that starts a remote host's
// agent, which starts that host's ranks (SPEC §18). CPUs counts this
// machine's processors, alike for the launcher, a host's agent and a rank.
//
// It does no network I/O: nothing here resolves a name, dials or starts a
// process. Every function is safe for concurrent use; a Refuser is never
// changed after NewRefuser.
//
// # Usage
//
//	lines, err := hosts.ReadFile("hosts.txt") // or hosts.Local(n) without --hosts
//	if err != nil {
//		return err // *hosts.ParseError "hosts.txt:3: ...": exit status 2
//	}
//	deny, err := hosts.ReadDenyFile(denyPath) // --deny-hosts, if given
//	if err != nil {
//		return err
//	}
//	r := hosts.NewRefuser(os.Getenv(hosts.EnvRefused), deny)
//	if err := r.Check("hosts.txt", lines); err != nil {
//		return err // *codes.Error H1614 naming host and line: exit status 2
//	}
//	l := lines[rank]
//	if hosts.IsLocal(l.Host) {
//		// Bind hosts.ListenHost(l.Host) on port 0 and hand the socket down.
//	} else {
//		port := hosts.RankPort(l, rank) // goes into the job description
//		argv := hosts.SSHArgv(l.Host, command)
//		cmd := exec.Command(argv[0], argv[1:]...)
//	}
//
// # The host list
//
// One host a line, optionally followed by blanks and a port, and by the
// number of ranks the line takes: "node1", "node2 47001", "node3 slots=8"
// (Open MPI's form) or "node3:8" (MPICH's), 1..MaxSlots. Expand turns the
// lines into one entry per slot, filled line by line or, for --map-by
// node, round-robin; the k-th slot of a line with port P listens at P+k. Blanks are spaces, tabs, and a carriage return at the end of
// a line (CRLF files read the same). Surrounding blanks are trimmed and blank
// lines are skipped. A '#' that begins a field starts a comment running to
// the end of the line, so both "# rack 3" and "node1 47001 # rack 3" are
// allowed; a '#' inside a field ("node1#x") is not a comment but a bad
// character, so a typo is never silently cut short.
//
// A host is a DNS name, an IPv4 address in dotted-quad form or an IPv6
// address (without brackets or zone). A name is made of letters, digits,
// '-' and '.', is at most 253 characters without its one optional trailing
// dot, has no empty label, no label longer than 63 characters and no label
// that begins or ends with '-'; in particular a host never begins with '-',
// so it cannot be read as an ssh option. A name whose labels are all numbers
// (decimal or 0x hex) must be a valid IPv4 address: "127.1" and "2130706433"
// are refused as malformed, since resolvers would read them as addresses
// that IsLocal and the certificates would not recognise. A name with one
// ':' is HOST:SLOTS; "node1:47001" is an error that says to put a port
// after a blank. A name with more is an IPv6 address. The host is kept as written (case and trailing dot); a port
// is a decimal number 1..65535. Parse does not reject repeated hosts: several
// ranks may share a host.
//
// Any malformed line is a *ParseError naming the file and line; Parse stops
// at the first one.
//
// # Refused hosts
//
// A Refuser refuses the reserved names "host-a.invalid" and "host-b.invalid",
// the names of SPERLI_REFUSED_HOSTS and the names given to --deny-hosts, and
// any name below any one of them: refusing "example.org" also refuses
// "db.example.org" (but not "badexample.org"). Names compare
// case-insensitively in ASCII (as DNS does), without trailing dots; IP
// addresses compare in canonical form, an IPv4-mapped IPv6 address as its
// IPv4 address. Nothing removes the reserved names.
//
// # Remote start
//
// SSHArgv builds "ssh -p 62222 -o BatchMode=yes HOST WORD..." with every
// word of the command quoted by ShellQuote. ssh joins its words with spaces
// and hands the line to the remote user's login shell, so the quoting
// assumes that shell is a POSIX sh (sh, dash, bash, ksh, zsh); csh and fish
// quote differently.
package hosts
