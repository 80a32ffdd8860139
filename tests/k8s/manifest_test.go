// Package k8s checks `sperli job make --kubernetes` (SPEC §17) against the
// Kubernetes API types. It is a module of its own, so that k8s.io/api stays
// out of the main module's dependencies; `make test` runs it.
package k8s

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite testdata/job.yaml.golden")

var sperli string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "sperli-k8s-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sperli = filepath.Join(dir, "sperli")
	cmd := exec.Command("go", "build", "-o", sperli, "./cmd/sperli")
	cmd.Dir = filepath.Join("..", "..") // the main module
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building sperli: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	code           int
	stdout, stderr string
}

func run(t *testing.T, args ...string) result { t.Helper(); return runEnv(t, "", args...) }

// runEnv runs sperli with SPERLI_REFUSED_HOSTS=refused.
func runEnv(t *testing.T, refused string, args ...string) result {
	t.Helper()
	cmd := exec.Command(sperli, args...)
	cmd.Env = append(os.Environ(), "SPERLI_REFUSED_HOSTS="+refused)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

// manifest is the decoded job.yaml.
type manifest struct {
	raw     string
	service corev1.Service
	secret  corev1.Secret
	job     batchv1.Job
}

// decode splits job.yaml into its three documents and decodes each
// strictly (an unknown or repeated field is an error) into its API type.
func decode(t *testing.T, raw string) *manifest {
	t.Helper()
	docs := strings.Split(raw, "\n---\n")
	if len(docs) != 3 {
		t.Fatalf("job.yaml has %d documents, want 3 (Service, Secret, Job)", len(docs))
	}
	m := &manifest{raw: raw}
	for i, into := range []any{&m.service, &m.secret, &m.job} {
		if err := yaml.UnmarshalStrict([]byte(docs[i]), into); err != nil {
			t.Fatalf("document %d does not decode strictly into %T: %v", i+1, into, err)
		}
	}
	for _, tm := range []struct{ got, want string }{
		{m.service.APIVersion + " " + m.service.Kind, "v1 Service"},
		{m.secret.APIVersion + " " + m.secret.Kind, "v1 Secret"},
		{m.job.APIVersion + " " + m.job.Kind, "batch/v1 Job"},
	} {
		if tm.got != tm.want {
			t.Errorf("a document is %q, want %q", tm.got, tm.want)
		}
	}
	return m
}

// description is the part of a rank's job description this test reads.
type description struct {
	Rank   int    `json:"rank"`
	Size   int    `json:"size"`
	Spares int    `json:"spares"`
	ID     string `json:"job"`
	Hosts  []struct {
		Host string `json:"host"`
		Port int    `json:"port"`
	} `json:"hosts"`
	JobSecret []byte `json:"jobsecret"`
}

// checkRules checks the rules an Indexed Job of n ranks named name must
// keep to run as SPEC §17 says.
func checkRules(t *testing.T, m *manifest, name string, n int) { checkSlots(t, m, name, n, 0) }

// checkSlots is checkRules for a job of n ranks and spares spares: n+spares
// pods, the spares' descriptions holding the job secret too.
func checkSlots(t *testing.T, m *manifest, name string, ranks, spares int) {
	t.Helper()
	n := ranks + spares
	svc, sec, job := m.service, m.secret, m.job
	spec := job.Spec
	pod := spec.Template.Spec
	// Names: the Service is the pods' subdomain; pod i is NAME-i.
	for _, e := range validation.IsDNS1035Label(svc.Name) {
		t.Errorf("Service name %q: %s", svc.Name, e)
	}
	for _, e := range validation.IsDNS1123Subdomain(job.Name) {
		t.Errorf("Job name %q: %s", job.Name, e)
	}
	if svc.Name != name || job.Name != name || pod.Subdomain != name {
		t.Errorf("Service %q, Job %q, subdomain %q: want all %q", svc.Name, job.Name, pod.Subdomain, name)
	}
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("Service clusterIP %q, want None (headless: DNS names for the pods)", svc.Spec.ClusterIP)
	}
	if !svc.Spec.PublishNotReadyAddresses {
		t.Errorf("Service does not publish not-ready addresses: ranks could not resolve each other while they start")
	}
	if got := svc.Spec.Selector[batchv1.JobNameLabel]; got != name || len(svc.Spec.Selector) != 1 {
		t.Errorf("Service selector %v, want {%s: %s} (the label the Job controller puts on its pods)", svc.Spec.Selector, batchv1.JobNameLabel, name)
	}
	// The Indexed Job.
	if spec.CompletionMode == nil || *spec.CompletionMode != batchv1.IndexedCompletion {
		t.Errorf("completionMode %v, want Indexed", spec.CompletionMode)
	}
	if spec.Completions == nil || spec.Parallelism == nil || int(*spec.Completions) != n || int(*spec.Parallelism) != n {
		t.Errorf("completions %v parallelism %v, want both %d (every rank at once)", spec.Completions, spec.Parallelism, n)
	}
	if spares == 0 {
		if spec.BackoffLimit == nil || *spec.BackoffLimit != 0 || spec.BackoffLimitPerIndex != nil || spec.SuccessPolicy != nil {
			t.Errorf("backoffLimit %v, per index %v, success policy %v: want 0, none and none: a rank that failed is not started again with the same token, and fails the Job", spec.BackoffLimit, spec.BackoffLimitPerIndex, spec.SuccessPolicy)
		}
	} else {
		// A lost pod is a loss the job recovers from: its index is not
		// run again, the Job lives on while at most S indexes failed, and
		// succeeds once the N ranks did.
		if spec.BackoffLimit != nil || spec.BackoffLimitPerIndex == nil || *spec.BackoffLimitPerIndex != 0 {
			t.Errorf("backoffLimit %v, backoffLimitPerIndex %v: want none and 0 (an index runs once; a failed pod does not fail the Job)", spec.BackoffLimit, spec.BackoffLimitPerIndex)
		}
		if spec.MaxFailedIndexes == nil || int(*spec.MaxFailedIndexes) != spares {
			t.Errorf("maxFailedIndexes %v, want %d (the spares)", spec.MaxFailedIndexes, spares)
		}
		if p := spec.SuccessPolicy; p == nil || len(p.Rules) != 1 || p.Rules[0].SucceededIndexes != nil || p.Rules[0].SucceededCount == nil || int(*p.Rules[0].SucceededCount) != ranks {
			t.Errorf("successPolicy %+v, want one rule: succeededCount %d (the ranks)", p, ranks)
		}
	}
	if pod.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy %q, want Never", pod.RestartPolicy)
	}
	for i := 0; i < n; i++ {
		if host := fmt.Sprintf("%s-%d", name, i); len(validation.IsDNS1123Label(host)) != 0 {
			t.Errorf("pod %d's host name %q is not a DNS label", i, host)
		}
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if len(c.Ports) != 1 {
		t.Fatalf("container ports %v, want one", c.Ports)
	}
	port := int(c.Ports[0].ContainerPort)
	if len(c.VolumeMounts) != 1 || len(pod.Volumes) != 1 || pod.Volumes[0].Secret == nil ||
		c.VolumeMounts[0].Name != pod.Volumes[0].Name || !c.VolumeMounts[0].ReadOnly {
		t.Fatalf("volumes %+v, mounts %+v: want the Secret mounted read-only", pod.Volumes, c.VolumeMounts)
	}
	vs := pod.Volumes[0].Secret
	if vs.SecretName != sec.Name {
		t.Errorf("the volume mounts Secret %q, the manifest's is %q", vs.SecretName, sec.Name)
	}
	if vs.DefaultMode == nil || *vs.DefaultMode != 0o400 {
		t.Errorf("the descriptions' mode %v, want 0400", vs.DefaultMode)
	}
	mount := c.VolumeMounts[0].MountPath
	want := "< " + mount + "/rank-$JOB_COMPLETION_INDEX.job"
	if len(c.Command) != 3 || c.Command[0] != "/bin/sh" || c.Command[1] != "-c" || !strings.HasSuffix(c.Command[2], want) {
		t.Errorf("command %q, want /bin/sh -c '… %s'", c.Command, want)
	}
	// The Secret: one description per pod index, for its DNS name.
	if sec.Type != corev1.SecretTypeOpaque || len(sec.Data) != n {
		t.Fatalf("Secret of type %q with %d keys, want Opaque with %d", sec.Type, len(sec.Data), n)
	}
	var id string
	for i := 0; i < n; i++ {
		b, ok := sec.Data[fmt.Sprintf("rank-%d.job", i)]
		if !ok {
			t.Errorf("the Secret has no rank-%d.job", i)
			continue
		}
		var d description
		if err := json.Unmarshal(bytes.TrimSpace(b), &d); err != nil {
			t.Errorf("rank-%d.job: %v", i, err)
			continue
		}
		if i == 0 {
			id = d.ID
		}
		if d.Rank != i || d.Size != ranks || d.Spares != spares || d.ID != id || len(d.Hosts) != n {
			t.Errorf("rank-%d.job: rank %d size %d spares %d job %s, %d hosts; want rank %d size %d spares %d job %s", i, d.Rank, d.Size, d.Spares, d.ID, len(d.Hosts), i, ranks, spares, id)
			continue
		}
		if (len(d.JobSecret) != 0) != (i == 0 || i >= ranks) {
			t.Errorf("rank-%d.job holds a job secret of %d bytes", i, len(d.JobSecret))
		}
		for r, h := range d.Hosts {
			if wantHost := fmt.Sprintf("%s-%d.%s", name, r, name); h.Host != wantHost || h.Port != port {
				t.Errorf("rank-%d.job: host %d is %s:%d, want %s:%d (pod %d's DNS name, the container port)", i, r, h.Host, h.Port, wantHost, port, r)
			}
		}
	}
	for _, labels := range []map[string]string{svc.Labels, sec.Labels, job.Labels, spec.Template.Labels} {
		if labels["sperli-job"] != id {
			t.Errorf("labels %v, want sperli-job: %s", labels, id)
		}
	}
}

