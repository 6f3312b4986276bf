-- Drift (issue 39): what differs on the platform from what the Studio last
-- applied to an environment, as its processes last synced it from the
-- platform's watches. One row per environment; items are the drift now,
-- each with when it was first seen (kept while the same drift stays).
-- Every process syncs; the first to see a change writes it under the
-- row's lock with the environment's event and the drift.detected webhook,
-- so several replicas announce one change once.

CREATE TABLE environment_drift (
    environment_id bigint PRIMARY KEY REFERENCES environments(id) ON DELETE CASCADE,
    items jsonb NOT NULL DEFAULT '[]',
    updated_at timestamptz NOT NULL DEFAULT now()
);
