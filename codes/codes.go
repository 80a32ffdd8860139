// Package codes holds Sperli's stable refusal codes (SPEC §13) and the one
// error type that carries them. It is the leaf package that wire, pki,
// runtime, starlib and the launcher all import; it imports nothing of Sperli.
//
// The numbers are part of the protocol and of every script that checks them:
// never renumber, only append.
package codes

import (
	"errors"
	"fmt"
	"strings"
)

// Code is a refusal code. Its text form is "H" followed by the number.
type Code uint16

// The codes of SPEC §13.
const (
	CertRefused        Code = 1601 // peer certificate refused
	HelloMalformed     Code = 1602 // hello missing or malformed
	TokenSignature     Code = 1603 // token signature does not verify
	TokenExpired       Code = 1604 // token expired
	TokenJob           Code = 1605 // token of another job
	TokenRank          Code = 1606 // token of another rank
	TokenMismatch      Code = 1607 // token's size, incarnation or host does not match
	FrameTooLarge      Code = 1608 // frame payload over 16 MiB
	FrameMalformed     Code = 1609 // frame header malformed, or from the wrong source
	Unreachable        Code = 1610 // peer not reachable within the dial window
	PeerLost           Code = 1611 // peer lost
	JobEnded           Code = 1612 // job ended by another rank
	CollectiveMismatch Code = 1613 // collective does not match across ranks
	HostRefused        Code = 1614 // host refused
	JobMalformed       Code = 1615 // job description missing or malformed
	OutOfRange         Code = 1616 // argument outside its range
	Finished           Code = 1617 // call on a finished or aborted communicator
	WrongCollective    Code = 1618 // wrong collective call (the job goes on)
	NoEpoch            Code = 1619 // no usable checkpoint epoch
	CommitSignature    Code = 1620 // COMMIT signature does not verify
	CheckpointDamaged  Code = 1621 // checkpoint state damaged and no good buddy copy
	CheckpointHeader   Code = 1622 // checkpoint header does not match
	ResumeSize         Code = 1623 // resume with another job size
	CheckpointOpen     Code = 1624 // checkpoint while a send or receive is open
	CheckpointStorage  Code = 1625 // checkpoint storage failed
	Revoked            Code = 1626 // communicator revoked (SPEC §10.3)
	ProtocolViolation  Code = 1627 // protocol violation by a joined peer
	ProgramMismatch    Code = 1628 // slots run different programs, arguments or loss policies
)

var meanings = map[Code]string{
	CertRefused:        "peer certificate refused: none, another CA, wrong name or address, not TLS 1.3",
	HelloMalformed:     "hello missing or malformed",
	TokenSignature:     "token signature does not verify",
	TokenExpired:       "token expired",
	TokenJob:           "token of another job",
	TokenRank:          "token of another rank",
	TokenMismatch:      "token's size, incarnation or host does not match",
	FrameTooLarge:      "frame payload over 16 MiB",
	FrameMalformed:     "frame header malformed, or from the wrong source",
	Unreachable:        "peer not reachable within the dial window (30 s)",
	PeerLost:           "peer lost: silence limit passed, or connection broke without bye",
	JobEnded:           "job ended by another rank (its abort, loss or error)",
	CollectiveMismatch: "collective does not match across ranks",
	HostRefused:        "host refused (refused, reserved or denied name)",
	JobMalformed:       "job description missing or malformed",
	OutOfRange:         "argument outside its range (rank, tag, size of a message)",
	Finished:           "call on a communicator that is finished or aborted",
	WrongCollective:    "wrong collective call (every rank returns it; the job goes on)",
	NoEpoch:            "no usable checkpoint epoch",
	CommitSignature:    "COMMIT signature does not verify",
	CheckpointDamaged:  "checkpoint state damaged and no good buddy copy",
	CheckpointHeader:   "checkpoint header does not match the COMMIT or the job",
	ResumeSize:         "resume with another job size",
	CheckpointOpen:     "checkpoint while a send or receive is open",
	CheckpointStorage:  "checkpoint storage failed (write, sync, rename, space)",
	Revoked:            "communicator revoked",
	ProtocolViolation:  "protocol violation by a joined peer (credit, sizes, records or files that contradict the protocol)",
	ProgramMismatch:    "slots run different programs, arguments or loss policies",
}

// All returns every code in ascending order.
func All() []Code {
	out := make([]Code, 0, len(meanings))
	for c := CertRefused; c <= ProgramMismatch; c++ {
		out = append(out, c)
	}
	return out
}

// String returns the code's text form, for example "H1611".
func (c Code) String() string { return fmt.Sprintf("H%d", uint16(c)) }

// Meaning returns the one-line meaning of the code from SPEC §13, or "" for
// a number that is not a code.
func (c Code) Meaning() string { return meanings[c] }

