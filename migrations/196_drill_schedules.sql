-- Restore drill schedules (issue 38): one row per environment whose
-- snapshots exist (or whose admins set one). cron '' turns drills off.
-- Fires are claimed under the row's lock by the backup scheduler's River
-- job, each once: considered_until moves past it in the same transaction
-- that creates the drill run. The alarm summary is kept with the row, so
-- that pages read the alarms through these indexes, never by computing
-- over every environment: last_failed_run is the last drill when it
-- failed; alarm_from is when no success would be an alarm (twice the
-- interval after the last success, or after the schedule began).
CREATE TABLE drill_schedules (
    environment_id   bigint PRIMARY KEY REFERENCES environments (id) ON DELETE CASCADE,
    cron             text NOT NULL,
    interval_ms      bigint NOT NULL,
    considered_until timestamptz NOT NULL,
    updated_by       bigint REFERENCES users (id) ON DELETE SET NULL,
    updated_at       timestamptz NOT NULL,
    last_failed_run  bigint REFERENCES runs (id) ON DELETE SET NULL,
    alarm_from       timestamptz
);
CREATE INDEX drill_schedules_due_idx ON drill_schedules (considered_until) WHERE cron <> '';
CREATE INDEX drill_schedules_alarm_from_idx ON drill_schedules (alarm_from) WHERE cron <> '';
CREATE INDEX drill_schedules_failed_idx ON drill_schedules (environment_id) WHERE last_failed_run IS NOT NULL AND cron <> '';

-- Environments with a good snapshot already drill weekly, Sunday 04:00 UTC.
INSERT INTO drill_schedules (environment_id, cron, interval_ms, considered_until, updated_at, alarm_from)
SELECT DISTINCT b.environment_id, '0 4 * * 0', 604800000, now(), now(), now() + interval '14 days'
FROM backups b JOIN runs r ON r.id = b.run_id
WHERE b.deleted_at IS NULL AND r.status IN ('succeeded', 'succeeded-with-warnings');
