package launch

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"sperli/hosts"
	"sperli/runtime"
)

// MakeOptions are the flags of `sperli job make`.
type MakeOptions struct {
	N             int
	HostsFile     string
	DenyFile      string
	CheckpointDir string
	SilenceMS     int
	Expires       time.Duration // token lifetime; 0 is 24 hours
	Out           string
}

// DefaultExpires is the token lifetime of `sperli job make` without --expires.
const DefaultExpires = 24 * time.Hour

// MakeJob writes one job description per rank, OUT/rank-<i>.job, mode
// 0600, for ranks started by hand or by another launcher. Every rank
// listens at the port of its line, else at 47000 + rank. Nothing secret is
// printed; the files are secrets.
func MakeJob(o MakeOptions) ([]string, error) {
	if o.Out == "" {
		return nil, usage("job make: --out DIR is required")
	}
	if o.Expires < 0 {
		return nil, usage("job make: --expires %v: want a positive duration", o.Expires)
	}
	if o.SilenceMS != 0 && (o.SilenceMS < runtime.MinSilenceMS || o.SilenceMS > runtime.MaxSilenceMS) {
		return nil, usage("job make: --silence %d: want %d to %d ms", o.SilenceMS, runtime.MinSilenceMS, runtime.MaxSilenceMS)
	}
	pl, err := Place(o.N, o.HostsFile, o.DenyFile)
	if err != nil {
		return nil, err
	}
	id, err := NewIdentity()
	if err != nil {
		return nil, err
	}
	exp := o.Expires
	if exp == 0 {
		exp = DefaultExpires
	}
	table := make([]runtime.Host, o.N)
	for r := range table {
		table[r] = runtime.Host{Host: pl.Lines[r].Host, Port: hosts.RankPort(pl.Lines[r], r)}
	}
	spec := Spec{Size: o.N, Hosts: table, SilenceMS: o.SilenceMS, CheckpointDir: o.CheckpointDir, Expires: time.Now().Add(exp)}
	if err := os.MkdirAll(o.Out, 0o700); err != nil {
		return nil, err
	}
	var files []string
	for r := 0; r < o.N; r++ {
		j, err := id.Describe(spec, r)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(o.Out, fmt.Sprintf("rank-%d.job", r))
		if err := writeSecret(path, append(j.Encode(), '\n')); err != nil {
			return nil, err
		}
		files = append(files, path)
	}
	return files, nil
}

// writeSecret writes a file of mode 0600 by a temporary name and a rename.
func writeSecret(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}
