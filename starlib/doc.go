// Package starlib runs rank programs written in Starlark: it compiles a
// program and the modules it loads (with a cache of compiled modules),
// gives it the predeclared `comm` (the job's communicator: point-to-point,
// collectives, checkpoints, the ULFM calls), `sperli` (its arguments,
// attempt, files, the environment, the clock, format) and `array`
// (packing numbers into the bytes collectives reduce), and calls its main.
// Every Starlark value crosses into runtime checked, and every runtime
// error comes back as a Starlark error that names its code. It knows
// nothing of processes: the binary starts it in a rank.
package starlib
