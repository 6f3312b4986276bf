-- The run lease: the process executing a run renews lease_expires_at every
-- few seconds. A run whose lease expired lost its executor (the process was
-- killed, or cut off from the database): it is marked executor_lost_at at
-- once, shown as "executor lost · resuming", and its job is handed to any
-- live process, which claims the lease and resumes it. orphaned stays true
-- once a run lost its executor, so a scheduled backup fire that falls while
-- it holds the environment waits for it instead of being skipped.
ALTER TABLE runs
    ADD COLUMN lease_owner      text,
    ADD COLUMN lease_expires_at timestamptz,
    ADD COLUMN executor_lost_at timestamptz,
    ADD COLUMN orphaned         boolean NOT NULL DEFAULT false;

CREATE INDEX runs_lease_idx ON runs (lease_expires_at) WHERE finished_at IS NULL AND lease_owner IS NOT NULL;

-- What the local platform's release commands came to, by run and
-- checkpoint, so a run resumed after its process stopped records a command
-- that finished as finished instead of failing it.
CREATE TABLE local_release_outcomes (
    run_id      bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    position    integer NOT NULL,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz,
    error       text,
    PRIMARY KEY (run_id, position)
);
