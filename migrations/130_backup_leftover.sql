-- A snapshot that did not complete has its files removed from the target.
-- When the target refuses the removal (a disk remounted read-only, say),
-- leftover is the path of the folder left there ('' when nothing is left),
-- shown with the snapshot until a later attempt removes it.
ALTER TABLE backups ADD COLUMN leftover text NOT NULL DEFAULT '';
