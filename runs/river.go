package runs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/skali-dev/studio/store"
)

// RunArgs is the River job that executes one run.
type RunArgs struct {
	RunID int64 `json:"run_id"`
}

// Kind implements river.JobArgs.
func (RunArgs) Kind() string { return "studio_run" }

// ReconcileArgs is the periodic River job that queues a reconcile of each
// environment with deferred or failed domains (Service.QueueReconciles).
type ReconcileArgs struct{}

// Kind implements river.JobArgs.
func (ReconcileArgs) Kind() string { return "studio_reconcile" }

// BackupScheduleArgs is the periodic River job that claims due backup
// fires (runs/backup.go, Service.FireDueBackups).
type BackupScheduleArgs struct{}

// Kind implements river.JobArgs.
func (BackupScheduleArgs) Kind() string { return "studio_backup_schedule" }

type backupScheduleWorker struct {
	river.WorkerDefaults[BackupScheduleArgs]
	service *Service
}

func (w *backupScheduleWorker) Work(ctx context.Context, job *river.Job[BackupScheduleArgs]) error {
	return w.service.FireDueBackups(ctx)
}

type runWorker struct {
	river.WorkerDefaults[RunArgs]
	runner  *Runner
	timeout time.Duration
}

// Timeout is the rescue time: River rescues a job only once it has been
// running longer than its timeout, which is how the run of a killed
// process resumes. A live execution yields its job well before (see
// Runner.YieldAfter); a release command outlives a cancelled context.
func (w *runWorker) Timeout(*river.Job[RunArgs]) time.Duration { return w.timeout }

func (w *runWorker) Work(ctx context.Context, job *river.Job[RunArgs]) error {
	res, err := w.runner.Execute(ctx, job.Args.RunID)
	if errors.Is(err, ErrTakenOver) {
		return nil
	}
	if err != nil {
		return err
	}
	if !res.Finished {
		// Wait in the database, not in a goroutine.
		return river.JobSnooze(max(time.Until(res.WaitUntil), time.Second))
	}
	return nil
}

type reconcileWorker struct {
	river.WorkerDefaults[ReconcileArgs]
	service *Service
}

func (w *reconcileWorker) Work(ctx context.Context, job *river.Job[ReconcileArgs]) error {
	return w.service.QueueReconciles(ctx)
}

// QueueReconcile is the River queue of reconciles: the periodic job, each
// environment's probes and the reconcile runs. Its own worker count
// (RiverOptions.ReconcileWorkers) is all they can take, so silent domains
// never hold up deploys, backups or restores on the default queue.
const QueueReconcile = "reconcile"

// runInsertOpts returns how the job executing a run of kind is inserted:
// reconcile runs on the reconcile queue, every other run on the default
// queue. Whatever inserts a run's job again uses it too.
func runInsertOpts(kind store.RunKind) *river.InsertOpts {
	o := &river.InsertOpts{MaxAttempts: 100}
	if kind == store.RunReconcile {
		o.Queue = QueueReconcile
	}
	return o
}

// RiverOptions tune the River client.
type RiverOptions struct {
	// Workers is how many runs one process executes at once (default 20).
	Workers int
	// ReconcileWorkers is how many reconciles one process works on at once,
	// besides Workers (default 4).
	ReconcileWorkers int
	// ReconcileInterval is how often deferred and failed domains are
	// re-probed (default 1m; negative turns the reconciler off).
	ReconcileInterval time.Duration
	// RescueAfter is how long a job may look running before another
	// process takes it over, which is how a run of a killed process
	// resumes (default 15m). Keep it above the longest release command
	// and rollout timeout: a single step that runs longer may be resumed
	// while it still runs.
	RescueAfter time.Duration
	// BackupInterval is how often due backup fires are claimed (default
	// 1m, the finest a cron expression fires; negative turns it off).
	BackupInterval time.Duration
	// PollInterval is how often idle processes look for jobs besides
	// LISTEN/NOTIFY (River's default when zero).
	PollInterval time.Duration
	// Lease is how long a run's lease lasts unless its executor renews it
	// (default DefaultLease): a killed executor's run is shown as
	// "executor lost" and taken over by a live process that long after its
	// last renewal, plus at most a quarter of it.
	Lease time.Duration
	// ValueRetention is how long earlier value versions are kept after a
	// newer one replaced it (default store.DefaultValueRetention); they are
	// pruned hourly, always keeping store.KeptValueVersions of each name.
	ValueRetention time.Duration
	// Webhooks tune webhook deliveries (runs/webhook.go).
	Webhooks WebhookOptions
	// WebhookSweepInterval is how often backup alarms are compared with
	// those announced and deliveries missing their job are queued (default
	// 1m; negative turns it off).
	WebhookSweepInterval time.Duration
}

