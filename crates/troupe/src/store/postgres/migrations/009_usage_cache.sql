-- troupe schema version 9: the prompt tokens a provider's cache served (read) and took (write),
-- per model call, so that a shared team's usage says how much of its input was cached.
ALTER TABLE troupe_usage
    ADD COLUMN cache_read_tokens  bigint NOT NULL DEFAULT 0,
    ADD COLUMN cache_write_tokens bigint NOT NULL DEFAULT 0;
