package starlib

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.starlark.net/resolve"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarktest"
	"go.starlark.net/syntax"
)

// scriptPredeclared are the predeclared values of every script test chunk,
// besides assert. Other _test files add theirs in an init function.
var scriptPredeclared = starlark.StringDict{
	"array": Array,
}

// scriptSetup functions run before every chunk, on the chunk's own thread and
// a copy of scriptPredeclared that they may change (thread locals, values
// that need t, a Load function).
var scriptSetup []func(t *testing.T, thread *starlark.Thread, predeclared starlark.StringDict)

// TestScripts runs every testdata/*.star file in the dialect FileOptions.
// A file is split into chunks by lines that are exactly "---"; each chunk is
// a program of its own. A line that ends in a comment ### "regexp" must fail
// with an error matching regexp; any other error is a failure.
func TestScripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.star"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no testdata/*.star files")
	}
	assert, err := starlarktest.LoadAssertModule()
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			chunks, err := readChunks(file)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range chunks {
				thread := &starlark.Thread{Name: c.name()}
				starlarktest.SetReporter(thread, t)
				predeclared := starlark.StringDict{"assert": assert["assert"]}
				for name, v := range scriptPredeclared {
					predeclared[name] = v
				}
				for _, setup := range scriptSetup {
					setup(t, thread, predeclared)
				}
				_, err := starlark.ExecFileOptions(FileOptions, thread, c.file, c.src, predeclared)
				c.check(t, err)
			}
		})
	}
}

// A chunk is one program of a script test file.
type chunk struct {
	file  string
	line  int                    // first line of the chunk in file
	src   string                 // padded with newlines, so lines keep their numbers
	wants map[int]*regexp.Regexp // expected errors by line
}

func (c *chunk) name() string { return c.file + ":" + strconv.Itoa(c.line) }

// readChunks splits a script test file into chunks and reads their
// expected errors.
func readChunks(file string) ([]*chunk, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var chunks []*chunk
	c := &chunk{file: file, line: 1, wants: map[int]*regexp.Regexp{}}
	var src strings.Builder
	lines := strings.SplitAfter(string(data), "\n")
	for i, line := range lines {
		num := i + 1
		if strings.TrimRight(line, "\r\n") == "---" {
			c.src = src.String()
			chunks = append(chunks, c)
			c = &chunk{file: file, line: num + 1, wants: map[int]*regexp.Regexp{}}
			src.Reset()
			src.WriteString(strings.Repeat("\n", num))
			continue
		}
		src.WriteString(line)
		_, want, ok := strings.Cut(line, "###")
		if !ok {
			continue
		}
		want = strings.TrimSpace(want)
		pattern, err := strconv.Unquote(want)
		if err != nil {
			return nil, errors.New(file + ":" + strconv.Itoa(num) + ": not a quoted regexp after ###: " + want)
		}
		rx, err := regexp.Compile(pattern)
		if err != nil {
			return nil, errors.New(file + ":" + strconv.Itoa(num) + ": " + err.Error())
		}
		c.wants[num] = rx
	}
	c.src = src.String()
	return append(chunks, c), nil
}

// check compares the outcome err of running the chunk with its expected errors.
func (c *chunk) check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		c.gotError(t, err)
	}
	for line, rx := range c.wants {
		t.Errorf("\n%s:%d: want an error matching %q, got none", c.file, line, rx)
	}
}

// gotError reports err as expected when a line of the chunk it comes from
// announced it.
func (c *chunk) gotError(t *testing.T, err error) {
	t.Helper()
	var lines []int // candidate lines, innermost first
	var evalErr *starlark.EvalError
	var syntaxErr syntax.Error
	var resolveErrs resolve.ErrorList
	switch {
	case errors.As(err, &evalErr):
		for i := range evalErr.CallStack {
			if pos := evalErr.CallStack.At(i).Pos; pos.Filename() == c.file {
				lines = append(lines, int(pos.Line))
			}
		}
	case errors.As(err, &syntaxErr):
		lines = append(lines, int(syntaxErr.Pos.Line))
	case errors.As(err, &resolveErrs) && len(resolveErrs) > 0:
		// A resolve error comes with all its fellows; each must be announced.
		for _, e := range resolveErrs {
			c.match(t, int(e.Pos.Line), e.Error())
		}
		return
	}
	msg := err.Error()
	for _, line := range lines {
		if _, ok := c.wants[line]; ok {
			c.match(t, line, msg)
			return
		}
	}
	if evalErr != nil {
		msg = evalErr.Backtrace()
	}
	t.Errorf("\n%s: unexpected error: %s", c.name(), msg)
}

// match checks the error msg of line against that line's expectation.
func (c *chunk) match(t *testing.T, line int, msg string) {
	t.Helper()
	rx, ok := c.wants[line]
	if !ok {
		t.Errorf("\n%s:%d: unexpected error: %s", c.file, line, msg)
		return
	}
	delete(c.wants, line)
	if !rx.MatchString(msg) {
		t.Errorf("\n%s:%d: error %q does not match %q", c.file, line, msg, rx)
	}
}

// TestReadChunks checks the chunk splitter that TestScripts relies on.
func TestReadChunks(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "x.star")
	src := "a = 1\nb = 2 ### \"two\"\n---\nc = 3\n--- \n---\n### `x+`\n"
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	chunks, err := readChunks(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(chunks) != 3 {
		t.Fatalf("readChunks gave %d chunks, want 3", len(chunks))
	}
	tests := []struct {
		line  int
		src   string
		wants []int
	}{
		{1, "a = 1\nb = 2 ### \"two\"\n", []int{2}},
		{4, "\n\n\nc = 3\n--- \n", nil},
		{7, "\n\n\n\n\n\n### `x+`\n", []int{7}},
	}
	for i, tt := range tests {
		c := chunks[i]
		if c.line != tt.line || c.src != tt.src || len(c.wants) != len(tt.wants) {
			t.Errorf("chunk %d = line %d src %q wants %v, want line %d src %q wants %v", i, c.line, c.src, c.wants, tt.line, tt.src, tt.wants)
		}
		for _, l := range tt.wants {
			if c.wants[l] == nil {
				t.Errorf("chunk %d: no expected error on line %d", i, l)
			}
		}
	}
	if err := os.WriteFile(file, []byte("x ### unquoted\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readChunks(file); err == nil {
		t.Errorf("readChunks of an unquoted ### pattern succeeded, want error")
	}
}
