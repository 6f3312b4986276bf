-- Backups: one schedule per environment, and every snapshot or fire of a
-- schedule. A scheduled fire is claimed through the unique key
-- (environment_id, scheduled_at): however many Studio processes look at a
-- due fire, one row wins and only that row gets a run.

CREATE TABLE backup_schedules (
    environment_id bigint PRIMARY KEY REFERENCES environments (id) ON DELETE CASCADE,
    -- cron is a five-field expression evaluated in UTC.
    cron           text NOT NULL,
    keep_ms        bigint NOT NULL CHECK (keep_ms > 0),
    keep_text      text NOT NULL,
    -- interval_ms is the longest gap between fires (a weekday schedule's is
    -- the weekend): no good snapshot within twice it raises the alarm.
    interval_ms    bigint NOT NULL,
    -- considered_until is the newest fire time already handled (snapshot or
    -- skipped); it only moves forward, so a clock stepping back fires nothing twice.
    considered_until timestamptz NOT NULL,
    updated_by     bigint REFERENCES users (id) ON DELETE SET NULL,
    updated_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE backups (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    environment_id bigint NOT NULL REFERENCES environments (id) ON DELETE CASCADE,
    origin         text NOT NULL CHECK (origin IN ('manual', 'scheduled')),
    -- scheduled_at is the fire time of a scheduled snapshot or skipped fire.
    scheduled_at   timestamptz,
    -- run_id is the backup run; NULL for a skipped fire.
    run_id         bigint REFERENCES runs (id) ON DELETE SET NULL,
    -- skipped says why a fire took no snapshot ('' when it did).
    skipped        text NOT NULL DEFAULT '',
    -- name is the snapshot's directory under <target>/<project>/<environment>/.
    name           text NOT NULL DEFAULT '',
    target         text NOT NULL DEFAULT '',
    -- keep_ms is the retention in force when a scheduled snapshot was taken.
    keep_ms        bigint,
    created_at     timestamptz NOT NULL DEFAULT now(),
    deleted_at     timestamptz,
    UNIQUE (environment_id, scheduled_at)
);
CREATE INDEX backups_environment_idx ON backups (environment_id, id DESC);
CREATE UNIQUE INDEX backups_run_idx ON backups (run_id);
