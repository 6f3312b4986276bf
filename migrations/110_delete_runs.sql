-- Deleting an environment whose platform holds what it runs (Kubernetes: its
-- namespace) is a run of kind delete: the environment's state is 'deleting'
-- until the run has deleted what the platform holds, and its rows go only
-- then (a failed delete run leaves it 'deleting', to be retried).
ALTER TABLE runs DROP CONSTRAINT runs_kind_check;
ALTER TABLE runs ADD CONSTRAINT runs_kind_check CHECK (kind IN ('deploy', 'reconcile', 'backup', 'restore', 'delete'));
