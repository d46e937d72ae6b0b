-- troupe schema version 7: small whole documents of a team, each changed by one locked
-- read-modify-write (the lead's durable cron jobs: name `cron`, the text of `cron.json`).
CREATE TABLE troupe_documents (
    team  text NOT NULL,
    name  text NOT NULL,
    text  text NOT NULL,
    PRIMARY KEY (team, name)
);
