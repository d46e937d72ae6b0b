-- troupe schema version 6: a shared team's audit, every process's permission decisions in one
-- order (each process keeps its own `.troupe/audit.jsonl` as well); `line` is the record exactly
-- as the file has it.
CREATE TABLE troupe_audit (
    team      text    NOT NULL,
    id        bigint  GENERATED ALWAYS AS IDENTITY,
    agent     text    NOT NULL,
    tool      text    NOT NULL,
    decision  text    NOT NULL CHECK (decision IN ('allow', 'deny')),
    host      text    NOT NULL,
    pid       integer NOT NULL,
    line      text    NOT NULL,
    PRIMARY KEY (team, id)
);
