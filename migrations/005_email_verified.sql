-- Whether the identity provider vouched for the user's email at their last
-- sign-in. Only a verified email picks up memberships granted to that
-- address. Rows from before this migration count as unverified until the
-- user signs in again.
ALTER TABLE users ADD COLUMN email_verified boolean NOT NULL DEFAULT false;
