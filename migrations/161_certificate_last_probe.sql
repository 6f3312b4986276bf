-- The newest probe of a domain the reconciler or Check now made without
-- recording a run (it still does not point here): what its addresses
-- answered (runs.ProbeResult as JSON) and when, so that the pages' "as
-- probed at" and the addresses shown move with every probe, not only with
-- the probes a run recorded.
ALTER TABLE certificates ADD COLUMN last_probe jsonb;
ALTER TABLE certificates ADD COLUMN last_probe_at timestamptz;
