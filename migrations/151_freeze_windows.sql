-- Freeze windows: per environment, times in which deploys do not start.
-- A window is a five-field cron expression in UTC with a duration (every
-- fire opens it for duration_seconds), or a fixed interval [starts_at,
-- ends_at). A deploy started in a window waits until it ends (a run
-- 'waiting' whose job is scheduled at the end) or, with refuse, is refused.
CREATE TABLE freeze_windows (
    id               bigserial PRIMARY KEY,
    environment_id   bigint NOT NULL REFERENCES environments (id) ON DELETE CASCADE,
    position         integer NOT NULL,
    cron             text NOT NULL DEFAULT '',
    duration_seconds bigint NOT NULL DEFAULT 0 CHECK (duration_seconds >= 0),
    starts_at        timestamptz,
    ends_at          timestamptz,
    refuse           boolean NOT NULL DEFAULT false,
    CHECK ((cron <> '' AND duration_seconds > 0 AND starts_at IS NULL AND ends_at IS NULL)
        OR (cron = '' AND starts_at IS NOT NULL AND ends_at > starts_at)),
    UNIQUE (environment_id, position)
);
