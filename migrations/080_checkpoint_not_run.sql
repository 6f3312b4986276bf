-- A checkpoint that a failed or cancelled run never reached is `not-run`,
-- a state of its own (it was shown as pending with "not run" beside it).
ALTER TABLE run_checkpoints DROP CONSTRAINT run_checkpoints_status_check;
ALTER TABLE run_checkpoints ADD CONSTRAINT run_checkpoints_status_check CHECK (status IN
    ('pending', 'running', 'waiting', 'succeeded', 'failed', 'skipped', 'not-run'));
UPDATE run_checkpoints c SET status = 'not-run'
  FROM runs r
 WHERE r.id = c.run_id AND c.status = 'pending' AND r.status IN ('failed', 'cancelled');
