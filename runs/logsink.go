package runs

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/skali-dev/studio/runs/mask"
	"github.com/skali-dev/studio/runs/platform"
	"github.com/skali-dev/studio/store"
)

// How a step's log lines are written: in batches of at most
// logBatchLines, every logFlushEvery, and at the step's end.
const (
	logBatchLines = 100
	logFlushEvery = 200 * time.Millisecond
	// logPendingLines bounds the lines waiting to be written (a run keeps
	// no more than store.RunLogLineLimit anyway): past it, lines are
	// dropped until the database catches up.
	logPendingLines = store.RunLogLineLimit
	// logRawLineBytes bounds a line before it is masked (the store keeps
	// store.RunLogLineBytes of it).
	logRawLineBytes = 64 << 10
	// logCloseWait is how long Close lets a database that does not answer
	// delay the step's end before the lines still pending are dropped.
	logCloseWait = 5 * time.Second
	// logAttempt bounds one write of a batch.
	logAttempt = 5 * time.Second
)

// logMaskUnavailable replaces the lines of a step whose values could not
// be read: without them nothing can be masked, so nothing is kept.
const logMaskUnavailable = "Log lines of this step are not kept: the environment's values could not be read to mask them."

// LogSink receives the log lines of one checkpoint's platform step (it is
// the step's platform output): it masks each line with the environment's
// values, stamps it with its time and appends it to the run's log in
// batches, each with the run event that streams it. Close flushes what is
// left; lines after Close are dropped, and so are lines after the log was
// cut at its bound or after a batch could not be written.
type LogSink struct {
	db       *store.DB
	logger   *slog.Logger
	runID    int64
	position int
	lease    string
	// masker hides the values; it is made (values are decrypted) with the
	// step's first line, so a step that writes none costs nothing.
	makeMasker func() *mask.Masker
	masker     *mask.Masker
	// refused: the values could not be read; the sink keeps one line
	// saying so instead of any line.
	refused bool
	now     func() time.Time
	// ctx is cancelled when Close has waited logCloseWait: writes stop.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	pending []store.NewLogLine
	closed  bool
	// stopped: the log was cut, the run taken over or a batch failed:
	// no later line is kept.
	stopped bool
	dropped int
	kick    chan struct{}
	done    chan struct{}
}

