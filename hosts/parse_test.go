package hosts

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

func TestParse(t *testing.T) {
	label63 := strings.Repeat("a", 63)
	name253 := strings.Join([]string{label63, label63, label63, strings.Repeat("b", 61)}, ".")
	tests := []struct {
		in   string
		want []Line
	}{
		{"", nil},
		{"\n\n   \n# only comments\n\t# indented\n", nil},
		{"node1\nnode2 47001\n", []Line{{"node1", 0, 1, 0}, {"node2", 47001, 2, 0}}},
		{"node1", []Line{{"node1", 0, 1, 0}}},
		{"# head\n\n  node1  \n\tnode2\t47001\t\n", []Line{{"node1", 0, 3, 0}, {"node2", 47001, 4, 0}}},
		{"node1\r\nnode2 2\r\n", []Line{{"node1", 0, 1, 0}, {"node2", 2, 2, 0}}},
		{"node1 # rack 3\nnode2 47001 #x\n#\n", []Line{{"node1", 0, 1, 0}, {"node2", 47001, 2, 0}}},
		{"node1 #47001", []Line{{"node1", 0, 1, 0}}},
		{"a 1\nb 65535\nc 00080\n", []Line{{"a", 1, 1, 0}, {"b", 65535, 2, 0}, {"c", 80, 3, 0}}},
		{"localhost\nLocalHost.\n127.0.0.1\n127.3.4.5 9\n", []Line{{"localhost", 0, 1, 0}, {"LocalHost.", 0, 2, 0}, {"127.0.0.1", 0, 3, 0}, {"127.3.4.5", 9, 4, 0}}},
		{"::1\nfe80::1\n2001:DB8::1 47000\n::ffff:10.0.0.1\n", []Line{{"::1", 0, 1, 0}, {"fe80::1", 0, 2, 0}, {"2001:DB8::1", 47000, 3, 0}, {"::ffff:10.0.0.1", 0, 4, 0}}},
		{"Node1.Example.COM.\na-b.c-d\nx\n1.2.3.com\n0xg\ndeadbeef\n", []Line{{"Node1.Example.COM.", 0, 1, 0}, {"a-b.c-d", 0, 2, 0}, {"x", 0, 3, 0}, {"1.2.3.com", 0, 4, 0}, {"0xg", 0, 5, 0}, {"deadbeef", 0, 6, 0}}},
		{label63 + "\n" + name253 + "\n" + name253 + ".\n", []Line{{label63, 0, 1, 0}, {name253, 0, 2, 0}, {name253 + ".", 0, 3, 0}}},
		{"node1\nnode1\n", []Line{{"node1", 0, 1, 0}, {"node1", 0, 2, 0}}},
		{"node1 slots=8\nnode2:4\nnode3 47001 slots=2 # two\nlocalhost slots=4096\n", []Line{{"node1", 0, 1, 8}, {"node2", 0, 2, 4}, {"node3", 47001, 3, 2}, {"localhost", 0, 4, 4096}}},
		{"127.0.0.1:3\n::1 slots=2\nnode 65534 slots=2\n", []Line{{"127.0.0.1", 0, 1, 3}, {"::1", 0, 2, 2}, {"node", 65534, 3, 2}}},
	}
	for _, tt := range tests {
		got, err := Parse("hosts.txt", strings.NewReader(tt.in))
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Parse(%q) = %v, %v, want %v, nil", tt.in, got, err, tt.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	label64 := strings.Repeat("a", 64)
	name254 := strings.Repeat("a.", 126) + "aa"
	tests := []struct {
		in, want string
	}{
		{"node1 x", `hosts.txt:1: port "x" is not a number 1..65535`},
		{"a\nb\nc 1 2\n", `hosts.txt:3: field "2": want host [port] [slots=N]`},
		{"a\n\n# c\nb 1 2 3 # four\n", "hosts.txt:4: 4 fields, want host [port] [slots=N]"},
		{"node slots=0", `hosts.txt:1: slots "0" is not a number 1..4096`},
		{"node slots=4097", `hosts.txt:1: slots "4097" is not a number 1..4096`},
		{"node slots=", `hosts.txt:1: slots "" is not a number 1..4096`},
		{"node slots=08", `hosts.txt:1: slots "08" is not a number 1..4096`},
		{"node slots=-1", `hosts.txt:1: slots "-1" is not a number 1..4096`},
		{"node slots=2 slots=3", `hosts.txt:1: slots given twice ("node" and "slots=3")`},
		{"node:2 slots=3", `hosts.txt:1: slots given twice ("node:2" and "slots=3")`},
		{"node max_slots=3", `hosts.txt:1: "max_slots=3": unknown key "max_slots", want slots=N`},
		{"node slots=2 47001", `hosts.txt:1: field "47001": want host [port] [slots=N]`},
		{"node 65535 slots=2", "hosts.txt:1: port 65535 and 2 slots: the ports 65535..65536 go past 65535"},
		{"node:x", `hosts.txt:1: "node:x": slots "x" is not a number 1..4096 (a port goes after a blank: "node x")`},
		{"bad_host:2", `hosts.txt:1: host "bad_host" has character '_', want letters, digits, '-', '.' or ':'`},
		{"a\nb\nc\nnode 0\n", `hosts.txt:4: port "0" is not a number 1..65535`},
		{"node 65536", `hosts.txt:1: port "65536" is not a number 1..65535`},
		{"node -1", `hosts.txt:1: port "-1" is not a number 1..65535`},
		{"node +1", `hosts.txt:1: port "+1" is not a number 1..65535`},
		{"node 0x10", `hosts.txt:1: port "0x10" is not a number 1..65535`},
		{"node 047001", `hosts.txt:1: port "047001" is not a number 1..65535`},
		{"node 99999999999999999999", `hosts.txt:1: port "99999999999999999999" is not a number 1..65535`},
		{"node 47001#x", `hosts.txt:1: port "47001#x" is not a number 1..65535`},
		{"a_b", `hosts.txt:1: host "a_b" has character '_', want letters, digits, '-', '.' or ':'`},
		{"ok\nnode1#x", `hosts.txt:2: host "node1#x" has character '#', want letters, digits, '-', '.' or ':'`},
		{"[::1]", `hosts.txt:1: host "[::1]" has character '[', want letters, digits, '-', '.' or ':'`},
		{"fe80::1%eth0", `hosts.txt:1: host "fe80::1%eth0" has character '%', want letters, digits, '-', '.' or ':'`},
		{"é.com", `hosts.txt:1: host "é.com" has character 'é', want letters, digits, '-', '.' or ':'`},
		{"a\xffb", `hosts.txt:1: host "a\xffb" has byte 0xff, want letters, digits, '-', '.' or ':'`},
		{"a\x00b", `hosts.txt:1: host "a\x00b" has character '\x00', want letters, digits, '-', '.' or ':'`},
		{"$(reboot)", `hosts.txt:1: host "$(reboot)" has character '$', want letters, digits, '-', '.' or ':'`},
		{"-oProxyCommand", `hosts.txt:1: host "-oProxyCommand" begins with '-'`},
		{"- 1", `hosts.txt:1: host "-" begins with '-'`},
		{"a..b", `hosts.txt:1: host "a..b" has an empty label`},
		{".a", `hosts.txt:1: host ".a" has an empty label`},
		{".", `hosts.txt:1: host "." has an empty label`},
		{"a..", `hosts.txt:1: host "a.." has an empty label`},
		{"a.-b", `hosts.txt:1: host "a.-b" has a label that begins or ends with '-'`},
		{"a-.b", `hosts.txt:1: host "a-.b" has a label that begins or ends with '-'`},
		{label64 + ".com", `hosts.txt:1: host "` + label64 + `.com" has a label of 64 characters, want at most 63`},
		{name254, "hosts.txt:1: host name of 254 characters, want at most 253"},
		{"1.2.3", `hosts.txt:1: host "1.2.3" is not a valid IPv4 address`},
		{"127.1", `hosts.txt:1: host "127.1" is not a valid IPv4 address`},
		{"2130706433", `hosts.txt:1: host "2130706433" is not a valid IPv4 address`},
		{"0x7f.0.0.1", `hosts.txt:1: host "0x7f.0.0.1" is not a valid IPv4 address`},
		{"127.000.0.1", `hosts.txt:1: host "127.000.0.1" is not a valid IPv4 address`},
		{"256.0.0.1", `hosts.txt:1: host "256.0.0.1" is not a valid IPv4 address`},
		{"127.0.0.1.", `hosts.txt:1: host "127.0.0.1." is not a valid IPv4 address`},
		{"node1:47001", `hosts.txt:1: "node1:47001": slots "47001" is not a number 1..4096 (a port goes after a blank: "node1 47001")`},
		{"1:2:3", `hosts.txt:1: host "1:2:3" is not a valid IPv6 address`},
		{"::1.", `hosts.txt:1: host "::1." is not a valid IPv6 address`},
		{"::ffff:1.2.3", `hosts.txt:1: host "::ffff:1.2.3" is not a valid IPv6 address`},
		{"a\n" + strings.Repeat("x", maxLine+1) + "\n", "hosts.txt:2: line longer than 65536 bytes"},
	}
	for _, tt := range tests {
		got, err := Parse("hosts.txt", strings.NewReader(tt.in))
		var pe *ParseError
		if !errors.As(err, &pe) || err.Error() != tt.want || got != nil {
			t.Errorf("Parse(%.40q) = %v, %v, want nil, %v", tt.in, got, err, tt.want)
		}
	}
}

func TestExpand(t *testing.T) {
	lines, err := Parse("h", strings.NewReader("a slots=3\nb 47001 slots=2\nc\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		byNode bool
		max    int
		want   []Line
	}{
		{false, 100, []Line{{"a", 0, 1, 0}, {"a", 0, 1, 0}, {"a", 0, 1, 0}, {"b", 47001, 2, 0}, {"b", 47002, 2, 0}, {"c", 0, 3, 0}}},
		{false, 4, []Line{{"a", 0, 1, 0}, {"a", 0, 1, 0}, {"a", 0, 1, 0}, {"b", 47001, 2, 0}}},
		{true, 100, []Line{{"a", 0, 1, 0}, {"b", 47001, 2, 0}, {"c", 0, 3, 0}, {"a", 0, 1, 0}, {"b", 47002, 2, 0}, {"a", 0, 1, 0}}},
		{true, 2, []Line{{"a", 0, 1, 0}, {"b", 47001, 2, 0}}},
		{true, 0, nil},
	} {
		if got := Expand(lines, tt.byNode, tt.max); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Expand(byNode %v, max %d) = %v, want %v", tt.byNode, tt.max, got, tt.want)
		}
	}
	// A huge line allocates no more than max.
	big := []Line{{"a", 0, 1, MaxSlots}, {"b", 0, 2, MaxSlots}}
	if got := Expand(big, true, 5); len(got) != 5 {
		t.Errorf("Expand(2 x %d slots, max 5) gave %d slots", MaxSlots, len(got))
	}
}

func TestParseReadError(t *testing.T) {
	boom := errors.New("boom")
	_, err := Parse("hosts.txt", iotest.ErrReader(boom))
	if !errors.Is(err, boom) || err.Error() != "hosts.txt: boom" {
		t.Errorf("Parse(ErrReader) = %v, want hosts.txt: boom", err)
	}
}

func TestParseErrorNoFile(t *testing.T) {
	e := &ParseError{Line: 3, Msg: "bad"}
	if got, want := e.Error(), "line 3: bad"; got != want {
		t.Errorf("ParseError.Error() = %v, want %v", got, want)
	}
}

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "hosts.txt")
	bad := filepath.Join(dir, "bad.txt")
	if err := os.WriteFile(good, []byte("node1\nnode2 47001\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("node1\nnode2 x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(good)
	want := []Line{{"node1", 0, 1, 0}, {"node2", 47001, 2, 0}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ReadFile(%v) = %v, %v, want %v, nil", good, got, err, want)
	}
	_, err = ReadFile(bad)
	if wantErr := bad + `:2: port "x" is not a number 1..65535`; err == nil || err.Error() != wantErr {
		t.Errorf("ReadFile(%v) = %v, want %v", bad, err, wantErr)
	}
	_, err = ReadFile(filepath.Join(dir, "missing"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile(missing) = %v, want fs.ErrNotExist", err)
	}
}

func TestLineString(t *testing.T) {
	tests := []struct {
		l    Line
		want string
	}{
		{Line{"node1", 0, 1, 0}, "node1"},
		{Line{"node2", 47001, 2, 0}, "node2 47001"},
		{Line{"::1", 9, 0, 0}, "::1 9"},
	}
	for _, tt := range tests {
		if got := tt.l.String(); got != tt.want {
			t.Errorf("Line.String(%#v) = %v, want %v", tt.l, got, tt.want)
		}
	}
}

func TestLocal(t *testing.T) {
	tests := []struct {
		n    int
		want []Line
	}{
		{-1, nil},
		{0, nil},
		{1, []Line{{"127.0.0.1", 0, 0, 0}}},
		{3, []Line{{"127.0.0.1", 0, 0, 0}, {"127.0.0.1", 0, 0, 0}, {"127.0.0.1", 0, 0, 0}}},
	}
	for _, tt := range tests {
		if got := Local(tt.n); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Local(%v) = %v, want %v", tt.n, got, tt.want)
		}
	}
}

func TestIsLocal(t *testing.T) {
	tests := []struct {
		host   string
		local  bool
		listen string
	}{
		{"localhost", true, "127.0.0.1"},
		{"LOCALHOST", true, "127.0.0.1"},
		{"LocalHost.", true, "127.0.0.1"},
		{"127.0.0.1", true, "127.0.0.1"},
		{"127.0.0.2", true, "127.0.0.2"},
		{"127.255.255.255", true, "127.255.255.255"},
		{"::1", true, "::1"},
		{"0:0:0:0:0:0:0:1", true, "0:0:0:0:0:0:0:1"},
		{"::ffff:127.0.0.1", true, "::ffff:127.0.0.1"},
		{"128.0.0.1", false, "128.0.0.1"},
		{"126.255.255.255", false, "126.255.255.255"},
		{"10.0.0.1", false, "10.0.0.1"},
		{"::2", false, "::2"},
		{"fe80::1", false, "fe80::1"},
		{"x.localhost", false, "x.localhost"},
		{"localhost.localdomain", false, "localhost.localdomain"},
		{"localhost..", false, "localhost.."},
		{"node1", false, "node1"},
		{"", false, ""},
	}
	for _, tt := range tests {
		if got := IsLocal(tt.host); got != tt.local {
			t.Errorf("IsLocal(%v) = %v, want %v", tt.host, got, tt.local)
		}
		if got := ListenHost(tt.host); got != tt.listen {
			t.Errorf("ListenHost(%v) = %v, want %v", tt.host, got, tt.listen)
		}
	}
}
