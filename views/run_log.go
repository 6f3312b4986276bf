package views

import (
	"github.com/skali-dev/studio/humanize"
	"strconv"
	"strings"
	"time"

	"github.com/skali-dev/studio/store"
)

// TimelineView is where a checkpoint sits on its run's timeline: when it
// started and ended (clock times, UTC) and its bar across the run, in
// thousandths of the run's span (X from the run's start, W its length).
type TimelineView struct {
	Started, Ended string
	// StartedAt and EndedAt (RFC 3339; EndedAt empty while it runs) let
	// the page's script redraw the bar as the run goes on.
	StartedAt, EndedAt string
	// RunStartedAt (RFC 3339) is when the run started: the bar's origin.
	RunStartedAt string
	X, W         int
	// Running: the checkpoint has not ended (its bar reaches now).
	Running bool
}

// LogLineView is one line of a run's log under its checkpoint.
type LogLineView struct {
	N int64
	// At is the line's time of day (UTC, with milliseconds); Datetime the
	// same as RFC 3339.
	At, Datetime string
	Text         string
	// Hidden: the line does not match the page's filter (it is there, so
	// that emptying the filter and #L<n> links find it).
	Hidden bool
}

// LogView is the log of one checkpoint on the run page.
type LogView struct {
	Lines []LogLineView
	// Total is how many lines the checkpoint has (all in Lines); Shown
	// how many match the page's filter.
	Total, Shown int
	// Open: the log shows unfolded (a step under way shows its tail, a
	// failed step its last lines, a short log all of it).
	Open bool
	// Live: the step is under way (the page keeps its tail in view).
	Live bool
}

// RunLogFilter is the most a filter of the run page's log may hold.
const RunLogFilter = 200

// logOpenLines is how long a finished step's log may be and still show
// unfolded.
const logOpenLines = 20

// lineID is the element id of log line n: the anchor #L<n>.
func lineID(n int64) string { return "L" + strconv.FormatInt(n, 10) }

// clockMillis is a log line's time of day.
func clockMillis(t time.Time) string { return humanize.TimeOfDay(t, true) }

// newTimeline places checkpoint cp on the timeline of run, as of now.
func newTimeline(run *store.Run, cp store.Checkpoint, now time.Time) *TimelineView {
	if cp.StartedAt == nil {
		return nil
	}
	tv := &TimelineView{Started: humanize.TimeOfDay(*cp.StartedAt, false), StartedAt: cp.StartedAt.UTC().Format(time.RFC3339Nano)}
	end := now
	if cp.FinishedAt != nil {
		end = *cp.FinishedAt
		tv.Ended, tv.EndedAt = humanize.TimeOfDay(*cp.FinishedAt, false), cp.FinishedAt.UTC().Format(time.RFC3339Nano)
	} else if store.RunFinished(run.Status) && run.FinishedAt != nil {
		end = *run.FinishedAt
	} else {
		tv.Running = true
	}
	if run.StartedAt == nil {
		return tv
	}
	tv.RunStartedAt = run.StartedAt.UTC().Format(time.RFC3339Nano)
	runEnd := now
	if run.FinishedAt != nil {
		runEnd = *run.FinishedAt
	}
	if end.After(runEnd) {
		runEnd = end
	}
	span := runEnd.Sub(*run.StartedAt)
	if span <= 0 {
		tv.W = 1000
		return tv
	}
	from := max(cp.StartedAt.Sub(*run.StartedAt), 0)
	tv.X = int(from * 1000 / span)
	tv.W = max(int(end.Sub(*cp.StartedAt)*1000/span), 4)
	tv.X = min(tv.X, 1000-tv.W)
	return tv
}

// AttachLogs puts the run's log lines under their checkpoints, marking
// hidden those that do not contain filter (any case) when it is set.
func AttachLogs(cps []CheckpointView, lines []store.LogLine, filter string) {
	byPos := make(map[int]*CheckpointView, len(cps))
	for i := range cps {
		byPos[cps[i].Position] = &cps[i]
	}
	f := strings.ToLower(filter)
	for _, l := range lines {
		cp := byPos[l.Position]
		if cp == nil {
			continue
		}
		if cp.Log == nil {
			cp.Log = &LogView{}
		}
		cp.Log.Total++
		hidden := f != "" && !strings.Contains(strings.ToLower(l.Text), f)
		if !hidden {
			cp.Log.Shown++
		}
		cp.Log.Lines = append(cp.Log.Lines, LogLineView{N: l.N, At: clockMillis(l.At), Datetime: l.At.UTC().Format(time.RFC3339Nano), Text: l.Text, Hidden: hidden})
	}
	for i := range cps {
		cp := &cps[i]
		if cp.Log == nil {
			continue
		}
		cp.Log.Live = cp.Status == store.CheckpointRunning || cp.Status == store.CheckpointWaiting
		cp.Log.Open = cp.Log.Live || cp.Status == store.CheckpointFailed || cp.Log.Total <= logOpenLines || filter != ""
	}
}

// LastLine is the number of the last log line of the checkpoint at
// position (0 when it has none).
func LastLine(lines []store.LogLine, position int) int64 {
	var n int64
	for _, l := range lines {
		if l.Position == position {
			n = l.N
		}
	}
	return n
}
