//go:build race

package sched

// raceOn says the race detector is on. It checks every byte a copy moves,
// which makes the matrix's large data on many ranks minutes long: there
// the tests run fewer roots.
const raceOn = true
