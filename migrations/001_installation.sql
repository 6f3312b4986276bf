-- Installation-wide settings, one row per key. Values here are not secret.
CREATE TABLE installation_settings (
    key        text PRIMARY KEY,
    value      text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