var (
	hexID  = regexp.MustCompile(`[0-9a-f]{32}`)
	b64Val = regexp.MustCompile(`("rank-(\d+)\.job"): "[A-Za-z0-9+/=]+"`)
)

// normalise replaces what differs between runs: the job id and the
// descriptions (keys, certificates, tokens).
func normalise(s string) string {
	s = hexID.ReplaceAllString(s, "JOBID")
	return b64Val.ReplaceAllString(s, `$1: "DESCRIPTION-$2"`)
}

// TestKubernetesManifest: job.yaml of 4 ranks decodes strictly into the API
// types, keeps the Indexed-Job rules, is mode 0600, holds the program's
// command line quoted for the shell, and matches the golden file with its
// ids normalised.
func TestKubernetesManifest(t *testing.T) {
	out := t.TempDir()
	r := run(t, "job", "make", "--kubernetes", "--image", "registry.example/sperli:0.1", "-n", "4", "--name", "sum",
		"--out", out, "/prog/sum.star", "--", "1000", "it's")
	if r.code != 0 || r.stdout != filepath.Join(out, "job.yaml")+"\n" || r.stderr != "" {
		t.Fatalf("exit status %d, stdout %q, stderr %q; want 0 and the file's path", r.code, r.stdout, r.stderr)
	}
	path := filepath.Join(out, "job.yaml")
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("job.yaml: %v %v, want mode 0600 (it holds the Secret)", fi.Mode(), err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, string(raw))
	checkRules(t, m, "sum", 4)
	if got := m.job.Spec.Template.Spec.Containers[0].Command[2]; got != `exec sperli rank /prog/sum.star 1000 'it'\''s' < /etc/sperli/rank-$JOB_COMPLETION_INDEX.job` {
		t.Errorf("command %q", got)
	}
	golden := filepath.Join("testdata", "job.yaml.golden")
	got := normalise(string(raw))
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if got != string(want) {
		t.Errorf("job.yaml (normalised) differs from %s:\n%s", golden, got)
	}
}

