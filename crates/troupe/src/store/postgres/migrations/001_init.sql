-- troupe schema version 1: every store of a team, keyed by its team key.

CREATE SEQUENCE troupe_fence;

-- Mailboxes (SPEC §3). Messages that can still be claimed (ready, processing) are the queue,
-- `troupe_messages`; done and quarantined ones move to `troupe_messages_kept` in the same
-- statement that finishes them. The queue stays as small as the backlog, so a claim's index scan
-- never walks the history; a claim or release changes no indexed column, so it is a HOT update
-- (fillfactor leaves room for it) and leaves no dead index entry behind.
CREATE TABLE troupe_messages (
    team        text    NOT NULL,
    agent       text    NOT NULL,
    id          uuid    NOT NULL,
    created_ms  bigint  NOT NULL,
    state       text    NOT NULL CHECK (state IN ('ready', 'processing')),
    body        text    NOT NULL,
    -- A claim is a lease: who holds it, its fencing token (from troupe_fence, so it only
    -- grows), and until when; an expired lease makes the message claimable again.
    claimed_by  text,
    fence       bigint,
    lease_until timestamptz,
    PRIMARY KEY (team, agent, id)
) WITH (fillfactor = 70);
CREATE INDEX troupe_messages_claim ON troupe_messages (team, agent, created_ms, id);

CREATE TABLE troupe_messages_kept (
    team             text   NOT NULL,
    agent            text   NOT NULL,
    id               uuid   NOT NULL,
    created_ms       bigint NOT NULL,
    state            text   NOT NULL CHECK (state IN ('done', 'quarantine')),
    body             text   NOT NULL,
    quarantined_from text,
    quarantined_ms   bigint,
    reason           text,
    PRIMARY KEY (team, agent, id)
);
CREATE INDEX troupe_messages_kept_listing ON troupe_messages_kept (team, agent, state, created_ms, id);

-- The protocol store (SPEC §5): one row per request, the request's own JSON in `body`.
CREATE TABLE troupe_requests (
    team       text    NOT NULL,
    id         uuid    NOT NULL,
    seq        bigserial,
    created_ms bigint  NOT NULL,
    sender     text    NOT NULL,
    kind       text    NOT NULL,
    pending    boolean NOT NULL,
    body       text    NOT NULL,
    PRIMARY KEY (team, id)
);
CREATE INDEX troupe_requests_order ON troupe_requests (team, created_ms, seq);

-- The one answer sent to a request: the whole response message.
CREATE TABLE troupe_answers (
    team       text NOT NULL,
    request_id uuid NOT NULL,
    body       text NOT NULL,
    PRIMARY KEY (team, request_id)
);

-- The roster: one row per teammate (its record's JSON), and the lease of the worker that runs it.
CREATE TABLE troupe_teammates (
    team        text NOT NULL,
    name        text NOT NULL,
    body        text NOT NULL,
    holder      text,
    fence       bigint,
    lease_until timestamptz,
    PRIMARY KEY (team, name)
);

-- Worker processes and their heartbeats (`troupe status`).
CREATE TABLE troupe_workers (
    team         text NOT NULL,
    id           text NOT NULL,
    host         text NOT NULL,
    pid          integer NOT NULL,
    role         text NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (team, id)
);

-- Transcripts: each agent's conversation, one JSON line per row, in append order; `generation`
-- 0 is the current one, set-aside conversations get 1, 2, ….
CREATE TABLE troupe_transcripts (
    team       text    NOT NULL,
    agent      text    NOT NULL,
    generation integer NOT NULL,
    seq        bigserial,
    line       text    NOT NULL,
    PRIMARY KEY (team, agent, generation, seq)
);
