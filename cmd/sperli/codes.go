package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"sperli/codes"
)

// advice says, per code, what to do about it (`sperli codes H1611`).
var advice = map[codes.Code]string{
	codes.Code(1601): "The peer's certificate is not of this job: a rank of another job (or a stale description) reached this port, or the host name in the host list is not the name the peer was given. Start every rank from descriptions of one `sperli job make` (or one `sperli run`); use the same host names in the host list as the ranks resolve.",
	codes.Code(1602): "Something that is not a Sperli rank, or a rank of another protocol version, connected. Check that every host runs the same sperli binary (`sperli version`) and that nothing else listens or dials on the ranks' ports.",
	codes.Code(1603): "A join token was not signed by this job's key: descriptions of two jobs are mixed. Make all descriptions in one `sperli job make`.",
	codes.Code(1604): "The join tokens expired: `sperli job make --expires D` gives them a longer life (default 24 h); make the descriptions again.",
	codes.Code(1605): "A rank of another job dialled this one (a stale rank, or two jobs on the same ports). Stop the stale ranks, or give the jobs different ports in their host lists.",
	codes.Code(1606): "A rank presented the token of another rank: two ranks were started from the same rank-i.job, or a description went to the wrong host. Start rank i from rank-i.job.",
	codes.Code(1607): "The token's size, incarnation or host does not match this job: descriptions of different runs are mixed, or a rank runs on another host than its line says.",
	codes.Code(1608): "A message over 16 MiB was sent in one frame: split it into parts of at most 16 MiB (large messages are split for you by send; this is a peer writing by hand).",
	codes.Code(1609): "A peer wrote a frame the protocol does not allow: a bug in a hand-written peer, or versions mixed. Check `sperli version` on every host.",
	codes.Code(1610): "A peer was not reachable within the dial window (30 s): it was never started, listens on another port, or a firewall drops the connection. Start every rank within the window; check the host list's ports and `ssh -p 62222 HOST` by hand.",
	codes.Code(1611): "A peer said nothing for longer than the silence limit, or its connection broke: it crashed, was killed, its host went away, or it computed without calling the runtime while heartbeats could not run. Read the lost rank's own output first. For long computations raise --silence MS (or comm.set_silence); with --checkpoint-dir the launcher restarts the job from its last checkpoint.",
	codes.Code(1612): "Another rank ended the job; this rank did nothing wrong. The launcher's last line names the rank that failed and why (`sperli run -v` shows every rank's H1612 lines). Fix that rank's error.",
	codes.Code(1613): "The ranks called different collectives (or with another root, type or length) at the same point: a rank took another branch of an if, or skipped a call. Make every rank call the same collectives in the same order.",
	codes.Code(1614): "The host list names a refused host (a reserved name such as *.invalid, SPERLI_REFUSED_HOSTS, or --deny-hosts). Fix the line the message names.",
	codes.Code(1615): "The rank got no valid job description on its first line of stdin: start it with `sperli run`, or by hand as `sperli rank p.star < rank-i.job` with a file of `sperli job make`.",
	codes.Code(1616): "An argument is out of its range: a rank outside 0…size-1, a negative or too large tag, a message too big, a bad SPERLI_SPIN_US. The message names the argument and the range.",
	codes.Code(1617): "A call on a communicator that has finished or was aborted, or a receive that can never be matched: from a rank that has finished, or from this rank itself with no send to itself pending. The message names the receive. Call nothing after finish(); check that every receive has a matching send, and send to yourself before you receive from yourself.",
	codes.Code(1618): "A collective was called wrongly (a type or length that does not fit); every rank returns it and the job goes on. Use sperli.attempt to handle it, or fix the call.",
	codes.Code(1619): "There is no complete checkpoint epoch to resume: the first run never completed a checkpoint, or the directory is another one. Check --checkpoint-dir; a fresh start is resume() returning None.",
	codes.Code(1620): "The COMMIT file of the epoch is not signed by this job's key: the checkpoint directory holds another job's files. Use the job's own directory (and `sperli run --job DIR` to resume a job of `sperli job make`).",
	codes.Code(1621): "A rank's checkpoint state is damaged and its buddy's copy too. Restore the files from a backup or start afresh.",
	codes.Code(1622): "A checkpoint file's header names another job, epoch, rank or size than the COMMIT: files of different jobs are mixed in one directory. Give each job its own directory.",
	codes.Code(1623): "The checkpoints were written by a job of another size: resume with the same -n, or start afresh in a new directory.",
	codes.Code(1624): "checkpoint() was called while a start_send/start_recv was open: finish every open operation first.",
	codes.Code(1625): "Writing a checkpoint failed (the disk is full, not writable, or the directory was not given). Check the space and permissions of --checkpoint-dir.",
	codes.Code(1626): "The communicator was revoked by a rank that saw a failure (SPEC §10.3): shrink() it and go on, or end.",
	codes.Code(1627): "A joined peer broke the protocol (credit, sizes, records or files that contradict it): a bug or a hostile peer. The offending connection was ended; check that peer's program and binary.",
	codes.Code(1628): "Two slots of the job run different programs, arguments or loss policies (--spares, --silence, --checkpoint-dir): the line names the slot and both digests. Give every host the same program file or binary and the same arguments; a job that mixes programs by design is made with sperli job make or srun --multi-prog.",
}

// exitOf says which exit status a rank ending with the code has.
func exitOf(c codes.Code) string {
	switch c {
	case codes.PeerLost:
		return "75 (the job lost a rank)"
	case codes.JobEnded:
		return "75 when the cause is a loss, else 1"
	}
	return "1"
}

func newCodes() *cobra.Command {
	return &cobra.Command{
		Use:   "codes [CODE]",
		Short: "Print the table of refusal codes, or one code with what to do about it",
		Example: `  sperli codes          # the table
  sperli codes H1611    # one code: meaning, what to do, exit status
  sperli codes 1612`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				c, ok := codes.Parse(strings.ToUpper(args[0]))
				if !ok {
					c, ok = codes.Parse("H" + args[0])
				}
				if !ok || !c.Valid() {
					all := codes.All()
					return usageErr(cmd, "codes %s: no such code (%s … %s)", args[0], all[0], all[len(all)-1])
				}
				return showCode(os.Stdout, c)
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 8, 2, ' ', 0)
			fmt.Fprintln(w, "code\tmeaning")
			for _, c := range codes.All() {
				fmt.Fprintf(w, "%s\t%s\n", c, c.Meaning())
			}
			return w.Flush()
		},
	}
}

// showCode prints one code: its meaning, what to do, the exit status.
func showCode(w io.Writer, c codes.Code) error {
	fmt.Fprintf(w, "%s  %s\n\n", c, c.Meaning())
	if a := advice[c]; a != "" {
		fmt.Fprintf(w, "What to do: %s\n\n", wrap(a, 76))
	}
	fmt.Fprintf(w, "Exit status of a rank that ends with it: %s.\nMore: docs/errors.md and docs/troubleshooting.md.\n", exitOf(c))
	return nil
}

// wrap breaks s into lines of at most width columns.
func wrap(s string, width int) string {
	var b strings.Builder
	col := len("What to do: ")
	for i, word := range strings.Fields(s) {
		if i > 0 {
			if col+1+len(word) > width {
				b.WriteByte('\n')
				col = 0
			} else {
				b.WriteByte(' ')
				col++
			}
		}
		b.WriteString(word)
		col += len(word)
	}
	return b.String()
}