// newLogSink starts the sink of a step: makeMasker returns what hides the
// environment's values (nil when they could not be read: no line is kept
// then).
func newLogSink(db *store.DB, logger *slog.Logger, runID int64, position int, lease string, makeMasker func() *mask.Masker) *LogSink {
	s := &LogSink{db: db, logger: logger, runID: runID, position: position, lease: lease, makeMasker: makeMasker,
		now: db.Now, kick: make(chan struct{}, 1), done: make(chan struct{})}
	if s.logger == nil {
		s.logger = slog.Default()
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	go s.run()
	return s
}

// Line implements the platform's output: text is one line (or several,
// separated by newlines), written now.
func (s *LogSink) Line(text string) {
	if s == nil {
		return
	}
	at := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.refused || s.stopped {
		return
	}
	if s.masker == nil {
		if s.masker = s.makeMasker(); s.masker == nil {
			s.refused = true
			s.pending = append(s.pending, store.NewLogLine{At: at, Text: logMaskUnavailable})
			return
		}
	}
	// A line is masked as it was printed, then cleaned as the store cleans
	// it (mask.Clean: NUL, carriage returns and invalid UTF-8 go) and
	// masked again: a value holding such bytes is found as it was printed,
	// a value split by them is found once they are gone. (Carriage returns
	// and NUL bytes at the text's end are trimmed with its newlines, as
	// cleaning would leave no more of them.)
	for _, l := range strings.Split(strings.TrimRight(text, "\n\r\x00"), "\n") {
		if len(s.pending) >= logPendingLines {
			s.dropped++
			continue
		}
		var masked string
		if len(l) > logRawLineBytes {
			cut := logRawLineBytes
			for cut > 0 && !utf8.RuneStart(l[cut]) {
				cut--
			}
			masked = s.masker.MaskCut(mask.Clean(s.masker.MaskCut(l[:cut]))) + "…"
		} else {
			masked = s.masker.Mask(mask.Clean(s.masker.Mask(l)))
		}
		s.pending = append(s.pending, store.NewLogLine{At: at, Text: masked})
	}
	if len(s.pending) >= logBatchLines {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// Close writes the lines still pending and stops the sink. A database
// that does not answer holds it at most about logCloseWait: the lines
// not written by then are dropped.
func (s *LogSink) Close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	close(s.kick)
	t := time.NewTimer(logCloseWait)
	defer t.Stop()
	select {
	case <-s.done:
	case <-t.C:
		s.cancel()
		<-s.done
	}
	s.cancel()
	s.mu.Lock()
	dropped := s.dropped
	s.mu.Unlock()
	if dropped > 0 {
		s.logger.Warn("run log: lines dropped", "run", s.runID, "checkpoint", s.position, "lines", dropped)
	}
}

// run flushes every logFlushEvery, when a batch is full, and at Close:
// one goroutine writes, so lines are stored in the order they came.
func (s *LogSink) run() {
	defer close(s.done)
	t := time.NewTicker(logFlushEvery)
	defer t.Stop()
	for {
		select {
		case _, open := <-s.kick:
			s.flush()
			if !open {
				return
			}
		case <-t.C:
			s.flush()
		}
	}
}

// stop drops the pending lines and every later one.
func (s *LogSink) stop() {
	s.mu.Lock()
	s.stopped = true
	s.dropped += len(s.pending)
	s.pending = nil
	s.mu.Unlock()
}

func (s *LogSink) flush() {
	for {
		s.mu.Lock()
		n := min(len(s.pending), logBatchLines)
		batch := s.pending[:n:n]
		s.pending = s.pending[n:]
		s.mu.Unlock()
		if n == 0 {
			return
		}
		res, err := s.append(batch)
		if err != nil {
			// Lines are the step's account, not its outcome: the step goes
			// on without them.
			s.logger.Warn("run log: lines not stored", "run", s.runID, "checkpoint", s.position, "lines", n, "err", err)
			s.stop()
			return
		}
		if res.Cut || !res.Applied {
			s.stop()
			return
		}
	}
}

// append writes one batch, retrying while the database is out of reach,
// for at most store.RetryWindow and until Close gives up waiting.
func (s *LogSink) append(batch []store.NewLogLine) (store.LogAppend, error) {
	deadline := time.Now().Add(store.RetryWindow)
	wait := 100 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(s.ctx, logAttempt)
		res, err := s.db.AppendRunLog(ctx, s.runID, s.position, s.lease, batch)
		cancel()
		if !store.Transient(err) || time.Now().Add(wait).After(deadline) {
			return res, err
		}
		select {
		case <-s.ctx.Done():
			return res, err
		case <-time.After(wait):
		}
		wait = min(wait*2, 2*time.Second)
	}
}

// maskerFor returns the masker of the run's environment: every value
// stored now and every value of the run's release (a rollback hands over
// earlier versions). It returns nil when they cannot all be read, a
// version of the release no longer kept included.
func (r *Runner) maskerFor(ctx context.Context, rc *runContext) *mask.Masker {
	if r.Vault == nil {
		return mask.New(nil)
	}
	var values []string
	err := store.WithRetry(ctx, func(ctx context.Context, _ int) error {
		current, err := r.Vault.ResolveValuesForDeploy(ctx, rc.env.ID)
		if err != nil {
			return err
		}
		// A version of the release that is no longer kept may still be
		// what the platform holds and prints: without it nothing can be
		// trusted to be masked, so the step's lines are not kept (the
		// release step fails on it anyway).
		release, err := r.Vault.ResolveReleaseValues(ctx, rc.env.ID, rc.run.ID)
		if err != nil {
			clear(current)
			return err
		}
		values = values[:0]
		for _, v := range current {
			values = append(values, v)
		}
		for _, v := range release {
			values = append(values, v)
		}
		clear(current)
		clear(release)
		return nil
	})
	if err != nil {
		r.Logger.Warn("run log: values not read for masking", "run", rc.run.ID, "err", err)
		return nil
	}
	m := mask.New(values)
	clear(values)
	return m
}

// maskOutcome hides the environment's values in what a step's outcome
// says when it quotes a platform's error (its failure reason, warning and
// error, which reach the run's summary, its page and webhooks): such an
// error may quote a value. The Studio's own wording (a domain in a TLS
// warning) is left as it is. Without the values (m nil) the outcome is
// kept as it is.
func maskOutcome(m *mask.Masker, res stepResult) stepResult {
	if m == nil {
		return res
	}
	res.reason = m.Mask(res.reason)
	res.warning = m.Mask(res.warning)
	res.detail.Error = m.Mask(res.detail.Error)
	return res
}

// maskerNow returns the masker of the sink's step (made now if no line
// needed it yet), nil when the values could not be read.
func (s *LogSink) maskerNow() *mask.Masker {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.masker == nil && !s.refused {
		s.masker = s.makeMasker()
	}
	return s.masker
}

// stepLog starts the log sink of checkpoint cp's step.
// The hostname a certificate or probe step is about is public: its lines
// print it where it stands as that hostname (mask.Masker.Public), while the
// values building it stay masked everywhere else.
func (r *Runner) stepLog(ctx context.Context, rc *runContext, cp store.Checkpoint) *LogSink {
	public := stepHostnames(cp)
	return newLogSink(r.DB, r.Logger, rc.run.ID, cp.Position, rc.lease, func() *mask.Masker { return r.maskerFor(ctx, rc).Public(public...) })
}

// stepHostnames are the hostnames checkpoint cp's step is about: the
// domain of an Issue TLS certificate or a probe checkpoint.
func stepHostnames(cp store.Checkpoint) []string {
	if cp.Kind != KindIssueTLS && cp.Kind != KindProbe {
		return nil
	}
	d := DecodeCheckpointDetail(cp.Detail)
	var out []string
	if d.TLS != nil && d.TLS.Domain != "" {
		out = append(out, d.TLS.Domain)
	}
	if d.Probe != nil && d.Probe.Domain != "" {
		out = append(out, d.Probe.Domain)
	}
	return out
}

// output is where the step under way writes its log lines.
func (rc *runContext) output() platform.Output {
	if rc.out == nil {
		return platform.Discard
	}
	return rc.out
}
