-- Runs: deploys, reconciles, backups and restores of one environment, each
-- an ordered list of checkpoints. Every change to a run or a checkpoint is
-- also appended to run_events with a per-run sequence number (1, 2, 3 ...
-- without gaps) in the same transaction, and announced with
-- NOTIFY run_events '<run id>:<seq>', so a watcher on any replica resumes
-- exactly where it left off. Run-level changes that the environment page
-- shows (run started or finished, service state) are also appended to
-- environment_events with a per-environment sequence number and announced
-- with NOTIFY environment_events '<environment id>:<seq>'.

CREATE TABLE runs (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    environment_id   bigint NOT NULL REFERENCES environments (id) ON DELETE CASCADE,
    kind             text NOT NULL CHECK (kind IN ('deploy', 'reconcile', 'backup', 'restore')),
    status           text NOT NULL DEFAULT 'pending' CHECK (status IN
                     ('pending', 'running', 'waiting', 'succeeded', 'succeeded-with-warnings', 'failed', 'cancelled')),
    -- revision_id is what a deploy activates; from_revision_id what was
    -- active when it was planned (NULL on a first deploy).
    revision_id      bigint REFERENCES revisions (id),
    from_revision_id bigint REFERENCES revisions (id),
    -- reason says why a run failed or was cancelled.
    reason           text NOT NULL DEFAULT '',
    cancel_requested boolean NOT NULL DEFAULT false,
    created_by       bigint REFERENCES users (id) ON DELETE SET NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    finished_at      timestamptz,
    -- last_seq is the sequence number of the run's newest event.
    last_seq         integer NOT NULL DEFAULT 0,
    detail           jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX runs_environment_idx ON runs (environment_id, id DESC);
CREATE INDEX runs_unfinished_idx ON runs (environment_id) WHERE finished_at IS NULL;

CREATE TABLE run_checkpoints (
    run_id      bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    position    integer NOT NULL,
    -- kind: check-values, provision-database, provision-bucket, build,
    -- import, release, issue-tls, rollout, activate, snapshot, restore, ...
    kind        text NOT NULL,
    name        text NOT NULL,
    status      text NOT NULL DEFAULT 'pending' CHECK (status IN
                ('pending', 'running', 'waiting', 'succeeded', 'failed', 'skipped')),
    started_at  timestamptz,
    finished_at timestamptz,
    warning     text NOT NULL DEFAULT '',
    detail      jsonb NOT NULL DEFAULT '{}',
    PRIMARY KEY (run_id, position)
);

CREATE TABLE run_events (
    run_id     bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seq        integer NOT NULL CHECK (seq > 0),
    at         timestamptz NOT NULL DEFAULT now(),
    -- checkpoint is the position of the checkpoint that changed, NULL for a
    -- run-level change.
    checkpoint integer,
    payload    jsonb NOT NULL,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE environment_events (
    environment_id bigint NOT NULL REFERENCES environments (id) ON DELETE CASCADE,
    seq            bigint NOT NULL CHECK (seq > 0),
    at             timestamptz NOT NULL DEFAULT now(),
    run_id         bigint REFERENCES runs (id) ON DELETE SET NULL,
    payload        jsonb NOT NULL,
    PRIMARY KEY (environment_id, seq)
);
ALTER TABLE environments ADD COLUMN last_event_seq bigint NOT NULL DEFAULT 0;
