-- nel workbench store, schema version 5 (2 added steps.scores, 3 steps.turns, 4 steps.attempt and superseded_steps,
-- 5 images; older stores are migrated when next opened for writing, and read as they are).
-- The public contract of the store: every front end (CLI, TUI, notebooks, `duckdb` itself) reads these
-- tables and the views in views.sql. Steps are append-only; a step is one attempt at one task.

CREATE TABLE IF NOT EXISTS nel_meta (
    key   VARCHAR PRIMARY KEY,
    value VARCHAR NOT NULL
);
INSERT OR IGNORE INTO nel_meta VALUES ('schema_version', '5');

-- One row per evaluation run. `identity` holds everything that changes answers (model, endpoint,
-- protocol, sampling parameters, system prompt, benchmark and data hash, repeats, problem range);
-- `identity_hash` is its SHA-256. No API key or auth header is ever stored.
CREATE TABLE IF NOT EXISTS runs (
    run_id          VARCHAR PRIMARY KEY,
    benchmark       VARCHAR NOT NULL,
    model_id        VARCHAR,
    model_url       VARCHAR,
    protocol        VARCHAR,
    identity_hash   VARCHAR NOT NULL,
    identity        JSON NOT NULL,
    config          JSON,
    n_tasks         INTEGER NOT NULL,   -- problems in the run's range
    n_repeats       INTEGER NOT NULL,
    problem_start   INTEGER NOT NULL,   -- first problem index (inclusive)
    problem_end     INTEGER NOT NULL,   -- last problem index (exclusive)
    total_shards    INTEGER NOT NULL,
    status          VARCHAR NOT NULL,   -- running | complete | incomplete | failed
    created_at      TIMESTAMP NOT NULL,
    finished_at     TIMESTAMP,
    nel_version     VARCHAR
);

-- One row per shard of a run (an unsharded run has one shard, 0 of 1).
CREATE TABLE IF NOT EXISTS run_shards (
    run_id          VARCHAR NOT NULL,
    shard_idx       INTEGER NOT NULL,
    total_shards    INTEGER NOT NULL,
    problem_start   INTEGER NOT NULL,
    problem_end     INTEGER NOT NULL,
    status          VARCHAR NOT NULL,   -- running | complete | interrupted | failed
    started_at      TIMESTAMP NOT NULL,
    finished_at     TIMESTAMP,
    n_steps         BIGINT,
    host            VARCHAR,
    pid             INTEGER,
    error           VARCHAR,
    PRIMARY KEY (run_id, shard_idx)
);

-- One row per benchmark problem. `task_id` is a hash of the problem's content: join runs on it,
-- never on row position.
CREATE TABLE IF NOT EXISTS tasks (
    task_id         VARCHAR PRIMARY KEY,
    benchmark       VARCHAR NOT NULL,
    prompt          VARCHAR NOT NULL,
    expected_answer VARCHAR,
    metadata        JSON
);

-- Which problems a run covers (so a task with no step yet shows up as missing).
CREATE TABLE IF NOT EXISTS run_tasks (
    run_id          VARCHAR NOT NULL,
    task_idx        INTEGER NOT NULL,
    task_id         VARCHAR NOT NULL,
    PRIMARY KEY (run_id, task_idx)
);

-- One row per attempt, unique on (run_id, task_idx, repeat): ingest inserts a step only when that
-- key is absent (an anti-join rather than a PRIMARY KEY, whose in-memory index would cost more
-- memory than the rest of a run). `messages` is the conversation as sent in the final model
-- call, an OpenAI-format JSON array (system prompt, user prompt, earlier turns and tool
-- results); the reply is `response` + `tool_calls`, stored once. `step_messages` shows the
-- whole transcript, reply included, one row per message.
CREATE TABLE IF NOT EXISTS steps (
    run_id            VARCHAR NOT NULL,
    task_idx          INTEGER NOT NULL,
    repeat            INTEGER NOT NULL,
    task_id           VARCHAR NOT NULL,
    shard_idx         INTEGER NOT NULL,
    started_at        TIMESTAMP NOT NULL,
    prompt            VARCHAR,
    messages          JSON,
    response          VARCHAR,
    reasoning         VARCHAR,
    finish_reason     VARCHAR,
    tool_calls        JSON,
    reward            DOUBLE NOT NULL,
    passed            BOOLEAN NOT NULL,
    expected_answer   VARCHAR,
    extracted_answer  VARCHAR,
    scoring_method    VARCHAR,
    scoring_details   JSON,
    failure_category  VARCHAR,          -- NULL for an answered attempt, right or wrong
    error             VARCHAR,
    http_status       INTEGER,
    n_retries         INTEGER,
    prompt_tokens     INTEGER,
    completion_tokens INTEGER,
    total_tokens      INTEGER,
    reasoning_tokens  INTEGER,
    latency_ms        DOUBLE,           -- seed + model + verify
    seed_ms           DOUBLE,
    model_ms          DOUBLE,           -- includes retries and their backoff
    verify_ms         DOUBLE,
    request_hash      VARCHAR,          -- SHA-256 of endpoint + request body
    request_seed      BIGINT,
    response_id       VARCHAR,
    metadata          JSON,
    -- Every metric of a benchmark scored with several ({metric: {reward, passed, extracted_answer,
    -- method, details}}); NULL when only the benchmark's own scorer ran (then reward is that metric).
    -- The step_scores view gives one row per step and metric either way.
    scores            JSON,
    -- An agent's transcript, turn by turn (the tool-calling solver): [{turn, model: {latency_ms, tokens,
    -- finish_reason, ...}, text, tool_calls: [{id, name, arguments, output, truncated, exit_code, error,
    -- latency_ms}]}]; NULL for a single model call. The step_tool_calls view has one row per tool call.
    turns             JSON,
    -- How many earlier attempts at this (task, repeat) were superseded: 0, unless `--resume --retry-errors`
    -- attempted again a step that had ended in a transport or server failure (the earlier record is kept in
    -- superseded_steps). NULL in steps written before schema version 4: read it as 0.
    attempt           INTEGER
);

-- Earlier attempts replaced by a retry (`nel eval run --resume --retry-errors`): the same columns as steps, and
-- when the retry replaced them. `steps` keeps one row per (run_id, task_idx, repeat): the latest attempt.
CREATE TABLE IF NOT EXISTS superseded_steps AS SELECT *, CAST(NULL AS TIMESTAMP) AS superseded_at FROM steps LIMIT 0;

-- Every image a prompt carried, once, by the SHA-256 of its bytes. Stored transcripts (steps.messages) hold a
-- reference in its place, {"type": "image", "sha256", "mime", "bytes", "width", "height"}, never the base64:
-- a benchmark's image sent with 10 repeats, or in 10 runs, is one row here.
CREATE TABLE IF NOT EXISTS images (
    sha256  VARCHAR PRIMARY KEY,
    mime    VARCHAR NOT NULL,        -- image/png, image/jpeg, image/gif, image/webp
    n_bytes BIGINT NOT NULL,
    width   INTEGER NOT NULL,
    height  INTEGER NOT NULL,
    data    BLOB NOT NULL
);
