-- A protected run's earliest start (issue 43's freeze change): when the
-- approval that met its rule (or a bypass, or a rule asking for fewer) was
-- given, plus the rule's wait. A change of the freeze windows moves a
-- scheduled run to the start the new windows give, never before this.
-- NULL: no rule was met for it (it may start as soon as no window is open).
ALTER TABLE runs ADD COLUMN not_before timestamptz;

-- The protected runs approved before this column existed and not started
-- yet: their latest approval plus the rule's wait. A run started by a
-- bypass has no approval and stays NULL; the Studio never moves such a
-- run sooner than its job.
UPDATE runs r SET not_before = (SELECT max(a.created_at) FROM run_approvals a WHERE a.run_id = r.id)
    + make_interval(secs => COALESCE((SELECT p.wait_seconds FROM protection_rules p WHERE p.environment_id = r.environment_id), 0))
WHERE r.status = 'waiting' AND r.plan_digest <> '' AND r.job_id IS NOT NULL;
