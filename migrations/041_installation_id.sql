-- installation_id names this installation in the marker file
-- (.skali-backup-target) written at the top of its backup target, so that a
-- target that is unmounted, replaced or another installation's is told
-- apart from this installation's own. Generated once, here, so that reading
-- it never writes.
INSERT INTO installation_settings (key, value)
VALUES ('installation_id', 'studio-' || replace(gen_random_uuid()::text, '-', ''))
ON CONFLICT (key) DO NOTHING;
