-- A protected run's earliest start (issue 43's freeze change): when the
-- approval that met its rule (or a bypass, or a rule asking for fewer) was
-- given, plus the rule's wait. A change of the freeze windows moves a
-- scheduled run to the start the new windows give, never before this.
-- NULL: no rule was met for it (it may start as soon as no window is open).
ALTER TABLE runs ADD COLUMN not_before timestamptz;