// StartRiver starts the River client that executes runs and reconciles:
// every Studio process runs one, River hands each job to exactly one.
func (s *Service) StartRiver(ctx context.Context, o RiverOptions) error {
	if o.Workers <= 0 {
		o.Workers = 20
	}
	if o.ReconcileWorkers <= 0 {
		o.ReconcileWorkers = 4
	}
	if o.ReconcileInterval == 0 {
		o.ReconcileInterval = time.Minute
	}
	if o.RescueAfter <= 0 {
		o.RescueAfter = 15 * time.Minute
	}
	if o.Lease > 0 {
		s.Runner.Lease = o.Lease
	}
	workers := river.NewWorkers()
	s.Runner.YieldAfter = min(time.Minute, o.RescueAfter/2)
	river.AddWorker(workers, &runWorker{runner: s.Runner, timeout: o.RescueAfter})
	river.AddWorker(workers, &reconcileWorker{service: s})
	river.AddWorker(workers, &reconcileEnvironmentWorker{service: s})
	river.AddWorker(workers, &backupScheduleWorker{service: s})
	river.AddWorker(workers, &approvalExpiryWorker{service: s})
	webhooks := o.Webhooks
	webhooks.defaults()
	webhooks.leases = &webhookLeases{cfg: s.DB.Pool.Config().ConnConfig}
	river.AddWorker(workers, &webhookWorker{service: s, opts: &webhooks})
	river.AddWorker(workers, &webhookSweepWorker{service: s, opts: &webhooks})
	if o.WebhookSweepInterval == 0 {
		o.WebhookSweepInterval = time.Minute
	}
	if o.BackupInterval == 0 {
		o.BackupInterval = time.Minute
	}
	cfg := &river.Config{
		Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: o.Workers},
			QueueReconcile: {MaxWorkers: o.ReconcileWorkers}, QueueWebhooks: {MaxWorkers: webhooks.Workers}},
		Workers:              workers,
		RescueStuckJobsAfter: o.RescueAfter,
		// Steps carry their own timeouts (release command, rollout), and a
		// long execution yields its job every minute.
		JobTimeout:        -1,
		Logger:            s.Logger,
		FetchPollInterval: o.PollInterval,
	}
	if o.PollInterval > 0 {
		cfg.FetchCooldown = min(o.PollInterval, 100*time.Millisecond)
	}
	if o.ReconcileInterval > 0 {
		s.ReconcileInterval = o.ReconcileInterval
		cfg.PeriodicJobs = []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(o.ReconcileInterval),
			func() (river.JobArgs, *river.InsertOpts) { return ReconcileArgs{}, reconcileInsertOpts() }, nil)}
	}
	if o.BackupInterval > 0 {
		// Every process schedules it; the fires are claimed in the database.
		var every river.PeriodicSchedule = river.PeriodicInterval(o.BackupInterval)
		if o.BackupInterval == time.Minute {
			every = minuteStarts{}
		}
		cfg.PeriodicJobs = append(cfg.PeriodicJobs, river.NewPeriodicJob(every,
			func() (river.JobArgs, *river.InsertOpts) { return BackupScheduleArgs{}, nil }, &river.PeriodicJobOpts{RunOnStart: true}))
	}
	river.AddWorker(workers, &valueRetentionWorker{service: s, retention: o.ValueRetention})
	cfg.PeriodicJobs = append(cfg.PeriodicJobs, river.NewPeriodicJob(river.PeriodicInterval(time.Hour),
		func() (river.JobArgs, *river.InsertOpts) { return ValueRetentionArgs{}, nil }, &river.PeriodicJobOpts{RunOnStart: true}))
	if o.WebhookSweepInterval > 0 {
		cfg.PeriodicJobs = append(cfg.PeriodicJobs, river.NewPeriodicJob(river.PeriodicInterval(o.WebhookSweepInterval),
			func() (river.JobArgs, *river.InsertOpts) {
				return WebhookSweepArgs{}, &river.InsertOpts{Queue: QueueWebhooks}
			}, nil))
	}
	client, err := river.NewClient(riverpgxv5.New(s.DB.Pool), cfg)
	if err != nil {
		return fmt.Errorf("runs: river: %w", err)
	}
	s.river, s.webhooks = client, &webhooks
	s.DB.SetWebhookEnqueuer(s.enqueueWebhook)
	// Not ctx: a cancelled Start context cancels every running job at
	// once, which is a crash, not a stop. StopRiver stops it gracefully.
	if err := client.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("runs: river: %w", err)
	}
	s.river = client
	superviseCtx, stopSupervising := context.WithCancel(context.WithoutCancel(ctx))
	s.stopSupervising = stopSupervising
	s.supervising.Go(func() { s.superviseLeases(superviseCtx) })
	s.supervising.Go(func() { s.superviseWebhooks(superviseCtx) })
	return nil
}

// StopRiver stops taking jobs and lets running executions reach their
// next safe point, where they record what they finished and give their
// run back for another process to resume. When ctx ends first, it cancels
// them: a step in flight then stops (and is resumed elsewhere), while what
// is already done is still recorded.
func (s *Service) StopRiver(ctx context.Context) error {
	if s.river == nil {
		return nil
	}
	s.Runner.Stop()
	defer func() {
		s.stopSupervising()
		s.supervising.Wait()
		if s.webhooks != nil && s.webhooks.leases != nil {
			s.webhooks.leases.close()
		}
	}()
	if err := s.river.Stop(ctx); err != nil {
		s.Logger.Warn("shutdown: runs did not reach a safe point in time; stopping them", "err", err)
		hard, cancel := context.WithTimeout(context.Background(), store.RetryWindow)
		defer cancel()
		return s.river.StopAndCancel(hard)
	}
	return nil
}

