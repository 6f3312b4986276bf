-- The audit log at millions of records (issue 41): every filter is served
-- by an index, and the text search by a trigram index when the server has
-- the pg_trgm extension (PostgreSQL's contrib, shipped with the server
-- packages; trusted, so a database owner may create it). Without it the
-- search still works, reading the newest records first.
DO $$
BEGIN
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'pg_trgm is not available (%): the audit text search has no index', SQLERRM;
END
$$;

-- audit_text is what the text search looks in, lower-cased.
CREATE FUNCTION audit_text(a audit_events) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT lower(a.action || ' ' || a.project || ' ' || a.environment || ' ' || a.target || ' ' || a.detail::text || ' ' || a.request_id)
$$;

-- By action (the filter, and the list of actions read by skipping
-- through it), newest first.
CREATE INDEX audit_events_action_idx ON audit_events (action, at DESC, id DESC);
-- An environment's actions, for a scoped list of actions.
CREATE INDEX audit_events_env_action_idx ON audit_events (environment_id, action);
-- The project-wide records (project created, revision added) of a project.
CREATE INDEX audit_events_project_wide_idx ON audit_events (project, at DESC)
    WHERE environment_id IS NULL AND environment = '' AND project <> '';

DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm') THEN
        EXECUTE 'CREATE INDEX audit_events_text_idx ON audit_events USING gin (audit_text(audit_events) gin_trgm_ops)';
        EXECUTE 'CREATE INDEX audit_events_actor_idx ON audit_events USING gin (lower(actor) gin_trgm_ops)';
    END IF;
END
$$;
