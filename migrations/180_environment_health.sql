-- What runs now (issue 39): the newest health each environment's platform
-- reported, as the Studio's processes last synced it. Every process
-- watches the platform; the first to see a change writes it (under the
-- row's lock, comparing with what is stored), appends the environment's
-- event and records the webhooks, so several replicas announce one change
-- once. alerted are the applications announced unhealthy (app.unhealthy)
-- and not yet recovered: a crash loop is announced once, its recovery once.

CREATE TABLE environment_health (
    environment_id bigint PRIMARY KEY REFERENCES environments(id) ON DELETE CASCADE,
    level text NOT NULL,
    report jsonb NOT NULL,
    alerted text[] NOT NULL DEFAULT '{}',
    updated_at timestamptz NOT NULL DEFAULT now()
);