// superviseLeases looks for runs whose executor is gone every quarter of a
// lease, and hands each to a new job that any live process may take (this
// one included). Every process does it; the database gives each lost run
// to one of them.
func (s *Service) superviseLeases(ctx context.Context) {
	t := time.NewTicker(s.Runner.lease() / 4)
	defer t.Stop()
	for {
		if _, err := s.TakeOverLostRuns(ctx); err != nil && ctx.Err() == nil {
			s.Logger.Warn("take over runs whose executor is gone", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// superviseWebhooks looks for delivery attempts lost with their process
// every lostWebhookAfter and sends them again (TakeOverLostWebhooks).
func (s *Service) superviseWebhooks(ctx context.Context) {
	t := time.NewTicker(lostWebhookAfter)
	defer t.Stop()
	for {
		if _, err := s.TakeOverLostWebhooks(ctx); err != nil && ctx.Err() == nil {
			s.Logger.Warn("take over webhook attempts lost with their process", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// TakeOverLostRuns marks every run whose lease expired "executor lost",
// cancels the job its lost executor held and enqueues a new one, in one
// transaction per pass (see store.TakeOverLostRuns). It returns the runs it
// took over.
func (s *Service) TakeOverLostRuns(ctx context.Context) ([]int64, error) {
	if err := s.expireDeadExecutors(ctx); err != nil {
		return nil, err
	}
	var requeue func(ctx context.Context, tx pgx.Tx, l store.LostRun) (int64, error)
	if s.river != nil {
		requeue = s.requeueLost
	}
	ids, err := s.DB.TakeOverLostRuns(ctx, requeue)
	for _, id := range ids {
		s.Logger.Warn("run executor lost; the run is resumed by a live process", "run", id)
	}
	return ids, err
}

// expireDeadExecutors ends at once the leases held by processes of this
// machine that no longer exist (a Studio killed and started again on the
// same machine), so their runs are taken over now rather than when the
// leases run out.
func (s *Service) expireDeadExecutors(ctx context.Context) error {
	leases, err := s.DB.LiveRunLeases(ctx)
	if err != nil {
		return err
	}
	for _, l := range leases {
		if deadHere(l.Owner) {
			if err := s.DB.ExpireRunLease(ctx, l.RunID, l.Owner); err != nil {
				return err
			}
		}
	}
	return nil
}

// requeueLost cancels the job a lost executor held and enqueues a new one
// for its run, inside the transaction that marks the run lost.
func (s *Service) requeueLost(ctx context.Context, tx pgx.Tx, l store.LostRun) (int64, error) {
	if l.JobID != nil {
		if _, err := s.river.JobCancelTx(ctx, tx, *l.JobID); err != nil && !errors.Is(err, river.ErrNotFound) {
			return 0, err
		}
	}
	res, err := s.river.InsertTx(ctx, tx, RunArgs{RunID: l.ID}, runInsertOpts(l.Kind))
	if err != nil {
		return 0, err
	}
	return res.Job.ID, nil
}

// enqueue returns the function that inserts the job of a deploy, backup or
// restore run inside the run's own transaction, or nil without a River
// client.
func (s *Service) enqueue() func(ctx context.Context, tx pgx.Tx, runID int64) (int64, error) {
	return s.enqueueKind("")
}

// enqueueKind is enqueue for a run of kind, on its queue (runInsertOpts).
func (s *Service) enqueueKind(kind store.RunKind) func(ctx context.Context, tx pgx.Tx, runID int64) (int64, error) {
	if s.river == nil {
		return nil
	}
	return func(ctx context.Context, tx pgx.Tx, runID int64) (int64, error) {
		res, err := s.river.InsertTx(ctx, tx, RunArgs{RunID: runID}, runInsertOpts(kind))
		if err != nil {
			return 0, err
		}
		return res.Job.ID, nil
	}
}

// StopAndCancelRiver stops at once, cancelling running jobs: what a
// process that dies in the middle of a step leaves behind (tests).
func (s *Service) StopAndCancelRiver(ctx context.Context) error {
	if s.river == nil {
		return nil
	}
	return s.river.StopAndCancel(ctx)
}

// minuteStarts is a River schedule that runs a second after every minute
// starts. Cron expressions fire on whole minutes, so due fires are claimed
// within about a second of their time rather than up to a minute after it,
// as an interval counted from when the process started would.
type minuteStarts struct{}

// Next implements river.PeriodicSchedule.
func (minuteStarts) Next(t time.Time) time.Time {
	next := t.Truncate(time.Minute).Add(time.Second)
	if !next.After(t) {
		next = next.Add(time.Minute)
	}
	return next
}
