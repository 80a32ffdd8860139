package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"sperli/launch"
)

// newSpawn is the host agent, which `sperli run` starts once per remote
// host over ssh (SPEC §18, docs/protocol.md §9.5): it starts that host's
// ranks and carries their standard streams and ends over its own standard
// input and output, framed. Hidden: nobody types it.
func newSpawn() *cobra.Command {
	return &cobra.Command{
		Use:    "spawn",
		Short:  "The host agent of sperli run: starts this host's ranks, framed on stdin and stdout",
		Hidden: true,
		Example: `  ssh -p 62222 -o BatchMode=yes node2 /opt/sperli/sperli spawn   # as sperli run starts it
  sperli spawn < /dev/null                                        # ends at once: no launcher`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// A launcher that is gone is a failed write, not a SIGPIPE
			// that would end the agent before it kills its ranks. (A
			// handler, unlike an ignored signal, is not inherited.)
			signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
			if code := launch.Agent(os.Stdin, os.Stdout, os.Stderr); code != 0 {
				return &exitError{code}
			}
			return nil
		},
	}
}
