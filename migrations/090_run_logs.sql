-- Log lines of runs: what a checkpoint's platform step printed (a build, a
-- release command's output, rollout progress, a certificate's DNS answers
-- and HTTP-01 attempts), numbered 1, 2, 3 ... per run, each with the
-- position of its checkpoint and its time. Lines are masked (every value of
-- the environment replaced by ••••) before they are stored. A run keeps at
-- most 10,000 lines and 1 MiB of text; past that one last line says that the
-- log was cut (log_cut) and later lines are dropped. The counters live on
-- the run's row, whose lock (taken by the append) keeps line numbers
-- without gaps. Each appended batch is also a run event, in the same
-- transaction, that carries the lines to live pages.
CREATE TABLE run_log_lines (
    run_id   bigint NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    n        integer NOT NULL CHECK (n > 0),
    position integer NOT NULL,
    at       timestamptz NOT NULL,
    text     text NOT NULL,
    PRIMARY KEY (run_id, n)
);
CREATE INDEX run_log_lines_position_idx ON run_log_lines (run_id, position, n);

ALTER TABLE runs
    ADD COLUMN log_lines integer NOT NULL DEFAULT 0,
    ADD COLUMN log_bytes bigint NOT NULL DEFAULT 0,
    ADD COLUMN log_cut   boolean NOT NULL DEFAULT false;
