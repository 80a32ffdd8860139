//go:build sperli_nocount

package runtime

// counting is off in this build (stats_on.go).
const counting = false
