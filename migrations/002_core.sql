-- The core aggregates: users and their sessions, projects with their
-- manifest revisions, environments, per-environment memberships and the
-- audit log. Values, runs and backups come in later migrations.

CREATE TABLE users (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- issuer and subject identify the user: the OIDC issuer URL and the
    -- token's sub claim, or 'local' / 'admin' for the built-in administrator.
    issuer          text NOT NULL,
    subject         text NOT NULL,
    email           text NOT NULL DEFAULT '',
    name            text NOT NULL DEFAULT '',
    is_admin        boolean NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL DEFAULT now(),
    last_sign_in_at timestamptz,
    UNIQUE (issuer, subject)
);
CREATE INDEX users_email_idx ON users (lower(email));

-- scs session store: token, gob-encoded data, expiry.
CREATE TABLE sessions (
    token  text PRIMARY KEY,
    data   bytea NOT NULL,
    expiry timestamptz NOT NULL
);
CREATE INDEX sessions_expiry_idx ON sessions (expiry);

-- One-time local sign-in links. Only a hash of the token is stored.
CREATE TABLE login_tokens (
    token_hash bytea PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at    timestamptz
);

CREATE TABLE projects (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        text NOT NULL UNIQUE,
    description text NOT NULL DEFAULT '',
    created_by  bigint REFERENCES users (id) ON DELETE SET NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE revisions (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project_id bigint NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    number     integer NOT NULL,
    source     text NOT NULL,
    definition jsonb NOT NULL,
    hash       text NOT NULL,
    summary    text NOT NULL DEFAULT '',
    created_by bigint REFERENCES users (id) ON DELETE SET NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (project_id, number)
);

CREATE TABLE environments (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    project_id         bigint NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    name               text NOT NULL,
    -- active | restoring | down
    state              text NOT NULL DEFAULT 'active',
    active_revision_id bigint REFERENCES revisions (id),
    created_by         bigint REFERENCES users (id) ON DELETE SET NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    UNIQUE (project_id, name)
);

CREATE TABLE memberships (
    environment_id bigint NOT NULL REFERENCES environments (id) ON DELETE CASCADE,
    user_id        bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role           text NOT NULL CHECK (role IN ('admin', 'deployer', 'viewer')),
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (environment_id, user_id)
);
CREATE INDEX memberships_user_idx ON memberships (user_id);

-- The audit log never holds a secret: values appear by name and version only.
CREATE TABLE audit_events (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at             timestamptz NOT NULL DEFAULT now(),
    actor_id       bigint REFERENCES users (id) ON DELETE SET NULL,
    -- actor is the display form kept even when the user is gone.
    actor          text NOT NULL DEFAULT '',
    action         text NOT NULL,
    project        text NOT NULL DEFAULT '',
    environment_id bigint REFERENCES environments (id) ON DELETE SET NULL,
    environment    text NOT NULL DEFAULT '',
    target         text NOT NULL DEFAULT '',
    detail         jsonb NOT NULL DEFAULT '{}',
    request_id     text NOT NULL DEFAULT ''
);
CREATE INDEX audit_events_at_idx ON audit_events (at DESC);
CREATE INDEX audit_events_env_idx ON audit_events (environment_id, at DESC);
