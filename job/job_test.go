package job_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"sperli/codes"
	"sperli/job"
)

func goodJobLine(t testing.TB) []byte {
	f := newJobs(t, 2)
	j := f.job(1)
	return j.Encode()
}

// TestReadJob reads a description from the first line and leaves the rest
// of the reader as the control channel, however the reader splits it.
func TestReadJob(t *testing.T) {
	line := goodJobLine(t)
	input := append(append(line, '\n'), "control bytes"...)
	for name, wrap := range map[string]func(io.Reader) io.Reader{
		"whole":    func(r io.Reader) io.Reader { return r },
		"one byte": iotest.OneByteReader,
		"halves":   iotest.HalfReader,
	} {
		j, err := job.Read(wrap(bytes.NewReader(input)))
		if err != nil {
			t.Fatalf("%s: ReadJob = %v", name, err)
		}
		if j.Rank != 1 || j.Size != 2 {
			t.Errorf("%s: ReadJob: rank %d size %d, want 1 and 2", name, j.Rank, j.Size)
		}
		rest := new(bytes.Buffer)
		rest.ReadFrom(j.Control)
		if rest.String() != "control bytes" {
			t.Errorf("%s: control channel = %q, want the bytes after the line", name, rest.String())
		}
		if !bytes.Equal(j.Encode(), line) {
			t.Errorf("%s: Encode(ReadJob(line)) differs from line", name)
		}
	}
	long := bytes.Repeat([]byte("x"), job.MaxLine+1)
	for name, in := range map[string][]byte{"no line end": long, "line end after the limit": append(long, '\n')} {
		_, err := job.Read(bytes.NewReader(in))
		wantCode(t, "ReadJob("+name+")", err, codes.JobMalformed)
		if !strings.Contains(err.Error(), "longer than") {
			t.Errorf("ReadJob(%s) = %v, want it to say the description is too long", name, err)
		}
	}
}

// TestMalformedJob: every kind of bad description is H1615 naming what was
// wrong.
func TestMalformedJob(t *testing.T) {
	good := goodJobLine(t)
	edit := func(f func(m map[string]any)) string {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		return string(b)
	}
	cases := []struct {
		name, line, want string
	}{
		{"empty", "", "missing"},
		{"not json", "hello", "not valid"},
		{"truncated", string(good[:len(good)/2]), "not valid"},
		{"trailing data", string(good) + " {}", "after its JSON"},
		{"unknown field", edit(func(m map[string]any) { m["extra"] = 1 }), "extra"},
		{"version", edit(func(m map[string]any) { m["v"] = 2 }), "version is 2"},
		{"job id", edit(func(m map[string]any) { m["job"] = "xyz" }), "job id"},
		{"size", edit(func(m map[string]any) { m["size"] = 0 }), "size is 0"},
		{"rank", edit(func(m map[string]any) { m["rank"] = 2 }), "rank is 2"},
		{"negative rank", edit(func(m map[string]any) { m["rank"] = -1 }), "rank is -1"},
		{"host table", edit(func(m map[string]any) { m["hosts"] = []any{} }), "host table has 0"},
		{"port", edit(func(m map[string]any) { m["hosts"].([]any)[0].(map[string]any)["port"] = 70000 }), "port 70000"},
		{"host", edit(func(m map[string]any) { m["hosts"].([]any)[0].(map[string]any)["host"] = "a b" }), "not a host"},
		{"key", edit(func(m map[string]any) { m["key"] = "AAAA" }), "key is 3 bytes"},
		{"no token", edit(func(m map[string]any) { delete(m, "token") }), "token is missing"},
		{"no ca", edit(func(m map[string]any) { delete(m, "ca") }), "ca is missing"},
		{"silence", edit(func(m map[string]any) { m["silence_ms"] = 5 }), "silence_ms is 5"},
		{"secret off rank 0", edit(func(m map[string]any) { m["jobsecret"] = "AAAA" }), "only rank 0"},
		{"wrong type", edit(func(m map[string]any) { m["size"] = "two" }), "size"},
	}
	for _, tc := range cases {
		_, err := job.Parse([]byte(tc.line))
		wantCode(t, "ParseJob("+tc.name+")", err, codes.JobMalformed)
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseJob(%s) = %q, want it to say %q", tc.name, err, tc.want)
		}
	}
	_, err := job.Read(strings.NewReader(""))
	wantCode(t, "ReadJob(empty stdin)", err, codes.JobMalformed)
}

