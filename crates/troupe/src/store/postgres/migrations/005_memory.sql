-- troupe schema version 5: a shared team's memory records, one row per record, `text` the
-- record exactly as its file would be (front matter and body).
CREATE TABLE troupe_memory (
    team  text NOT NULL,
    name  text NOT NULL,
    text  text NOT NULL,
    PRIMARY KEY (team, name)
);