// Valid reports whether c is one of the codes of SPEC §13.
func (c Code) Valid() bool { _, ok := meanings[c]; return ok }

// Parse reads a code's text form ("H1611"). It returns false for anything else.
func Parse(s string) (Code, bool) {
	var n uint16
	if len(s) != 5 || s[0] != 'H' {
		return 0, false
	}
	if _, err := fmt.Sscanf(s[1:], "%d", &n); err != nil {
		return 0, false
	}
	c := Code(n)
	return c, c.Valid()
}

// CauseKind says why a job ended, carried by every abort and H1612.
type CauseKind uint8

// Cause kinds. The numbers travel in abort frames: append only.
const (
	CauseNone     CauseKind = 0
	CauseLost     CauseKind = 1 // a rank was lost (silence, broken connection, killed)
	CauseFailed   CauseKind = 2 // a rank's program or runtime failed
	CauseAborted  CauseKind = 3 // a rank called abort()
	CauseLauncher CauseKind = 4 // the launcher went away or ended the job
)

func (k CauseKind) String() string {
	switch k {
	case CauseLost:
		return "lost"
	case CauseFailed:
		return "failed"
	case CauseAborted:
		return "aborted"
	case CauseLauncher:
		return "launcher"
	}
	return "none"
}

// Cause tells which rank ended the job and how. Rank is -1 when no rank is
// to blame (the launcher).
type Cause struct {
	Kind CauseKind
	Rank int
	Code Code // the code that rank saw or gave (H1611 for a loss, H1613, ...)
}

// Error is the one error type of Sperli. Its message starts with the code:
// "H1606: token is for rank 2, want rank 1".
type Error struct {
	Code  Code
	Op    string // the call that failed ("recv", "join", "reduce"), or ""
	Rank  int    // the peer rank concerned, or -1
	Msg   string // lower case, says what was got and what was wanted
	Cause *Cause // for H1612 and H1611: who ended the job and how; may be nil
	Err   error  // wrapped cause, or nil
}

// New returns an *Error with the code and a formatted message. Rank is -1.
func New(c Code, format string, args ...any) *Error {
	return &Error{Code: c, Rank: -1, Msg: fmt.Sprintf(format, args...)}
}

// Wrap is New with a wrapped cause.
func Wrap(c Code, err error, format string, args ...any) *Error {
	e := New(c, format, args...)
	e.Err = err
	return e
}

// Violation is the H1627 error of a peer (rank or slot from) that broke
// the protocol; the message says how.
func Violation(from int, format string, args ...any) *Error {
	return &Error{Code: ProtocolViolation, Rank: from, Msg: fmt.Sprintf("protocol violation by rank %d: ", from) + fmt.Sprintf(format, args...)}
}

// Lost is the H1611 of op ("" for the job's end rather than one call)
// because rank was lost; the message is formatted as by New. Its Cause
// blames rank for the loss (CauseLost, code H1611), so that the ranks told
// of it name the same rank; rank is -1 where no rank number is known (a
// slot that learns it is the lost one).
func Lost(op string, rank int, format string, args ...any) *Error {
	e := LostNoCause(op, rank, format, args...)
	e.Cause = &Cause{Kind: CauseLost, Rank: rank, Code: PeerLost}
	return e
}

// LostNoCause is Lost without a Cause: the H1611 of a loss that ends no
// job for the other ranks to be told of (a join cut short, or a rank that
// is told it is the lost one).
func LostNoCause(op string, rank int, format string, args ...any) *Error {
	return &Error{Code: PeerLost, Op: op, Rank: rank, Msg: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string {
	if e.Msg == "" {
		return e.Code.String() + ": " + e.Code.Meaning()
	}
	return e.Code.String() + ": " + e.Msg
}

// Unwrap returns the wrapped cause.
func (e *Error) Unwrap() error { return e.Err }

// Is makes errors.Is(err, &Error{Code: c}) match any error of code c.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && t.Msg == "" && t.Op == ""
}

// Of returns the code of the first *Error in err's chain, or 0.
func Of(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// As returns the first *Error in err's chain, or nil.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// Message is what err says without its code: the Msg of the *Error it
// wraps, else its text (for quoting one error inside another).
func Message(err error) string {
	if e := As(err); e != nil && e.Msg != "" {
		return e.Msg
	}
	return err.Error()
}

// OneLine returns the line of a (possibly multi-line) error text that says
// most: the first that starts with a code, else the last non-empty one.
func OneLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for _, l := range lines {
		if _, ok := Parse(strings.SplitN(l, ":", 2)[0]); ok {
			return l
		}
	}
	return strings.TrimSpace(lines[len(lines)-1])
}
