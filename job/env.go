package job

import (
	"os"

	"sperli/hosts"
	"sperli/record"
)

// Env is what a rank takes from its process's environment. It is read in
// one place, ReadEnv, when the job is read (Read); the runtime reads no
// variable itself.
type Env struct {
	// Refused is SPERLI_REFUSED_HOSTS: hosts no job may name (SPEC §4.4).
	Refused string
	// Launched is SPERLI_LAUNCHED=1: a launcher started this process and
	// reads its status record (package record), even when its job
	// description could not be read.
	Launched bool
	// SlurmStep says SLURM_STEP_ID is set: the process is a task of a
	// Slurm job step (for the hint of a missing description).
	SlurmStep bool
	// SpinUS is SPERLI_SPIN_US, "" when unset: the spin limit of a
	// rank's reads in microseconds (runtime/spin.go checks it).
	SpinUS string
	// PMI is what the PMI-1 bootstrap reads (pmi.go).
	PMI PMIEnv
}

// Environment is the environment j was read with (Env), or, for a
// description built by hand, this process's now (ReadEnv).
func (j *Job) Environment() Env {
	if j.Env != nil {
		return *j.Env
	}
	return ReadEnv()
}

// ReadEnv reads the environment of this process.
func ReadEnv() Env { return EnvOf(os.Getenv) }

// EnvOf is the environment as get tells it; tests give their own.
func EnvOf(get func(string) string) Env {
	first := func(keys ...string) string {
		for _, k := range keys {
			if v := get(k); v != "" {
				return v
			}
		}
		return ""
	}
	return Env{
		Refused:   get(hosts.EnvRefused),
		Launched:  get(record.LaunchedEnv) == "1",
		SlurmStep: get("SLURM_STEP_ID") != "",
		SpinUS:    get("SPERLI_SPIN_US"),
		PMI: PMIEnv{
			FD: get("PMI_FD"), Rank: first("PMI_RANK", "SLURM_PROCID"), Size: first("PMI_SIZE", "SLURM_NTASKS"),
			ResvPorts: get("SLURM_STEP_RESV_PORTS"), LocalID: get("SLURM_LOCALID"),
			LaunchIP: get("SLURM_LAUNCH_NODE_IPADDR"), Spares: get("SPERLI_SPARES"),
		},
	}
}
