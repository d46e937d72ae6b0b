-- troupe schema version 8: a shared team's background job records, every process's (a job is a
-- process of the host that started it; each process keeps its own `.troupe/jobs/` as well);
-- `record` is the record exactly as its file is.
CREATE TABLE troupe_jobs (
    team    text NOT NULL,
    id      uuid NOT NULL,
    host    text NOT NULL,
    record  text NOT NULL,
    PRIMARY KEY (team, id)
);
