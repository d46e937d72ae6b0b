-- troupe schema version 2: the task board, one row per task, the task's own JSON in
-- `body`; `status` and `owner` repeat it for people reading the table.
CREATE TABLE troupe_tasks (
    team       text NOT NULL,
    id         uuid NOT NULL,
    status     text NOT NULL CHECK (status IN ('pending', 'in_progress', 'completed')),
    owner      text,
    body       text NOT NULL,
    PRIMARY KEY (team, id)
);
