-- Signed webhooks (issue 27): endpoints that hear of an environment's
-- deploys, certificates, backups and restores, and the deliveries made to
-- them. An endpoint's signing secret is sealed like a value, in
-- installation_settings under 'sealed:webhook:<id>' (so a key rotation
-- seals it again with the installation's other secrets); the trigger below
-- removes it with its endpoint, whichever way the endpoint goes.
CREATE TABLE webhook_endpoints (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- NULL: every environment of the installation (an installation admin's).
    environment_id  bigint REFERENCES environments (id) ON DELETE CASCADE,
    url             text NOT NULL CHECK (length(url) BETWEEN 1 AND 2000),
    events          text[] NOT NULL CHECK (cardinality(events) BETWEEN 1 AND 32),
    format          text NOT NULL CHECK (format IN ('standard', 'slack')),
    created_by      bigint REFERENCES users (id) ON DELETE SET NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    last_success_at timestamptz,
    -- Set when an admin turns the endpoint off, or when it kept failing.
    disabled_at     timestamptz,
    disabled_reason text NOT NULL DEFAULT ''
);
CREATE INDEX webhook_endpoints_environment ON webhook_endpoints (environment_id);

CREATE FUNCTION webhook_endpoint_secret_gone() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM installation_settings WHERE key = 'sealed:webhook:' || OLD.id::text;
    RETURN OLD;
END $$;
CREATE TRIGGER webhook_endpoint_secret_gone AFTER DELETE ON webhook_endpoints
    FOR EACH ROW EXECUTE FUNCTION webhook_endpoint_secret_gone();

-- One row per event per endpoint, written in the transaction of the change
-- that caused it (the outbox), and delivered by a River job.
CREATE TABLE webhook_deliveries (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    endpoint_id    bigint NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    -- message_id is the webhook-id header: a redelivery keeps its original's.
    message_id     text NOT NULL,
    event          text NOT NULL,
    -- data is the event's names, states and paths (never a value); the body
    -- is built from it, the same for every attempt.
    data           jsonb NOT NULL,
    occurred_at    timestamptz NOT NULL,
    status         text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'retrying', 'succeeded', 'failed')),
    attempts       int NOT NULL DEFAULT 0,
    response_code  int,
    duration_ms    int,
    last_error     text NOT NULL DEFAULT '',
    last_attempt_at timestamptz,
    redelivery_of  bigint REFERENCES webhook_deliveries (id) ON DELETE SET NULL,
    created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, id DESC);

-- The backup alarms webhooks last announced, per environment: an alarm
-- raised or cleared is a change of this table.
CREATE TABLE webhook_backup_alarms (
    environment_id bigint PRIMARY KEY REFERENCES environments (id) ON DELETE CASCADE,
    reason         text NOT NULL,
    raised_at      timestamptz NOT NULL
);
