-- Runs and snapshots are numbered per environment (issue 42 item 11): what
-- people see reads "#12 of production"; URLs and the API keep the global
-- id. Each environment counts its runs and its snapshots; a run's or a
-- snapshot's number is taken from its environment's counter when its row
-- is inserted, under the environment's row lock (the UPDATE below), so two
-- runs created at once get two consecutive numbers. A deleted run leaves
-- a gap: nothing is renumbered. A skipped scheduled fire is no snapshot
-- and takes no number.

ALTER TABLE environments
    ADD COLUMN last_run_number integer NOT NULL DEFAULT 0,
    ADD COLUMN last_snapshot_number integer NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN number integer;
ALTER TABLE backups ADD COLUMN number integer;

-- The runs and snapshots there are, numbered in the order they were made.
UPDATE runs r SET number = n.rn
FROM (SELECT id, row_number() OVER (PARTITION BY environment_id ORDER BY id) AS rn FROM runs) n
WHERE n.id = r.id;
UPDATE backups b SET number = n.rn
FROM (SELECT id, row_number() OVER (PARTITION BY environment_id ORDER BY id) AS rn FROM backups WHERE skipped = '') n
WHERE n.id = b.id;
UPDATE environments e SET
    last_run_number = COALESCE((SELECT max(number) FROM runs WHERE environment_id = e.id), 0),
    last_snapshot_number = COALESCE((SELECT max(number) FROM backups WHERE environment_id = e.id), 0);

ALTER TABLE runs ALTER COLUMN number SET NOT NULL;
CREATE UNIQUE INDEX runs_environment_number_idx ON runs (environment_id, number);
CREATE UNIQUE INDEX backups_environment_number_idx ON backups (environment_id, number) WHERE number IS NOT NULL;

-- Every insert takes the next number, whichever code inserts the row. An
-- insert that brings its own numbers (the bulk copies of cmd/scalebench)
-- sets the counters itself.
CREATE FUNCTION number_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE environments SET last_run_number = last_run_number + 1
    WHERE id = NEW.environment_id RETURNING last_run_number INTO NEW.number;
    RETURN NEW;
END
$$;
CREATE TRIGGER runs_number BEFORE INSERT ON runs
    FOR EACH ROW WHEN (NEW.number IS NULL) EXECUTE FUNCTION number_run();

CREATE FUNCTION number_snapshot() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE environments SET last_snapshot_number = last_snapshot_number + 1
    WHERE id = NEW.environment_id RETURNING last_snapshot_number INTO NEW.number;
    RETURN NEW;
END
$$;
CREATE TRIGGER backups_number BEFORE INSERT ON backups
    FOR EACH ROW WHEN (NEW.number IS NULL AND NEW.skipped = '') EXECUTE FUNCTION number_snapshot();