// TestJobRefusedHost: a rank joining from a description checks the host
// table against the reserved names and its own SPERLI_REFUSED_HOSTS.
func TestJobRefusedHost(t *testing.T) {
	good := goodJobLine(t)
	var m map[string]any
	json.Unmarshal(good, &m)
	m["hosts"].([]any)[0].(map[string]any)["host"] = "X.Host-A.Invalid."
	b, _ := json.Marshal(m)
	_, err := job.Parse(b)
	wantCode(t, "ParseJob(reserved host)", err, codes.HostRefused)

	t.Setenv("SPERLI_REFUSED_HOSTS", "elsewhere, 127.0.0.1")
	_, err = job.Parse(good)
	wantCode(t, "ParseJob(host in SPERLI_REFUSED_HOSTS)", err, codes.HostRefused)
}

var writeSeeds = flag.Bool("write-seeds", false, "rewrite testdata/fuzz/FuzzParseJob")

// TestJobSeeds checks that every committed fuzz seed is a description that
// parses; with -write-seeds it first rewrites them: real descriptions of a
// job of 2 and one of 3 ranks (test keys that nothing else uses).
func TestJobSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzParseJob")
	if *writeSeeds {
		writeJobSeeds(t, dir)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "job*"))
	if len(files) < 5 {
		t.Fatalf("%d seed files in %s, want 5", len(files), dir)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.SplitN(string(b), "\n", 3)
		q := strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")")
		line, err := strconv.Unquote(q)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := job.Parse([]byte(line)); err != nil {
			t.Errorf("%s: ParseJob = %v, want a valid description", name, err)
		}
	}
}

func writeJobSeeds(t *testing.T, dir string) {
	os.MkdirAll(dir, 0o755)
	for i, n := range []int{2, 3} {
		f := newJobs(t, n)
		for r := 0; r < n; r++ {
			line := f.job(r).Encode()
			body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", line)
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("job%d-rank%d", i, r)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// FuzzParseJob: any line either fails with H1615/H1614 or decodes to a
// description that encodes to a line that decodes to the same.
func FuzzParseJob(f *testing.F) {
	// The committed seeds are in testdata/fuzz/FuzzParseJob (made by
	// TestWriteJobSeeds with -write-seeds).
	f.Add([]byte(`{"v":1}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		j, err := job.Parse(line)
		if err != nil {
			if c := codes.Of(err); c != codes.JobMalformed && c != codes.HostRefused {
				t.Fatalf("ParseJob error %v has code %v, want H1615 or H1614", err, c)
			}
			return
		}
		again, err := job.Parse(j.Encode())
		if err != nil {
			t.Fatalf("ParseJob(Encode(j)) = %v", err)
		}
		if !bytes.Equal(again.Encode(), j.Encode()) {
			t.Fatalf("encode/decode/encode differs")
		}
	})
}

// TestValidateProgram: the launcher's program digest is 64 lower-case
// hex digits and comes with one_program; anything else is H1615 naming
// the field.
func TestValidateProgram(t *testing.T) {
	f := newJobs(t, 2)
	for _, tc := range []struct {
		name    string
		one     bool
		program string
		digest  []byte
		want    string
	}{
		{"good", true, strings.Repeat("0a", 32), nil, ""},
		{"one program, no digest", true, "", nil, ""},
		{"upper case", true, strings.Repeat("0A", 32), nil, "program"},
		{"short", true, "abcd", nil, "program"},
		{"without one_program", false, strings.Repeat("0a", 32), nil, "without one_program"},
		{"embedder's digest 31 bytes", true, "", make([]byte, 31), "program digest is 31 bytes"},
	} {
		j := f.job(1)
		j.OneProgram, j.Program, j.ProgramDigest = tc.one, tc.program, tc.digest
		err := j.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		wantCode(t, tc.name, err, codes.JobMalformed)
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want it to say %q", tc.name, err, tc.want)
		}
	}
}
