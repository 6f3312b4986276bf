-- API tokens (issue 27): a person's bearer tokens for the JSON API. Only
-- the SHA-256 of a token's secret is stored; the secret is shown once.
CREATE TABLE api_tokens (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id       bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name          text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    secret_sha256 bytea NOT NULL UNIQUE CHECK (length(secret_sha256) = 32),
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    -- last_used_at is written at most once a minute per token.
    last_used_at  timestamptz,
    revoked_at    timestamptz,
    revoked_by    text
);
CREATE INDEX api_tokens_user ON api_tokens (user_id);

-- The environments a token may act on and the most it may do there; the
-- owner's current role on the environment caps it at each use.
CREATE TABLE api_token_scopes (
    token_id       bigint NOT NULL REFERENCES api_tokens (id) ON DELETE CASCADE,
    environment_id bigint NOT NULL REFERENCES environments (id) ON DELETE CASCADE,
    role           text NOT NULL CHECK (role IN ('viewer', 'deployer', 'admin')),
    PRIMARY KEY (token_id, environment_id)
);
