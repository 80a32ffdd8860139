// Package launch is the launcher of `sperli run` and `sperli job make`: it
// reads the host list and places the ranks (and spares) on it, makes the
// job's identity (its CA, one certificate and signed join token per rank,
// identity.go), and starts the ranks — local ones by fork and exec with an
// inherited listening socket, remote ones through one ssh session per host
// that runs the host agent (`sperli spawn`, agent.go, mux.go), or from the
// files a Slurm step or a Kubernetes manifest starts. It collects each rank's
// output under its prefix, reads the status record a rank writes last,
// watches losses and generations (in-place recovery, restart from the last
// signed checkpoint, elastic.go), and turns the ranks' ends into the job's
// last line and exit status; `--stats` and `--trace` are reported from
// here. It knows nothing of Starlark beyond a program's file name.
package launch
