-- troupe schema version 12: whether a call's counts were estimated by troupe (its server
-- reported no usage), so that a shared team's usage tells estimated tokens apart as the file's
-- does.
ALTER TABLE troupe_usage
    ADD COLUMN estimated boolean NOT NULL DEFAULT false;
