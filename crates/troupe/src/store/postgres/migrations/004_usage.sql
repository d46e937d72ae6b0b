-- troupe schema version 4: token usage, every process's model calls, so that a shared team's
-- totals cover all of them (each process keeps its own `.troupe/usage.jsonl` as well).
CREATE TABLE troupe_usage (
    team              text    NOT NULL,
    id                bigint  GENERATED ALWAYS AS IDENTITY,
    at                text    NOT NULL,
    run_id            text    NOT NULL,
    agent             text    NOT NULL,
    model             text    NOT NULL,
    purpose           text    NOT NULL,
    prompt_tokens     bigint  NOT NULL,
    completion_tokens bigint  NOT NULL,
    total_tokens      bigint  NOT NULL,
    host              text    NOT NULL,
    pid               integer NOT NULL,
    PRIMARY KEY (team, id)
);
