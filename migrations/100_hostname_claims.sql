-- Hostname claims: a hostname (a route's domain, an alias, a bucket route's
-- domain, lower-cased) belongs to one environment of the installation. A
-- deploy claims its resolved hostnames in the transaction that creates its
-- run, so of two concurrent first deploys of one hostname exactly one is
-- created (the other hits the primary key). run_id is the run that claimed
-- the hostname (NULL once that run is gone or for a claim backfilled from an
-- active revision); since is when the environment got it.
CREATE TABLE hostname_claims (
    hostname       text PRIMARY KEY CHECK (hostname = lower(hostname)),
    environment_id bigint NOT NULL REFERENCES environments (id) ON DELETE CASCADE,
    run_id         bigint REFERENCES runs (id) ON DELETE SET NULL,
    since          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX hostname_claims_environment_idx ON hostname_claims (environment_id);

-- The hostnames of environments deployed before claims existed are
-- claimed at the next start (they need the values, which only the Studio
-- can decrypt: store.Vault.BackfillHostnameClaims), once: this row says it
-- is still to do.
INSERT INTO installation_settings (key, value)
SELECT 'hostname_claims_backfill', 'pending'
WHERE EXISTS (SELECT 1 FROM environments WHERE active_revision_id IS NOT NULL);
