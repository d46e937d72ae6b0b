-- troupe schema version 3: the team's event stream, every process's events in one order.
-- `id` is the team-wide order (it may have gaps: an insert that rolled back); `line` is the
-- event exactly as its process wrote it to its own `.troupe/events.jsonl`, whose run and `seq`
-- (that file's) make it unique, so a repeated insert adds nothing; `host` and `pid` say which
-- process wrote it.
CREATE TABLE troupe_events (
    team    text    NOT NULL,
    id      bigint  GENERATED ALWAYS AS IDENTITY,
    run_id  text    NOT NULL,
    seq     bigint  NOT NULL,
    host    text    NOT NULL,
    pid     integer NOT NULL,
    line    text    NOT NULL,
    PRIMARY KEY (team, id),
    UNIQUE (team, run_id, seq)
);
