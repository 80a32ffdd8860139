package job

import (
	"fmt"
	"strconv"
	"strings"

	"sperli/codes"
)

// Failure is one entry of the test-only failure schedule of SPEC §9.5,
// SPERLI_TEST_FAILURE_SCHEDULE=GEN:SLOT[@POINT],…: in generation Inc, slot
// Rank (the rank at launch, for a job without spares) dies at Point. It exists to make failure tests reproducible; no
// production job sets it.
//
// Points (K counts from 1 within the incarnation):
//
//	(none)          right after the rank's first completed checkpoint, or at
//	                its first collective if it never called use_checkpoints
//	before-ckpt-K   as its K-th checkpoint starts
//	mid-ckpt-K      in its K-th checkpoint, after its own file, before COMMIT
//	after-ckpt-K    right after its K-th checkpoint completed
//	collective-K    as its K-th collective starts
//	agree-1         as it begins the agreement on the next generation
//	                (in-place recovery, SPEC §10.2)
//	mute-agree-1    not a death: as it begins that agreement the slot
//	                goes mute in it (sends no agreement message, answers
//	                none) while it lives and heartbeats — the agreement
//	                stalls, which the launcher's deadline must end
//	stop-collective-K
//	                not a death: as its K-th collective starts the rank
//	                process stops itself (SIGSTOP), as a frozen or swapped
//	                out process would; whoever runs the test continues it
//	                (SIGCONT) — before its silence limit, or after it, when
//	                the others have declared it lost. A rank run inside
//	                another program (Job.Die set) dies there instead
//	work-done-K     as it gives a work queue its K-th result, before the
//	                master has it (SPEC §19)
//	join-K          in its join, once K of the links the join waits for
//	                (its tree and ring neighbours, in the order it waits
//	                for them) are up: a loss while the others still join
type Failure struct {
	Inc   uint32
	Rank  int
	Point string // "" for the default
	K     int
}

// MaxFailures is the most entries a schedule may have.
const MaxFailures = 64

var failurePoints = map[string]bool{"before-ckpt": true, "mid-ckpt": true, "after-ckpt": true, "collective": true, "agree": true, "mute-agree": true, "stop-collective": true, "work-done": true, "join": true}

// ParseFailures parses a failure schedule strictly: unique (incarnation,
// rank) pairs of non-negative numbers, known points, at most 64 entries.
// An error says which entry is wrong.
func ParseFailures(s string) ([]Failure, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []Failure
	seen := map[[2]int64]bool{}
	for i, item := range strings.Split(s, ",") {
		bad := func(why string) error {
			return fmt.Errorf("failure schedule entry %d %q: %s", i+1, item, why)
		}
		var f Failure
		spec, point, hasPoint := strings.Cut(item, "@")
		incS, rankS, ok := strings.Cut(spec, ":")
		if !ok {
			return nil, bad("want INC:RANK[@POINT]")
		}
		inc, err := strconv.ParseUint(incS, 10, 32)
		if err != nil || incS == "" || incS[0] == '+' {
			return nil, bad("incarnation is not a number 0 or more")
		}
		rank, err := strconv.ParseUint(rankS, 10, 31)
		if err != nil || rankS == "" || rankS[0] == '+' {
			return nil, bad("rank is not a number 0 or more")
		}
		f.Inc, f.Rank = uint32(inc), int(rank)
		if hasPoint {
			name, kS, ok := strings.Cut(point, "-")
			// before-ckpt-K: the name itself has a dash.
			if i := strings.LastIndex(point, "-"); i > 0 {
				name, kS, ok = point[:i], point[i+1:], true
			}
			k, err := strconv.Atoi(kS)
			if !ok || !failurePoints[name] || err != nil || k < 1 || kS[0] == '+' {
				return nil, bad("point is not one of before-ckpt-K, mid-ckpt-K, after-ckpt-K, collective-K, agree-K, mute-agree-K, stop-collective-K, work-done-K, join-K with K ≥ 1")
			}
			f.Point, f.K = name, k
		}
		key := [2]int64{int64(f.Inc), int64(f.Rank)}
		if seen[key] {
			return nil, bad("incarnation and rank given twice")
		}
		seen[key] = true
		out = append(out, f)
		if len(out) > MaxFailures {
			return nil, fmt.Errorf("failure schedule has more than %d entries", MaxFailures)
		}
	}
	return out, nil
}

func checkFailures(s string) error {
	if _, err := ParseFailures(s); err != nil {
		return codes.New(codes.JobMalformed, "job description: %v", err)
	}
	return nil
}
