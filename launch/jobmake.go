package launch

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"sperli/hosts"
	"sperli/job"
)

// MakeOptions are the flags of `sperli job make`.
type MakeOptions struct {
	N             int
	HostsFile     string
	MapBy         string // --map-by: "slot" ("" too) or "node"
	DenyFile      string
	CheckpointDir string
	SilenceMS     int
	Expires       time.Duration // token lifetime; 0 is 24 hours
	Out           string
	Spares        int // spare slots N … N+S-1 (SPEC §10): rank-N.job … are the spares'
}

// DefaultExpires is the token lifetime of `sperli job make` without --expires.
const DefaultExpires = 24 * time.Hour

// MakeJob writes one job description per rank, OUT/rank-<i>.job, mode
// 0600, for ranks started by hand or by another launcher. Every rank
// listens at the port of its line, else at hosts.BasePort + rank (below
// Linux's ephemeral range, docs/hosts.md). Nothing secret is printed; the
// files are secrets, written as writeSecrets says.
func MakeJob(o MakeOptions) ([]string, error) {
	if o.Out == "" {
		return nil, usage("job make: --out DIR is required")
	}
	if o.Expires < 0 {
		return nil, usage("job make: --expires %v: want a positive duration", o.Expires)
	}
	if o.SilenceMS != 0 && (o.SilenceMS < job.MinSilenceMS || o.SilenceMS > job.MaxSilenceMS) {
		return nil, usage("job make: --silence %d: want %d to %d ms", o.SilenceMS, job.MinSilenceMS, job.MaxSilenceMS)
	}
	if err := checkSize("job make: ", o.N, o.Spares); err != nil {
		return nil, err
	}
	byNode, err := checkMapBy(o.MapBy)
	if err != nil {
		return nil, err
	}
	slots := o.N + o.Spares
	pl, err := Place(slots, o.HostsFile, o.DenyFile, byNode)
	if err == nil {
		err = checkDefaultPorts(o.HostsFile, pl.Lines, slots, true)
	}
	if err != nil {
		return nil, err
	}
	id, err := job.NewIdentity()
	if err != nil {
		return nil, err
	}
	exp := o.Expires
	if exp == 0 {
		exp = DefaultExpires
	}
	table := make([]job.Host, slots)
	for r := range table {
		table[r] = job.Host{Host: pl.Lines[r].Host, Port: hosts.RankPort(pl.Lines[r], r)}
	}
	spec := job.Spec{Size: o.N, Spares: o.Spares, Hosts: table, SilenceMS: o.SilenceMS, CheckpointDir: o.CheckpointDir, Expires: time.Now().Add(exp)}.Compacted()
	files := make([]secretFile, slots)
	for r := 0; r < slots; r++ {
		j, err := id.Describe(spec, r)
		if err != nil {
			return nil, err
		}
		files[r] = secretFile{fmt.Sprintf("rank-%d.job", r), append(j.Encode(), '\n')}
	}
	return writeSecrets(o.Out, files)
}

// secretFile is one file of writeSecrets: a name in the output directory
// and its contents.
type secretFile struct {
	name string
	data []byte
}

// writeSecrets writes files into dir (made 0700 if missing), each mode
// 0600, and returns their paths. Nothing is written through a name that
// someone else may have planted in dir: the files are made in a fresh
// private directory inside dir (mkdir fails on any name that exists; mode
// 0700), each with O_CREATE|O_EXCL|O_NOFOLLOW, synced, and then renamed
// into place. A rename replaces a name and never writes through it, so a
// symlink planted at dir/rank-0.job is replaced by the description and
// its target receives nothing. The private directory is removed, also on
// failure.
func writeSecrets(dir string, files []secretFile) (paths []string, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	priv, err := os.MkdirTemp(dir, ".sperli-job-")
	if err != nil {
		return nil, fmt.Errorf("job make: a private directory in %s: %w", dir, err)
	}
	defer os.RemoveAll(priv)
	for _, f := range files {
		if f.name == "" || f.name != filepath.Base(f.name) || f.name[0] == '.' {
			return nil, fmt.Errorf("job make: %q is not a plain file name", f.name) // a bug of the caller
		}
		if err := writeExcl(filepath.Join(priv, f.name), f.data); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		path := filepath.Join(dir, f.name)
		if err := os.Rename(filepath.Join(priv, f.name), path); err != nil {
			return nil, fmt.Errorf("job make: %w", err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// writeExcl creates path, which must not exist and is not followed if it
// is a symlink, with mode 0600 and writes b to it.
func writeExcl(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("job make: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("job make: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("job make: %w", err)
	}
	return f.Close()
}
