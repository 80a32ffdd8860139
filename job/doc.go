// Package job is a job and its identity in one place: the job description
// a rank reads on its stdin and its validation, the environment read once
// when the job is read (Env), the PMI-1 bootstrap that builds the same
// description under a process manager (SPEC §17), and the identity maker
// (SPEC §4: the job's CA, each rank's certificate and its signed join
// token) that the launcher, `sperli job make`, PMI and the tests share.
//
// Nothing here opens a rank's connections; the runtime takes a *Job and
// does that.
package job
