package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// commandPaths walks the command tree below c, hidden commands and the
// completion and help commands included, and returns every command's
// words after "sperli".
func commandPaths(c *cobra.Command, prefix []string) [][]string {
	var out [][]string
	for _, sub := range c.Commands() {
		path := append(append([]string(nil), prefix...), sub.Name())
		out = append(out, path)
		out = append(out, commandPaths(sub, path)...)
	}
	return out
}

// TestEveryHelpHasExamples: `--help` of every command in the tree shows
// examples. The hidden ranks of `sperli bench` take their arguments raw
// (no flags, no help: they are started by bench only) and are the one
// exception; the walk fails if there is a new one.
func TestEveryHelpHasExamples(t *testing.T) {
	paths := append([][]string{{}}, commandPaths(newRoot(), nil)...)
	seen := map[string]bool{}
	for _, path := range paths {
		name := strings.Join(append([]string{"sperli"}, path...), " ")
		seen[name] = true
		cmd, _, err := newRoot().Find(path)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if cmd.DisableFlagParsing {
			if name != "sperli bench-rank" && name != "sperli bench-tls" {
				t.Errorf("%s takes no flags, so no --help: only bench's ranks may", name)
			}
			continue
		}
		root := newRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(append(path, "--help"))
		if err := root.Execute(); err != nil {
			t.Errorf("%s --help: %v", name, err)
		}
		if !strings.Contains(out.String(), "\nExamples:\n  ") {
			t.Errorf("%s --help shows no examples:\n%s", name, out.String())
		}
	}
	// The walk reached the commands users type.
	for _, want := range []string{"sperli run", "sperli job make", "sperli completion bash", "sperli completion fish", "sperli help", "sperli man", "sperli codes"} {
		if !seen[want] {
			t.Errorf("the walk of the command tree did not reach %q", want)
		}
	}
}
