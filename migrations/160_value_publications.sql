-- Value publications: an admin's typed consent to publish a version of a
-- value in a hostname (a value the project also uses outside hostnames,
-- runs.PublicValue). A version is published once: later deploys of the
-- same version say since when and by whom, without asking again; a new
-- version asks again. published_by is the admin (NULL once the user is
-- gone), run_id the deploy it was given for.
CREATE TABLE value_publications (
    environment_id bigint NOT NULL REFERENCES environments (id) ON DELETE CASCADE,
    name           text NOT NULL,
    version        integer NOT NULL,
    published_at   timestamptz NOT NULL DEFAULT now(),
    published_by   bigint REFERENCES users (id) ON DELETE SET NULL,
    run_id         bigint REFERENCES runs (id) ON DELETE SET NULL,
    PRIMARY KEY (environment_id, name, version)
);
