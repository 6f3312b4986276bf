-- Indexes and summaries that keep pages and calls as fast on an
-- installation after a year as on day one (issue 41).

-- The metrics' queued runs: the unfinished runs alone, not a scan of all.
CREATE INDEX runs_queued_idx ON runs (status) WHERE status IN ('pending', 'running', 'waiting');

-- An environment's active release: its newest successful deploy, read
-- from the top of this index instead of sorting all its runs.
CREATE INDEX runs_release_idx ON runs (environment_id, finished_at DESC, id DESC)
    WHERE kind = 'deploy' AND status IN ('succeeded', 'succeeded-with-warnings') AND revision_id IS NOT NULL;

-- The runs list filtered by kind or status, deep pages included.
CREATE INDEX runs_environment_kind_idx ON runs (environment_id, kind, id DESC);
CREATE INDEX runs_environment_status_idx ON runs (environment_id, status, id DESC);

-- An environment's last scheduled fire and its newest kept snapshot.
CREATE INDEX backups_scheduled_idx ON backups (environment_id, scheduled_at DESC)
    WHERE origin = 'scheduled' AND deleted_at IS NULL;

-- Backup alarms: each schedule keeps whether its last scheduled fire was
-- skipped, failed or cancelled (fire_alarm), and from when no successful
-- snapshot within twice its interval raises the alarm (alarm_from), kept
-- true by triggers on schedules, backups and backup runs. The alarms are
-- then the schedules with fire_alarm or alarm_from <= now: an index read
-- of the few in alarm, not a computation for every schedule.
ALTER TABLE backup_schedules ADD COLUMN fire_alarm boolean NOT NULL DEFAULT false;
ALTER TABLE backup_schedules ADD COLUMN alarm_from timestamptz;

CREATE FUNCTION backup_schedule_alarm() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.fire_alarm := COALESCE((
        SELECT b.skipped <> '' OR COALESCE(r.status IN ('failed', 'cancelled'), false)
        FROM backups b LEFT JOIN runs r ON r.id = b.run_id
        WHERE b.environment_id = NEW.environment_id AND b.origin = 'scheduled' AND b.deleted_at IS NULL
        ORDER BY b.scheduled_at DESC LIMIT 1), false);
    NEW.alarm_from := GREATEST(NEW.updated_at, (
        SELECT max(COALESCE(b.scheduled_at, b.created_at)) FROM backups b JOIN runs r ON r.id = b.run_id
        WHERE b.environment_id = NEW.environment_id AND b.deleted_at IS NULL
          AND r.status IN ('succeeded', 'succeeded-with-warnings')))
        + 2 * NEW.interval_ms * interval '1 millisecond';
    RETURN NEW;
END
$$;
CREATE TRIGGER backup_schedules_alarm BEFORE INSERT OR UPDATE ON backup_schedules
    FOR EACH ROW EXECUTE FUNCTION backup_schedule_alarm();

-- A change to an environment's backups or to a backup run's outcome
-- refreshes its schedule's alarm (the update runs the trigger above).
CREATE FUNCTION refresh_backup_alarm() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    env bigint;
BEGIN
    IF TG_OP = 'DELETE' THEN
        env := OLD.environment_id;
    ELSE
        env := NEW.environment_id;
    END IF;
    UPDATE backup_schedules SET environment_id = environment_id WHERE environment_id = env;
    RETURN NULL;
END
$$;
CREATE TRIGGER backups_refresh_alarm AFTER INSERT OR UPDATE OR DELETE ON backups
    FOR EACH ROW EXECUTE FUNCTION refresh_backup_alarm();
CREATE TRIGGER backup_runs_refresh_alarm AFTER UPDATE OF status ON runs
    FOR EACH ROW WHEN (NEW.kind = 'backup' AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION refresh_backup_alarm();

UPDATE backup_schedules SET environment_id = environment_id;
CREATE INDEX backup_schedules_fire_alarm_idx ON backup_schedules (environment_id) WHERE fire_alarm;
CREATE INDEX backup_schedules_alarm_from_idx ON backup_schedules (alarm_from);
