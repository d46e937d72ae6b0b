-- troupe schema version 11: a claim as one function, whose plans stay right on a queue table
-- the planner has no statistics for yet. As one `WITH next AS (… FOR UPDATE SKIP LOCKED) UPDATE … FROM next` the
-- planner, on tables not yet analysed (a new team whose backlog grows fast), drove the update's
-- join from an index scan over the agent's whole queue — every claim walked the backlog. Here
-- each update names its row's whole key (`created_ms` and `id`: either index finds it in one
-- probe) whatever the statistics; the rows are chosen and locked exactly as before (oldest first, `FOR UPDATE SKIP LOCKED`, an expired lease claimable again).
-- Without statistics the choice itself, planned once for any limit, read every row of the agent
-- into a sort; the settings below, for this function only, leave the planner the claim index's
-- own order: it reads the oldest rows and stops.
CREATE FUNCTION troupe_claim(p_team text, p_agent text, p_holder text,
                             p_lease double precision, p_limit bigint)
RETURNS TABLE (created_ms bigint, id uuid, body text, fence bigint)
LANGUAGE plpgsql
SET enable_sort = off
SET enable_bitmapscan = off
SET enable_seqscan = off
AS $$
#variable_conflict use_column
DECLARE
    next record;
BEGIN
    FOR next IN
        SELECT q.created_ms, q.id FROM troupe_messages q
         WHERE q.team = p_team AND q.agent = p_agent
           AND (q.state = 'ready'
                OR (q.state = 'processing' AND q.lease_until < clock_timestamp()))
         ORDER BY q.created_ms, q.id
         LIMIT p_limit
         FOR UPDATE SKIP LOCKED
    LOOP
        RETURN QUERY
            UPDATE troupe_messages m
               SET state = 'processing', claimed_by = p_holder,
                   fence = nextval('troupe_fence'),
                   lease_until = clock_timestamp() + make_interval(secs => p_lease)
             WHERE m.team = p_team AND m.agent = p_agent
               AND m.created_ms = next.created_ms AND m.id = next.id
         RETURNING m.created_ms, m.id, m.body, m.fence;
    END LOOP;
END
$$;
