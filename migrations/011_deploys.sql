-- Deploys: the River job that executes each run, certificates per
-- environment and domain, and the revision a failed first deploy keeps
-- converging to.

-- job_id is the River job that executes the run (NULL for a run recorded
-- whole, such as a reconcile run noting a domain's arrival).
ALTER TABLE runs ADD COLUMN job_id bigint;

-- One row per environment and hostname the environment's routes use.
CREATE TABLE certificates (
    environment_id     bigint NOT NULL REFERENCES environments (id) ON DELETE CASCADE,
    domain             text NOT NULL,
    -- route names the route the domain belongs to ("web / public",
    -- "web / public alias www.example.com", "bucket media"), so a renamed
    -- route's old certificate can be found.
    route              text NOT NULL DEFAULT '',
    -- deferred (DNS pending), issued, failed
    state              text NOT NULL CHECK (state IN ('deferred', 'issued', 'failed')),
    attempts           integer NOT NULL DEFAULT 0,
    failures           integer NOT NULL DEFAULT 0,
    last_failure_at    timestamptz,
    reason             text NOT NULL DEFAULT '',
    next_retry_at      timestamptz,
    -- rate_limited_until is the CA's retry window; nothing bypasses it.
    rate_limited_until timestamptz,
    -- bypassed_failures is the failure count whose backoff a redeploy
    -- bypassed (cert-manager's manual renewal), so it happens once per failure.
    bypassed_failures  integer NOT NULL DEFAULT 0,
    serial             text NOT NULL DEFAULT '',
    not_before         timestamptz,
    not_after          timestamptz,
    certificate_pem    text NOT NULL DEFAULT '',
    probed_at          timestamptz,
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (environment_id, domain)
);
CREATE INDEX certificates_pending_idx ON certificates (state) WHERE state <> 'issued';

-- converging_revision_id is a first deploy's revision whose run failed on
-- a certificate: a late issuance still activates it.
ALTER TABLE environments ADD COLUMN converging_revision_id bigint REFERENCES revisions (id);
