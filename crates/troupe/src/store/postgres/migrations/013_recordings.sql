-- troupe schema version 13: run recordings (replay). Each lead process copies every line it
-- writes to its own .troupe/recordings/<run>.jsonl here, so that `troupe replay --store`
-- finds a shared team's runs from any host.
CREATE TABLE troupe_recordings (
    team text NOT NULL,
    run_id text NOT NULL,
    line_no bigint NOT NULL,
    host text NOT NULL,
    at timestamptz NOT NULL DEFAULT now(),
    line text NOT NULL,
    PRIMARY KEY (team, run_id, line_no)
);
