//go:build !race

package sched

// raceOn says the race detector is on (race_test.go).
const raceOn = false
