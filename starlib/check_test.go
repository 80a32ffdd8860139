package starlib

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	mods := filepath.Join(dir, "mods")
	write := func(path, src string) string {
		t.Helper()
		return writeTestFile(t, path, src)
	}
	write(filepath.Join(dir, "good_mod.star"), "def f(x):\n    return x + 1\n")
	write(filepath.Join(mods, "lib.star"), "load(\"json\", \"json\")\ndef g():\n    return json.encode(1)\n")
	write(filepath.Join(mods, "broken.star"), "def h():\n    return nope\n")
	write(filepath.Join(dir, "cycle_a.star"), "load(\"cycle_b.star\", \"b\")\na = 1\n")
	write(filepath.Join(dir, "cycle_b.star"), "load(\"cycle_a.star\", \"a\")\nb = 1\n")
	for _, tc := range []struct {
		name, src string
		want      string // "" for no error; else the error's whole text, {dir} for dir
	}{
		{"good", "load(\"good_mod.star\", \"f\")\nload(\"lib.star\", \"g\")\nload(\"math\", \"math\")\n" +
			"def main():\n    print(f(comm.rank if comm else 0), g(), sperli.args, array.size('int64'), math.pi)\n", ""},
		{"syntax", "def main():\n    x = = 1\n", "{dir}/p.star:2:9: got '=', want primary expression"},
		{"undefined", "def main():\n    print(total)\n", "{dir}/p.star:2:11: undefined: total"},
		{"two undefined", "def main():\n    print(a, b)\n", "{dir}/p.star:2:11: undefined: a (and 1 more)"},
		{"not predeclared", "print(sperli2)\n", "{dir}/p.star:1:7: undefined: sperli2"},
		{"missing module", "x = 1\nload(\"nowhere.star\", \"y\")\n", `{dir}/p.star:2:6: load: module "nowhere.star" not found in {dir}, {dir}/mods`},
		{"broken module", "load(\"broken.star\", \"h\")\n", "{dir}/mods/broken.star:2:12: undefined: nope"},
		{"cycle", "load(\"cycle_a.star\", \"a\")\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prog := write(filepath.Join(dir, "p.star"), tc.src)
			err := Check(prog, []string{mods})
			want := strings.ReplaceAll(tc.want, "{dir}", dir)
			switch {
			case want == "" && err != nil:
				t.Errorf("Check = %v, want nil", err)
			case want != "" && (err == nil || err.Error() != want):
				t.Errorf("Check = %v, want %s", err, want)
			}
		})
	}
	if err := Check(filepath.Join(dir, "absent.star"), nil); err == nil || !strings.Contains(err.Error(), "absent.star: no such file") {
		t.Errorf("Check(absent) = %v, want absent.star: no such file", err)
	}
}

func writeTestFile(t *testing.T, path, src string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
