package launch

import (
	"fmt"
	"os"

	"github.com/charmbracelet/lipgloss"
)

var rankColors = []string{"6", "3", "5", "2", "4", "1", "14", "11", "13", "10", "12", "9"}

// Prefix returns the "[rank i] " prefix of rank output, styled with a
// colour per rank when color is true.
func Prefix(rank int, color bool) string { return prefixOf(fmt.Sprintf("rank %d", rank), rank, color) }

// prefixOf is the prefix "[name] " of a process's lines (roles.go names
// it: "rank i", "rank 2 · slot 8", "spare · slot 9"), styled with the
// colour of number hue.
func prefixOf(name string, hue int, color bool) string {
	p := "[" + name + "]"
	if !color {
		return p + " "
	}
	st := lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color(rankColors[hue%len(rankColors)]))
	return st.Render(p) + " "
}

// UseColor reports whether output to f is styled: f is a terminal and
// NO_COLOR is unset or empty.
func UseColor(f *os.File) bool {
	if os.Getenv("NO_COLOR") != "" {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
