-- Issue 41: the values page, the environment page and the deploy plan count
-- and list an environment's stored names without reading its sealed
-- values: an index of the set names alone serves them as index-only scans.
CREATE INDEX environment_values_set_idx ON environment_values (environment_id, name) WHERE ciphertext IS NOT NULL;
