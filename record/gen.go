package record

// GenPrefix starts a generation report line (docs/protocol.md §12), sealed
// (Seal).
const GenPrefix = "\x1esperli-gen "

// MarkPrefix starts the line a launched rank writes on its standard output
// when it runs its program again in generation g (the number follows,
// sealed): the launcher shows "--- generation g ---" there, if the slot
// wrote anything before.
const MarkPrefix = "\x1esperli-mark "

// Gen is what a slot tells its launcher about a generation (protocol.md
// §12): a GenPrefix line on its standard error, of which the launcher
// writes the generation record. Kind is "generation" (it entered one),
// "spare" (it waits as a spare), "mode" (the program set its on-loss
// mode) or "start" (the program began in the generation).
type Gen struct {
	Kind  string `json:"kind"`
	Gen   int    `json:"generation"`
	Slot  int    `json:"slot"`
	Rank  int    `json:"rank"` // -1 for a spare
	Size  int    `json:"size"`
	Ranks []int  `json:"ranks"`
	// Runs is the ranks as runs {first slot, count} in rank order, sent
	// by a slot instead of Ranks (null then): a report is O(changes) and
	// a generation O(slots) at the launcher, not O(slots²). The launcher
	// makes Ranks of them (and writes Ranks in the record).
	Runs   [][2]int `json:"runs,omitempty"`
	Spares []int    `json:"spares"`
	Lost   []int    `json:"lost"`
	Cause  string   `json:"cause"`
	Pid    int      `json:"pid"`
	Msg    string   `json:"msg,omitempty"`
	MS     int64    `json:"ms"` // from the loss seen here to this slot entering the generation
}

// TracePrefix starts a trace record, ClockPrefix a clock record (the
// answer to the control channel's "clock"; docs/protocol.md §12).
const (
	TracePrefix = "\x1esperli-trace "
	ClockPrefix = "\x1esperli-clock "
)

// Trace threads (a trace record's tid).
const (
	TraceCalls    = 1
	TraceRecovery = 2
)
