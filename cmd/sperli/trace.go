package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"sperli/tracesvg"
)

// newTrace is `sperli trace FILE`: a --trace file drawn as an SVG
// timeline.
func newTrace() *cobra.Command {
	var o tracesvg.Options
	var out string
	cmd := &cobra.Command{
		Use:   "trace FILE",
		Short: "Draw a timeline written by sperli run --trace as SVG",
		Long: `Draw a timeline written by "sperli run --trace FILE" as an SVG picture:
one row per process and thread, a box per call (the waits inside a call
under it), the launcher's lines (a loss, a generation) as numbered lines
across every row and their text below. The file itself opens in Perfetto,
chrome://tracing and speedscope.`,
		Example: `  sperli run -n 3 --trace run.json prog.star
  sperli trace run.json -o run.svg
  sperli trace run.json --from 120 --to 180 -o zoom.svg`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.From < 0 || o.To < 0 || o.To > 0 && o.To <= o.From {
				return usageErr(cmd, "--from %v --to %v: want 0 ≤ from < to (ms since the launch)", o.From, o.To)
			}
			if o.Width != 0 && (o.Width < 200 || o.Width > 20000) {
				return usageErr(cmd, "--width %d: want 200 to 20000 pixels", o.Width)
			}
			f, err := os.Open(args[0])
			if err != nil {
				return usageErr(cmd, "trace: %v", err)
			}
			defer f.Close()
			evs, err := tracesvg.Read(f)
			if err != nil {
				return usageErr(cmd, "trace %s: %v", args[0], err)
			}
			if o.Title == "" {
				o.Title = filepath.Base(args[0])
			}
			var b bytes.Buffer
			if err := tracesvg.Render(&b, evs, o); err != nil {
				return usageErr(cmd, "trace %s: %v", args[0], err)
			}
			if out == "" || out == "-" {
				_, err = os.Stdout.Write(b.Bytes())
				return err
			}
			if err := os.WriteFile(out, b.Bytes(), 0o644); err != nil {
				fmt.Fprintf(os.Stderr, "sperli: -o %s: %v\n", out, err)
				return &exitError{1}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&out, "output", "o", "", "the SVG file (default: standard output)")
	f.Float64Var(&o.From, "from", 0, "draw from this many ms after the launch")
	f.Float64Var(&o.To, "to", 0, "draw up to this many ms after the launch (default: the end)")
	f.IntVar(&o.Width, "width", 0, "the plot's width in pixels (default 1100)")
	f.StringVar(&o.Title, "title", "", "the picture's title (default: the file's name)")
	return cmd
}
