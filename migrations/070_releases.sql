-- Releases: every deploy records the version of each value it used, so
-- that a later rollback deploys that deploy's revision with those value
-- versions; earlier versions of values are kept encrypted for a while.

-- value_versions keeps the earlier versions of each value, sealed exactly
-- as they were (the additional data binds environment, name and version, so
-- the ciphertext moves here unchanged). Never shown, never sent to a page:
-- only a rollback run and an admin's "restore" read them, through the
-- vault. They are pruned after the installation's retention, always
-- keeping the newest few of each name (store.Vault.PruneValueVersions).
CREATE TABLE value_versions (
    environment_id bigint NOT NULL REFERENCES environments (id) ON DELETE CASCADE,
    name           text NOT NULL,
    version        integer NOT NULL CHECK (version > 0),
    key_id         text NOT NULL REFERENCES value_keys (id),
    nonce          bytea NOT NULL,
    ciphertext     bytea NOT NULL,
    -- set_by and set_at are who stored this version and when;
    -- superseded_at is when a newer version (or a deletion) replaced it.
    set_by         bigint REFERENCES users (id) ON DELETE SET NULL,
    set_at         timestamptz NOT NULL,
    superseded_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (environment_id, name, version)
);
CREATE INDEX value_versions_superseded_idx ON value_versions (superseded_at);
CREATE INDEX value_versions_key_idx ON value_versions (key_id);

-- Every writer of environment_values (set, import, delete, prune, restore)
-- goes through an UPDATE of the slot: the version it replaces is kept here
-- whatever the code path. A key rotation keeps the version and is no change.
CREATE FUNCTION keep_value_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.ciphertext IS NOT NULL AND (NEW.version <> OLD.version OR NEW.ciphertext IS NULL) THEN
        INSERT INTO value_versions (environment_id, name, version, key_id, nonce, ciphertext, set_by, set_at)
        VALUES (OLD.environment_id, OLD.name, OLD.version, OLD.key_id, OLD.nonce, OLD.ciphertext, OLD.updated_by, OLD.updated_at)
        ON CONFLICT (environment_id, name, version) DO NOTHING;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER environment_values_keep_version BEFORE UPDATE ON environment_values
    FOR EACH ROW EXECUTE FUNCTION keep_value_version();

-- deploy_values is the release of a deploy run: the version of each value
-- it hands the platform, fixed when its values are checked (or, for a
-- rollback, copied from the release it rolls back to when it is created).
CREATE TABLE deploy_values (
    run_id  bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    name    text NOT NULL,
    version integer NOT NULL CHECK (version > 0),
    PRIMARY KEY (run_id, name)
);

-- values_pinned_at is when deploy_values of the run were fixed (NULL: not
-- yet, or a deploy from before releases were recorded); release_of is the
-- earlier deploy whose release a rollback deploys again.
ALTER TABLE runs ADD COLUMN values_pinned_at timestamptz;
ALTER TABLE runs ADD COLUMN release_of bigint REFERENCES runs (id) ON DELETE SET NULL;
