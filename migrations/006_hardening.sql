-- Sessions are stored under the SHA-256 of their token, so a copy of the
-- database yields no working session cookie. Sessions stored under their
-- plain token cannot be converted (the token is what we no longer keep), so
-- they end here: their holders are asked to sign in again.
DROP TABLE sessions;
CREATE TABLE sessions (
    token_hash bytea PRIMARY KEY,
    data       bytea NOT NULL,
    expiry     timestamptz NOT NULL
);
CREATE INDEX sessions_expiry_idx ON sessions (expiry);

-- A value row may exist at version 0 without ciphertext: it is created
-- (ON CONFLICT DO NOTHING) before the first write of a name so that
-- concurrent first writers lock the same row and each gets its own version.
ALTER TABLE environment_values DROP CONSTRAINT environment_values_version_check;
ALTER TABLE environment_values ADD CONSTRAINT environment_values_version_check CHECK (version >= 0);
-- Names are at most 255 characters. NOT VALID: a longer name stored before
-- this migration stays readable (and deletable) instead of failing it.
ALTER TABLE environment_values ADD CONSTRAINT environment_values_name_length CHECK (length(name) <= 255) NOT VALID;
