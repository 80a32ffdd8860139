package record

// CollStats is what a rank spent in one kind of collective: its calls,
// the time waited in them, and the frames (and their data's bytes) the
// calls' schedules sent and took.
type CollStats struct {
	Calls     int64   `json:"calls"`
	WaitMS    float64 `json:"wait_ms"`
	SentMsgs  int64   `json:"sent_msgs"`
	SentBytes int64   `json:"sent_bytes"`
	RecvMsgs  int64   `json:"recv_msgs"`
	RecvBytes int64   `json:"recv_bytes"`
}

// RankStats is a rank's counters in its status record (what mpiP and IPM
// add to MPI; runtime/stats.go counts them). Messages and bytes count
// point-to-point messages and the frames of collectives (Coll tells those
// apart per kind); checkpoints' frames aside.
type RankStats struct {
	WallMS      int64   `json:"wall_ms"`
	RecvWaitMS  float64 `json:"recv_wait_ms"`
	CollWaitMS  float64 `json:"coll_wait_ms"`
	CkptWaitMS  float64 `json:"ckpt_wait_ms"`
	SentMsgs    int64   `json:"sent_msgs"`
	SentBytes   int64   `json:"sent_bytes"`
	RecvMsgs    int64   `json:"recv_msgs"`
	RecvBytes   int64   `json:"recv_bytes"`
	Collectives int64   `json:"collectives"`
	PeakRSSKB   int64   `json:"peak_rss_kb"` // the process's own peak resident size (VmHWM), KiB
	// CPUMS is the processor time the process took (user and system)
	// until the record; JoinMS and JoinCPUMS the wall time from the
	// process's start and the processor time until its join ended (0
	// for a slot that never joined).
	CPUMS     float64 `json:"cpu_ms"`
	JoinMS    float64 `json:"join_ms"`
	JoinCPUMS float64 `json:"join_cpu_ms"`
	// PeakLinks is the most links this slot had at once; PeakFDs the
	// most file descriptors the process had open when it made one (0
	// where the system does not say).
	PeakLinks int64 `json:"peak_links"`
	PeakFDs   int64 `json:"peak_fds"`
	// Coll is per kind of collective called ("barrier", "allreduce", …),
	// the calls and the time waited in them.
	Coll map[string]CollStats `json:"coll,omitempty"`
}
