-- Protected environments: a deploy of an environment with a protection
-- rule is a run 'waiting' for approval, with no job, until enough people
-- approved the digest of its plan; the job is inserted in the transaction
-- of the approval that meets the rule. A rejected run ends 'rejected'.
ALTER TABLE runs DROP CONSTRAINT runs_status_check;
ALTER TABLE runs ADD CONSTRAINT runs_status_check CHECK (status IN
    ('pending', 'running', 'waiting', 'succeeded', 'succeeded-with-warnings', 'failed', 'cancelled', 'rejected'));

-- plan_digest is the digest of the plan a waiting run asks approval for
-- (empty: the run needs no approval).
ALTER TABLE runs ADD COLUMN plan_digest text NOT NULL DEFAULT '';

CREATE TABLE protection_rules (
    environment_id  bigint PRIMARY KEY REFERENCES environments (id) ON DELETE CASCADE,
    approvals       integer NOT NULL CHECK (approvals BETWEEN 1 AND 6),
    -- approver_role: a role whose members approve ('deployer' or 'admin'),
    -- or '' when only approver_users do.
    approver_role   text NOT NULL DEFAULT '' CHECK (approver_role IN ('', 'deployer', 'admin')),
    approver_users  bigint[] NOT NULL DEFAULT '{}',
    self_approval   boolean NOT NULL DEFAULT false,
    wait_seconds    bigint NOT NULL DEFAULT 0 CHECK (wait_seconds BETWEEN 0 AND 2592000),
    expires_seconds bigint NOT NULL DEFAULT 604800 CHECK (expires_seconds > 0),
    bypass          text NOT NULL DEFAULT 'nobody' CHECK (bypass IN ('nobody', 'admins')),
    updated_by      bigint REFERENCES users (id) ON DELETE SET NULL,
    updated_at      timestamptz NOT NULL DEFAULT now()
);

-- One approval per person and run, of one digest: two approvers at once
-- count once each; one person twice counts once.
CREATE TABLE run_approvals (
    run_id     bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    user_id    bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    digest     text NOT NULL,
    comment    text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, user_id)
);
