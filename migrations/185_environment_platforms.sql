-- Which cluster an environment's active revision runs on (issue 37): the
-- platform's kind and the cluster's identity (on Kubernetes the kube-system
-- namespace's uid), written when a deploy activates. A Studio pointed at
-- another cluster, or platform, with the same database tells it apart:
-- its environment page says so and its plan deploys everything.
CREATE TABLE environment_platforms (
    environment_id bigint PRIMARY KEY REFERENCES environments(id) ON DELETE CASCADE,
    identity text NOT NULL CHECK (identity <> ''),
    recorded_at timestamptz NOT NULL DEFAULT now()
);
