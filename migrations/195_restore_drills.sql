-- Restore drills (issue 38): a run of kind drill restores an environment's
-- newest good snapshot into a scratch place of its own and checks it.
ALTER TABLE runs DROP CONSTRAINT runs_kind_check;
ALTER TABLE runs ADD CONSTRAINT runs_kind_check CHECK (kind IN ('deploy', 'reconcile', 'backup', 'restore', 'delete', 'drill'));
