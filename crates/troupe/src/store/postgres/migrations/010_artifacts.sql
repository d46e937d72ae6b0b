-- troupe schema version 10: a shared team's artifacts (tool results too large for a history,
-- `.troupe/artifacts/<agent>/<name>` in the workspace that wrote them), so that a teammate taken
-- over on another host can still read the ones its conversation names. `content` holds the
-- first bytes of each (at most 8 MiB), `bytes` the artifact's whole size.
CREATE TABLE troupe_artifacts (
    team     text   NOT NULL,
    agent    text   NOT NULL,
    name     text   NOT NULL,
    bytes    bigint NOT NULL,
    content  bytea  NOT NULL,
    host     text   NOT NULL,
    PRIMARY KEY (team, agent, name)
);
