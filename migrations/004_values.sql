-- Write-only values: one row per environment and name, encrypted with
-- AES-256-GCM under a key of the keyring, and the keys' check values.

-- value_keys records every value-encryption key the installation has used,
-- by id (a fingerprint of the key, never the key). check_value is a known
-- constant sealed under the key: start-up opens it to prove that the
-- configured key is this key, so a wrong key is a clear error, not garbage.
CREATE TABLE value_keys (
    id          text PRIMARY KEY,
    check_value bytea NOT NULL,
    -- active: new values are sealed under it (exactly one);
    -- readable: values under it are still being re-encrypted by a rotation;
    -- retired: no value uses it any more.
    state       text NOT NULL CHECK (state IN ('active', 'readable', 'retired')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    retired_at  timestamptz
);
CREATE UNIQUE INDEX value_keys_one_active ON value_keys ((true)) WHERE state = 'active';

-- environment_values holds the current version of each value. A deleted
-- value keeps its row without ciphertext, so versions keep counting up and
-- a ciphertext can never be replayed into a reused (environment, name,
-- version) slot.
CREATE TABLE environment_values (
    environment_id bigint NOT NULL REFERENCES environments (id) ON DELETE CASCADE,
    name           text NOT NULL CHECK (name ~ '^[A-Z_][A-Z0-9_]*$'),
    version        integer NOT NULL CHECK (version > 0),
    -- key_id, nonce and ciphertext are all NULL for a deleted value.
    key_id         text REFERENCES value_keys (id),
    nonce          bytea,
    ciphertext     bytea,
    updated_by     bigint REFERENCES users (id) ON DELETE SET NULL,
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (environment_id, name),
    CHECK ((key_id IS NULL) = (ciphertext IS NULL) AND (nonce IS NULL) = (ciphertext IS NULL))
);
CREATE INDEX environment_values_key_idx ON environment_values (key_id) WHERE ciphertext IS NOT NULL;
