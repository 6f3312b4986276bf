-- An environment's backups page and status read its newest snapshots in
-- the order they are shown from this index, not by sorting all of them.
CREATE INDEX backups_environment_at_idx ON backups (environment_id, (COALESCE(scheduled_at, created_at)) DESC, id DESC)
    WHERE deleted_at IS NULL;