// TestKubernetesSpares: --spares S makes N+S pods; pods N … N+S-1 are the
// spares, whose descriptions hold the job secret (any may become rank 0).
func TestKubernetesSpares(t *testing.T) {
	out := t.TempDir()
	r := run(t, "job", "make", "--kubernetes", "--image", "sperli:1", "-n", "3", "--spares", "2", "--name", "st", "--out", out, "/prog/st.star")
	if r.code != 0 {
		t.Fatalf("exit status %d, stderr %q", r.code, r.stderr)
	}
	raw, err := os.ReadFile(filepath.Join(out, "job.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	checkSlots(t, decode(t, string(raw)), "st", 3, 2)
}

// TestKubernetesExecutable: an executable PROGRAM (a Go or C rank) is run
// itself, and the default name is sperli-<8 hex of the job id>.
func TestKubernetesExecutable(t *testing.T) {
	out := t.TempDir()
	r := run(t, "job", "make", "--kubernetes", "--image", "img", "-n", "2", "--out", out, "/bin/gosum")
	if r.code != 0 {
		t.Fatalf("exit status %d: %s", r.code, r.stderr)
	}
	raw, _ := os.ReadFile(filepath.Join(out, "job.yaml"))
	m := decode(t, string(raw))
	name := m.job.Name
	if !regexp.MustCompile(`^sperli-[0-9a-f]{8}$`).MatchString(name) {
		t.Errorf("default name %q, want sperli-<8 hex>", name)
	}
	checkRules(t, m, name, 2)
	if got := m.job.Spec.Template.Spec.Containers[0].Command[2]; got != "exec /bin/gosum < /etc/sperli/rank-$JOB_COMPLETION_INDEX.job" {
		t.Errorf("command %q", got)
	}
}

// TestKubernetesRefusals: what job make --kubernetes cannot do is a usage
// error (exit 2) naming it, and nothing is written.
func TestKubernetesRefusals(t *testing.T) {
	dir := t.TempDir()
	hostsFile := filepath.Join(dir, "hosts.txt")
	os.WriteFile(hostsFile, []byte("node1\n"), 0o644)
	for _, tc := range []struct {
		name    string
		args    []string
		want    string
		refused string
	}{
		{"no image", []string{"-n", "2", "p.star"}, "--image", ""},
		{"no program", []string{"--image", "i", "-n", "2"}, "PROGRAM is required", ""},
		{"spares", []string{"--image", "i", "-n", "2", "--spares", "-1", "p.star"}, "--spares -1", ""},
		{"host list", []string{"--image", "i", "-n", "1", "--hosts", hostsFile, "p.star"}, "--hosts", ""},
		{"bad name", []string{"--image", "i", "-n", "2", "--name", "Sum_1", "p.star"}, `--name "Sum_1"`, ""},
		{"name too long", []string{"--image", "i", "-n", "2", "--name", strings.Repeat("a", 62), "p.star"}, "--name", ""},
		{"no ranks", []string{"--image", "i", "-n", "0", "p.star"}, "-n 0", ""},
		{"refused host", []string{"--image", "i", "-n", "3", "--name", "sum", "p.star"}, "H1614: host sum-1.sum refused", "SUM-1.sum."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, tc.name)
			r := runEnv(t, tc.refused, append([]string{"job", "make", "--kubernetes", "--out", out}, tc.args...)...)
			if r.code != 2 || !strings.Contains(r.stderr, tc.want) || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("exit status %d, stderr %q; want 2 and one line saying %q", r.code, r.stderr, tc.want)
			}
			if _, err := os.Stat(filepath.Join(out, "job.yaml")); err == nil {
				t.Errorf("job.yaml written")
			}
		})
	}
}
