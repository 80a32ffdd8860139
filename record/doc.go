// Package record holds the lines a launched rank writes for its launcher
// and the launcher reads back, beside the program's own output on the
// same streams: the status record a rank ends with and the error lines
// before it, the waiting record that answers the launcher's "waiting"
// (`sperli run --timeout`), the generation reports and marks of an
// elastic job (sealed with a MAC, mac.go), the counters of `--stats`, and
// the prefixes of trace and clock records (docs/protocol.md §12).
//
// It is a leaf: the rank's runtime writes these records and the launcher
// parses them, and neither needs the other for that. Nothing here reads
// the environment or writes to the process's streams on its own: callers
// pass the writer.
package record
