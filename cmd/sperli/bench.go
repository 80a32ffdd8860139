package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"sperli/bench"
	"sperli/launch"
)

func newBench() *cobra.Command {
	var o bench.Options
	var sizes, plot string
	var asJSON bool
	cmd := &cobra.Command{
		Use: "bench [--pings P] [--messages M] [--repeat R] [--sizes LIST] [--pin] [--json] [--plot FILE.svg]",
		Example: `  sperli bench                      # every figure, against a bare TLS pair
  sperli bench --sizes 64,65536 --repeat 5 --json
  sperli bench --pin --plot bench.svg`,
		Short: "Measure round trips, rates, allreduce, join and start-up against a bare TLS pair",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, f := range []struct {
				name string
				v    int
			}{{"pings", o.Pings}, {"messages", o.Messages}, {"repeat", o.Repeat}} {
				if f.v < 1 || f.v > 10_000_000 {
					return usageErr(cmd, "bench: --%s %d: want a count from 1 to 10000000", f.name, f.v)
				}
			}
			if sizes != "" {
				for _, f := range strings.Split(sizes, ",") {
					n, err := parseSize(f)
					if err != nil {
						return usageErr(cmd, "bench: --sizes %q: %v", f, err)
					}
					o.Sizes = append(o.Sizes, n)
				}
			}
			self, err := os.Executable()
			if err != nil {
				return err
			}
			o.Self = self
			o.Log = os.Stderr
			rep, err := bench.Run(o)
			if err != nil {
				fmt.Fprintf(os.Stderr, "sperli: bench: %v\n", err)
				return &exitError{1}
			}
			if plot != "" {
				if err := os.WriteFile(plot, bench.Plot(rep), 0o644); err != nil {
					return err
				}
			}
			if asJSON {
				b, _ := json.MarshalIndent(rep, "", "  ")
				fmt.Println(string(b))
				return nil
			}
			fmt.Print(bench.Table(rep, launch.UseColor(os.Stdout)))
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Pings, "pings", 1000, "round trips of the 64-byte measurement")
	f.IntVar(&o.Messages, "messages", 32, "messages of the 1 MiB rate measurement")
	f.BoolVar(&o.Pin, "pin", false, "pin rank i of every job to core i mod the number of cores (taskset), as mpirun --bind-to core")
	f.IntVar(&o.Repeat, "repeat", 5, "runs of each pair's measurements, interleaved (the median is shown)")
	f.StringVar(&sizes, "sizes", "", "message sizes of the sweep, e.g. 64,1K,1M,16M (default 64 B to 16 MiB)")
	f.BoolVar(&asJSON, "json", false, "print one JSON object")
	f.StringVar(&plot, "plot", "", "write an SVG plot of round trip and rate against size")
	return cmd
}

func parseSize(s string) (int, error) {
	s = strings.TrimSpace(strings.ToUpper(s))
	mult := 1
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, s[:len(s)-1]
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, s[:len(s)-1]
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n*mult > 16<<20 {
		return 0, fmt.Errorf("want a size from 1 to 16M")
	}
	return n * mult, nil
}

// The ranks `sperli bench` starts: hidden commands of the same binary.
func newBenchRanks() []*cobra.Command {
	return []*cobra.Command{
		{Use: "bench-rank", Hidden: true, DisableFlagParsing: true, RunE: func(cmd *cobra.Command, args []string) error {
			rankGC()
			if code := bench.GoRank(args); code != 0 {
				return &exitError{code}
			}
			return nil
		}},
		{Use: "bench-tls", Hidden: true, DisableFlagParsing: true, RunE: func(cmd *cobra.Command, args []string) error {
			rankGC()
			if code := bench.TLSRank(args); code != 0 {
				return &exitError{code}
			}
			return nil
		}},
	}
}
