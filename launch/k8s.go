package launch

import (
	"encoding/base64"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"sperli/hosts"
	"sperli/job"
)

// KubeOptions are the flags of `sperli job make --kubernetes` beside
// MakeOptions' (N, DenyFile, CheckpointDir, SilenceMS, Expires, Out).
type KubeOptions struct {
	Image   string   // the container image: sperli and the program inside
	Name    string   // the Job, Service and pod names' stem; "" is sperli-<8 hex of the job id>
	Spares  int      // warm spares (SPEC §10)
	Program string   // PROGRAM.star (run by `sperli rank`) or an executable, as the image has it
	Args    []string // the program's arguments
	Sperli  string   // the sperli binary in the image; "" is "sperli" (on the image's PATH)
}

// KubePort is the port every rank listens at in its pod: each pod has a
// network namespace of its own, so all ranks share one port number.
const KubePort = hosts.BasePort

// kubeMount is where the rank descriptions are mounted in every pod.
const kubeMount = "/etc/sperli"

// MakeKube writes OUT/job.yaml (mode 0600: it holds the Secret) for a job
// of o.N ranks run as an Indexed Job, SPEC §17: a headless Service whose
// name is the pods' subdomain (pod i is NAME-i.NAME in DNS, the host of
// rank i), a Secret with every rank's description, and an Indexed Job with
// completions = parallelism = N+S, restartPolicy Never and backoffLimit 0
// (a failed rank fails the job: the others see the loss; with spares the
// limits of kubeLimits), whose pod i runs
// the program with rank-$JOB_COMPLETION_INDEX.job on its standard input.
// It returns the file's path.
func MakeKube(o MakeOptions, k KubeOptions) (string, error) {
	if o.Out == "" {
		return "", usage("job make: --out DIR is required")
	}
	if o.HostsFile != "" {
		return "", usage("job make --kubernetes: --hosts: the hosts are the pods (NAME-i.NAME); give no host list")
	}
	if k.Image == "" || strings.ContainsAny(k.Image, " \t\r\n\"\\") {
		return "", usage("job make --kubernetes: --image %q: want an image reference (the image holds sperli and the program)", k.Image)
	}
	if k.Program == "" {
		return "", usage("job make --kubernetes: PROGRAM is required (its path in the image)")
	}
	if err := checkSize("job make --kubernetes: ", o.N, k.Spares); err != nil {
		return "", err
	}
	if o.Expires < 0 {
		return "", usage("job make: --expires %v: want a positive duration", o.Expires)
	}
	if o.SilenceMS != 0 && (o.SilenceMS < job.MinSilenceMS || o.SilenceMS > job.MaxSilenceMS) {
		return "", usage("job make: --silence %d: want %d to %d ms", o.SilenceMS, job.MinSilenceMS, job.MaxSilenceMS)
	}
	id, err := job.NewIdentity()
	if err != nil {
		return "", err
	}
	slots := o.N + k.Spares
	name := k.Name
	if name == "" {
		name = "sperli-" + id.ID[:8]
	}
	// Pod i's host name is NAME-i, a DNS label of at most 63 characters.
	if !dnsLabel(name) || len(name)+1+len(strconv.Itoa(slots-1)) > 63 {
		return "", usage("job make --kubernetes: --name %q: want lower-case letters, digits and '-', starting with a letter, at most %d characters", name, 63-1-len(strconv.Itoa(slots-1)))
	}
	lines := make([]hosts.Line, slots)
	table := make([]job.Host, slots)
	for r := range lines {
		lines[r] = hosts.Line{Host: fmt.Sprintf("%s-%d.%s", name, r, name), Port: KubePort}
		table[r] = job.Host{Host: lines[r].Host, Port: KubePort}
	}
	var deny []string
	if o.DenyFile != "" {
		if deny, err = hosts.ReadDenyFile(o.DenyFile); err != nil {
			return "", fileErr("--deny-hosts", err)
		}
	}
	if err := hosts.NewRefuser(os.Getenv(hosts.EnvRefused), deny).Check("", lines); err != nil {
		return "", err
	}
	exp := o.Expires
	if exp == 0 {
		exp = DefaultExpires
	}
	spec := job.Spec{Size: o.N, Spares: k.Spares, Hosts: table, SilenceMS: o.SilenceMS, CheckpointDir: o.CheckpointDir, Expires: time.Now().Add(exp)}.Compacted()
	descs := make([][]byte, slots)
	for r := range descs {
		j, err := id.Describe(spec, r)
		if err != nil {
			return "", err
		}
		descs[r] = append(j.Encode(), '\n')
	}
	y := kubeYAML(name, id.ID, k, slots, descs)
	paths, err := writeSecrets(o.Out, []secretFile{{"job.yaml", []byte(y)}})
	if err != nil {
		return "", err
	}
	return paths[0], nil
}

