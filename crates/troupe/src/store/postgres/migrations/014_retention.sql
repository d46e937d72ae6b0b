-- troupe schema version 14: retention (`troupe gc`, issue 45).
-- `calls`: how many model responses a usage row stands for (gc compacts old rows into per-day
-- totals; a row written by a process is 1).
-- `at` of transcript lines and artifacts: when the row was written (the server's time: their
-- writers carry no clock of the team's), so gc can tell how old a set-aside conversation or an
-- artifact is. Rows written before this version take the time of the migration.
ALTER TABLE troupe_usage ADD COLUMN calls bigint NOT NULL DEFAULT 1;
CREATE INDEX troupe_usage_at ON troupe_usage (team, at);
ALTER TABLE troupe_transcripts ADD COLUMN at timestamptz NOT NULL DEFAULT now();
ALTER TABLE troupe_artifacts ADD COLUMN at timestamptz NOT NULL DEFAULT now();
