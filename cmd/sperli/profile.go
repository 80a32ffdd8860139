package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
)

// profileRank writes a CPU profile of this rank process, and a heap
// profile when it ends, into the directory SPERLI_PROFILE_DIR names
// (cpu-<pid>.pprof, heap-<pid>.pprof), for `go tool pprof`: a developer's
// aid (pass it to the ranks with -x SPERLI_PROFILE_DIR=DIR). It returns
// what to call when the rank ends; without the variable, nothing.
func profileRank() (stop func()) {
	dir := os.Getenv("SPERLI_PROFILE_DIR")
	if dir == "" {
		return func() {}
	}
	name := func(kind string) string { return filepath.Join(dir, fmt.Sprintf("%s-%d.pprof", kind, os.Getpid())) }
	cpu, err := os.Create(name("cpu"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "sperli rank: SPERLI_PROFILE_DIR: %v\n", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		cpu.Close()
		fmt.Fprintf(os.Stderr, "sperli rank: SPERLI_PROFILE_DIR: %v\n", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		cpu.Close()
		if f, err := os.Create(name("heap")); err == nil {
			pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
		}
	}
}