// dnsLabel reports whether s is an RFC 1035 label as Kubernetes wants
// Service names: lower-case letters, digits and '-', a letter first, no
// '-' last.
func dnsLabel(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// q quotes s as a YAML double-quoted scalar (JSON's string syntax is
// YAML's).
func q(s string) string { return strconv.Quote(s) }

// kubeYAML writes the three objects. Every string is double-quoted, so no
// value is read as anything but the string it is.
func kubeYAML(name, id string, k KubeOptions, slots int, descs [][]byte) string {
	self := k.Sperli
	if self == "" {
		self = "sperli"
	}
	var words []string
	if strings.HasSuffix(k.Program, ".star") {
		words = append(words, self, "rank")
	}
	words = append(words, k.Program)
	words = append(words, k.Args...)
	for i, w := range words {
		words[i] = hosts.ShellQuote(w)
	}
	script := "exec " + strings.Join(words, " ") + " < " + kubeMount + "/rank-$JOB_COMPLETION_INDEX.job"
	secret := name + "-ranks"

	var b strings.Builder
	fmt.Fprintf(&b, "# Made by sperli job make --kubernetes: %d ranks of %s, job %s.\n", slots, k.Program, id)
	b.WriteString("# It holds every rank's key and token (the Secret): keep it like a key.\n")
	b.WriteString("# kubectl apply -f job.yaml; kubectl logs -f -l batch.kubernetes.io/job-name=" + name + ",batch.kubernetes.io/job-completion-index=0\n")
	b.WriteString("# Headless: pod i is " + name + "-i." + name + " in DNS, the host of rank i.\n")
	fmt.Fprintf(&b, `apiVersion: v1
kind: Service
metadata:
  name: %[1]s
  labels:
    sperli-job: %[2]s
spec:
  clusterIP: None
  publishNotReadyAddresses: true
  selector:
    batch.kubernetes.io/job-name: %[1]s
  ports:
  - name: sperli
    port: %[3]d
    targetPort: %[3]d
    protocol: TCP
---
apiVersion: v1
kind: Secret
metadata:
  name: %[4]s
  labels:
    sperli-job: %[2]s
type: Opaque
data:
`, q(name), q(id), KubePort, q(secret))
	for r, d := range descs {
		fmt.Fprintf(&b, "  %s: %s\n", q(fmt.Sprintf("rank-%d.job", r)), q(base64.StdEncoding.EncodeToString(d)))
	}
	fmt.Fprintf(&b, `---
apiVersion: batch/v1
kind: Job
metadata:
  name: %[1]s
  labels:
    sperli-job: %[2]s
spec:
  completionMode: Indexed
  completions: %[3]d
  parallelism: %[3]d
%[9]s  template:
    metadata:
      labels:
        sperli-job: %[2]s
    spec:
      subdomain: %[1]s
      restartPolicy: Never
      enableServiceLinks: false
      containers:
      - name: rank
        image: %[4]s
        command:
        - "/bin/sh"
        - "-c"
        - %[5]s
        ports:
        - name: sperli
          containerPort: %[6]d
          protocol: TCP
        volumeMounts:
        - name: ranks
          mountPath: %[7]s
          readOnly: true
      volumes:
      - name: ranks
        secret:
          secretName: %[8]s
          defaultMode: 256
`, q(name), q(id), slots, q(k.Image), q(script), KubePort, q(kubeMount), q(secret), kubeLimits(slots-k.Spares, k.Spares))
	return b.String()
}

// kubeLimits is what ends the Job. Without spares a failed pod fails it
// (backoffLimit 0: the others see the loss and end too, and no rank is
// started again with the same token). With S spares a lost pod is a loss
// the job recovers from in place: each index runs once
// (backoffLimitPerIndex 0), up to S indexes may fail (maxFailedIndexes;
// one more fails the Job and ends its pods), and the Job succeeds once n
// indexes did (successPolicy) — the ranks of the last generation, since
// a spare that served no rank ends only after every rank finished; the
// pods still running then, spares, are ended.
func kubeLimits(n, spares int) string {
	if spares == 0 {
		return "  backoffLimit: 0\n"
	}
	return fmt.Sprintf("  backoffLimitPerIndex: 0\n  maxFailedIndexes: %d\n  successPolicy:\n    rules:\n    - succeededCount: %d\n", spares, n)
}
