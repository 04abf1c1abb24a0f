-- Views over the tables in schema.sql. The same text is applied to the database file and to the
-- live view that `nel sql`, the TUI and `workbench.open_store` build over in-progress runs.
-- Statistics here are the spine's: per-task Wilson intervals, and pass@1 / mean reward across tasks
-- (repeats reduced per task first) with the interval of workbench.stats.bounds.bounded_mean: Wilson
-- when every task scored 0 or 1, else Student t on the across-task standard error, cut to [0, 1] and
-- never narrower than the zero-spread floor (the unit_mean_* macros). workbench.stats holds the rest.

-- Attempts that reached no verdict: the exchange failed (no answer came back) or the scorer raised; the other
-- categories are answers that failed (empty, refusal, no final answer). workbench.model.failures.ERROR_CATEGORIES.
CREATE OR REPLACE MACRO is_error_category(category) AS
    category IN ('rate_limit', 'timeout', 'server_error', 'context_window', 'model_error', 'scorer_error',
                 'image_error');

-- The 97.5 % quantile of Student's t with `df` degrees of freedom (two-sided 95 % intervals):
-- exact values up to df = 7, then the Cornish-Fisher expansion in 1/df to the 4th order, its
-- coefficients precomputed from z = 1.959963984540054 (relative error < 2e-5).
CREATE OR REPLACE MACRO t_quantile_975(df) AS
    CASE
        WHEN df IS NULL OR df < 1 THEN NULL
        WHEN df = 1 THEN 12.706204736174698
        WHEN df = 2 THEN 4.302652729749464
        WHEN df = 3 THEN 3.182446305284263
        WHEN df = 4 THEN 2.7764451051977934
        WHEN df = 5 THEN 2.5705818356363146
        WHEN df = 6 THEN 2.4469118511449692
        WHEN df = 7 THEN 2.3646242515927844
        ELSE 1.959963984540054::DOUBLE + 2.372271230298562::DOUBLE / df + 2.8224986157396112::DOUBLE / df ^ 2
            + 2.555849679507722::DOUBLE / df ^ 3 + 1.5895340533938225::DOUBLE / df ^ 4
    END;

-- Wilson score 95 % bounds of a proportion `p` over `n` trials (workbench.stats.wilson_interval).
CREATE OR REPLACE MACRO wilson_low_95(p, n) AS
    greatest(0.0, ((p + 1.959963984540054 ^ 2 / (2 * n))
                   - 1.959963984540054 * sqrt(p * (1 - p) / n + 1.959963984540054 ^ 2 / (4 * n * n)))
                  / (1 + 1.959963984540054 ^ 2 / n));
CREATE OR REPLACE MACRO wilson_high_95(p, n) AS
    least(1.0, ((p + 1.959963984540054 ^ 2 / (2 * n))
                + 1.959963984540054 * sqrt(p * (1 - p) / n + 1.959963984540054 ^ 2 / (4 * n * n)))
               / (1 + 1.959963984540054 ^ 2 / n));

-- The 95 % interval of a mean of `n` per-task values in [0, 1] with standard error `se` (workbench.stats.
-- bounds): Wilson's for the share of tasks at 1 when every value is 0 or 1 (`two_valued`); else the t
-- interval cut to [0, 1] and widened to at least the zero-spread floor mean ∓ w·(distance to 0 or 1),
-- w = z² / (n + z²); with one task, the floor alone. NULL without tasks.
CREATE OR REPLACE MACRO unit_mean_low_95(mean, se, n, two_valued) AS
    CASE
        WHEN n IS NULL OR n = 0 THEN NULL
        WHEN two_valued THEN wilson_low_95(mean, n)
        WHEN n = 1 THEN mean * n / (n + 1.959963984540054 ^ 2)
        ELSE least(greatest(0.0, mean - t_quantile_975(n - 1) * se), mean * n / (n + 1.959963984540054 ^ 2))
    END;
CREATE OR REPLACE MACRO unit_mean_high_95(mean, se, n, two_valued) AS
    CASE
        WHEN n IS NULL OR n = 0 THEN NULL
        WHEN two_valued THEN wilson_high_95(mean, n)
        WHEN n = 1 THEN 1 - (1 - mean) * n / (n + 1.959963984540054 ^ 2)
        ELSE greatest(least(1.0, mean + t_quantile_975(n - 1) * se), 1 - (1 - mean) * n / (n + 1.959963984540054 ^ 2))
    END;
-- Which interval the two macros above gave (Estimate.method in workbench.stats).
CREATE OR REPLACE MACRO unit_mean_method_95(mean, se, n, two_valued) AS
    CASE
        WHEN n IS NULL OR n = 0 THEN 'none'
        WHEN two_valued THEN 'wilson'
        WHEN n = 1 THEN 'zero-spread floor'
        WHEN mean - t_quantile_975(n - 1) * se > mean * n / (n + 1.959963984540054 ^ 2)
          OR mean + t_quantile_975(n - 1) * se < 1 - (1 - mean) * n / (n + 1.959963984540054 ^ 2)
            THEN 't, widened to the zero-spread floor'
        ELSE 't'
    END;

-- The tasks of each run: its run_tasks rows, and every problem index of its range without one (each shard
-- lists only its own tasks, so a shard that never ran leaves its tasks out of run_tasks: they are tasks
-- all the same, never attempted, with no task_id). The range is the run's tasks when its length is n_tasks,
-- as for every engine run; an import with gaps in its indices lists every task it has.
CREATE OR REPLACE VIEW run_task_list AS
SELECT run_id, task_idx, task_id FROM run_tasks
UNION ALL
SELECT e.run_id, e.task_idx, NULL AS task_id
FROM (SELECT run_id, unnest(range(problem_start, problem_end)) AS task_idx FROM runs
      WHERE problem_end - problem_start = n_tasks) e
ANTI JOIN run_tasks rt ON rt.run_id = e.run_id AND rt.task_idx = e.task_idx;

-- Per task of each run: attempts, passes, errored attempts, Wilson 95 % interval and outcome bucket:
-- always / sometimes / never pass, errored (attempted, and every attempt an error: is_error_category,
-- no verdict; counted apart because it says nothing about the model), missing (never attempted).
CREATE OR REPLACE VIEW task_stats AS
WITH per_task AS (
    SELECT
        run_id,
        task_idx,
        count(*)                                                AS n,
        count(*) FILTER (WHERE passed)                          AS n_pass,
        count(*) FILTER (WHERE is_error_category(failure_category))   AS n_error,
        avg(reward)                                             AS mean_reward,
        avg(total_tokens)                                       AS mean_tokens,
        avg(latency_ms)                                         AS mean_latency_ms
    FROM steps
    GROUP BY run_id, task_idx
), wilson AS (
    SELECT
        rt.run_id,
        rt.task_idx,
        rt.task_id,
        coalesce(p.n, 0)        AS n,
        coalesce(p.n_pass, 0)   AS n_pass,
        coalesce(p.n_error, 0)  AS n_error,
        p.mean_reward,
        p.mean_tokens,
        p.mean_latency_ms,
        CASE WHEN p.n > 0 THEN p.n_pass / p.n END AS pass_rate
    FROM run_task_list rt
    LEFT JOIN per_task p USING (run_id, task_idx)
)
SELECT
    run_id, task_idx, task_id, n, n_pass, n_error, pass_rate, mean_reward, mean_tokens, mean_latency_ms,
    CASE WHEN n > 0 THEN wilson_low_95(pass_rate, n) END AS wilson_low,
    CASE WHEN n > 0 THEN wilson_high_95(pass_rate, n) END AS wilson_high,
    CASE
        WHEN n = 0 THEN 'missing'
        WHEN n_error = n THEN 'errored'
        WHEN n_pass = n THEN 'always'
        WHEN n_pass = 0 THEN 'never'
        ELSE 'sometimes'
    END AS bucket
FROM wilson;

-- Which harness produced a run, from the `source` its importer wrote into the run's identity: `gym` (nemo_gym:
-- nel import gym), `lm-eval` (lm_eval: nel import lm-eval), `inspect` (inspect_ai: nel import inspect); a run nel
-- ran itself has none: `nel`. A source this nel does not know reads as written. The one place this is derived.
CREATE OR REPLACE MACRO run_source(identity) AS
    CASE json_extract_string(identity, '$.source')
        WHEN 'nemo_gym' THEN 'gym'
        WHEN 'lm_eval' THEN 'lm-eval'
        WHEN 'inspect_ai' THEN 'inspect'
        ELSE coalesce(json_extract_string(identity, '$.source'), 'nel')
    END;

-- One row per run: its source (run_source above), coverage, pass@1 with a 95 % interval (and its method), task
-- buckets, errors, tokens and latency percentiles.
CREATE OR REPLACE VIEW run_metrics AS
WITH per_run_tasks AS (
    SELECT
        run_id,
        count(*)                                        AS n_tasks,
        count(*) FILTER (WHERE n > 0)                   AS n_tasks_attempted,
        avg(pass_rate)                                  AS pass_at_1,
        stddev_samp(pass_rate) / sqrt(count(pass_rate)) AS pass_at_1_se,
        count(pass_rate)                                AS pass_at_1_n,
        bool_and(pass_rate IN (0, 1))                   AS two_valued,
        count(*) FILTER (WHERE bucket = 'always')       AS n_always,
        count(*) FILTER (WHERE bucket = 'sometimes')    AS n_sometimes,
        count(*) FILTER (WHERE bucket = 'never')        AS n_never,
        count(*) FILTER (WHERE bucket = 'errored')      AS n_errored,
        count(*) FILTER (WHERE bucket = 'missing')      AS n_missing
    FROM task_stats
    GROUP BY run_id
), per_run_steps AS (
    SELECT
        run_id,
        count(*)                                                    AS n_steps,
        count(*) FILTER (WHERE passed)                              AS n_pass,
        count(*) FILTER (WHERE is_error_category(failure_category)) AS n_errors,
        count(*) FILTER (WHERE failure_category IS NOT NULL)        AS n_failed,
        sum(prompt_tokens)                                          AS prompt_tokens,
        sum(completion_tokens)                                      AS completion_tokens,
        sum(total_tokens)                                           AS total_tokens,
        quantile_cont(latency_ms, 0.5)                              AS latency_p50_ms,
        quantile_cont(latency_ms, 0.9)                              AS latency_p90_ms,
        quantile_cont(latency_ms, 0.99)                             AS latency_p99_ms,
        min(started_at)                                             AS first_step_at,
        max(started_at)                                             AS last_step_at
    FROM steps
    GROUP BY run_id
)
SELECT
    r.run_id, run_source(r.identity) AS source, r.benchmark, r.model_id, r.status, r.n_repeats,
    t.n_tasks, t.n_tasks_attempted,
    coalesce(s.n_steps, 0)                   AS n_steps,
    t.n_tasks * r.n_repeats                  AS n_steps_expected,
    coalesce(s.n_pass, 0)                    AS n_pass,
    t.pass_at_1,
    unit_mean_low_95(t.pass_at_1, t.pass_at_1_se, t.pass_at_1_n, t.two_valued)    AS pass_at_1_low,
    unit_mean_high_95(t.pass_at_1, t.pass_at_1_se, t.pass_at_1_n, t.two_valued)   AS pass_at_1_high,
    unit_mean_method_95(t.pass_at_1, t.pass_at_1_se, t.pass_at_1_n, t.two_valued) AS pass_at_1_method,
    t.n_always, t.n_sometimes, t.n_never, t.n_errored, t.n_missing,
    coalesce(s.n_errors, 0)                  AS n_errors,
    coalesce(s.n_failed, 0)                  AS n_failed,
    s.prompt_tokens, s.completion_tokens, s.total_tokens,
    s.latency_p50_ms, s.latency_p90_ms, s.latency_p99_ms,
    r.created_at, r.finished_at
FROM runs r
LEFT JOIN per_run_tasks t USING (run_id)
LEFT JOIN per_run_steps s USING (run_id);

-- Failure counts by category per run, with the share of all steps.
CREATE OR REPLACE VIEW failure_counts AS
SELECT
    run_id,
    failure_category,
    count(*) AS n,
    count(*) / any_value(total) AS share
FROM (SELECT *, count(*) OVER (PARTITION BY run_id) AS total FROM steps)
WHERE failure_category IS NOT NULL
GROUP BY run_id, failure_category;

-- The transcript of every step, one row per message (turn 0 first): the messages sent,
-- then the model's reply when it answered (a step that failed in transport has none).
CREATE OR REPLACE VIEW step_messages AS
SELECT
    run_id, task_idx, repeat, task_id, turn,
    msg ->> 'role'          AS role,
    msg ->> 'content'       AS content,
    msg -> 'tool_calls'     AS tool_calls,
    msg ->> 'tool_call_id'  AS tool_call_id
FROM (
    SELECT run_id, task_idx, repeat, task_id,
           generate_subscripts(msgs, 1) - 1 AS turn,
           unnest(msgs)                     AS msg
    FROM (SELECT *, CAST(messages AS JSON[]) AS msgs FROM steps)
)
UNION ALL
SELECT
    run_id, task_idx, repeat, task_id,
    coalesce(json_array_length(messages), 0)::BIGINT AS turn,
    'assistant'                                      AS role,
    response                                         AS content,
    tool_calls,
    NULL                                             AS tool_call_id
FROM steps
WHERE error IS NULL OR failure_category = 'max_turns_exhausted';

-- Every tool call of every agent step (the tool-calling solver's `turns`), one row each, in order:
-- "bash exited 1 on turn 3" is a query away.
CREATE OR REPLACE VIEW step_tool_calls AS
SELECT
    run_id, task_idx, repeat, task_id,
    CAST(c ->> 'turn' AS INTEGER)          AS turn,
    c ->> 'id'                             AS call_id,
    c ->> 'name'                           AS name,
    c ->> 'arguments'                      AS arguments,
    c ->> 'output'                         AS output,
    CAST(c ->> 'exit_code' AS INTEGER)     AS exit_code,
    c ->> 'error'                          AS error,
    CAST(c ->> 'latency_ms' AS DOUBLE)     AS latency_ms,
    CAST(c ->> 'truncated' AS BOOLEAN)     AS truncated,
    c ->> 'skipped'                        AS skipped
FROM (
    SELECT run_id, task_idx, repeat, task_id, unnest(CAST(t -> 'tool_calls' AS JSON[])) AS c
    FROM (SELECT run_id, task_idx, repeat, task_id, unnest(CAST(turns AS JSON[])) AS t
          FROM steps WHERE turns IS NOT NULL)
);

-- Every metric of every step, one row each. A benchmark configured with several metrics
-- (`scoring:` in a config) stores them all in steps.scores; a step scored only by its benchmark's
-- own scorer has one metric, `reward`, named after that scorer (runs.config.primary_metric).
CREATE OR REPLACE VIEW step_scores AS
SELECT
    s.run_id, s.task_idx, s.repeat, s.task_id,
    m.key                                       AS metric,
    CAST(m.value ->> 'reward' AS DOUBLE)        AS reward,
    CAST(m.value ->> 'passed' AS BOOLEAN)       AS passed,
    m.value ->> 'extracted_answer'              AS extracted_answer,
    m.value ->> 'method'                        AS scoring_method,
    m.value -> 'details'                        AS scoring_details,
    s.failure_category
FROM steps s, json_each(s.scores) m
WHERE s.scores IS NOT NULL
UNION ALL
SELECT
    s.run_id, s.task_idx, s.repeat, s.task_id,
    coalesce(r.config ->> 'primary_metric', 'reward') AS metric,
    s.reward, s.passed, s.extracted_answer, s.scoring_method, s.scoring_details, s.failure_category
FROM steps s JOIN runs r USING (run_id)
WHERE s.scores IS NULL;

-- One row per run and metric: mean reward and pass rate over tasks (repeats reduced within each
-- task first) with a 95 % interval: run_metrics' pass@1 interval when every task's mean reward is in
-- [0, 1], else the plain Student t one (none with one task).
CREATE OR REPLACE VIEW run_scores AS
WITH per_task AS (
    SELECT run_id, metric, task_idx,
           count(*)                         AS n,
           avg(reward)                      AS mean_reward,
           avg(CAST(passed AS DOUBLE))      AS pass_rate
    FROM step_scores
    GROUP BY run_id, metric, task_idx
), per_metric AS (
    SELECT run_id, metric,
           count(*)                                             AS n_tasks,
           sum(n)                                               AS n_steps,
           avg(mean_reward)                                     AS mean_reward,
           stddev_samp(mean_reward) / sqrt(count(mean_reward))  AS se,
           t_quantile_975(count(mean_reward) - 1)               AS t,
           count(mean_reward)                                   AS n,
           bool_and(mean_reward BETWEEN 0 AND 1)                AS unit,
           bool_and(mean_reward IN (0, 1))                      AS two_valued,
           avg(pass_rate)                                       AS pass_rate
    FROM per_task
    GROUP BY run_id, metric
)
SELECT
    run_id, metric, n_tasks, n_steps, mean_reward,
    CASE WHEN unit THEN unit_mean_low_95(mean_reward, se, n, two_valued) ELSE mean_reward - t * se END
        AS mean_reward_low,
    CASE WHEN unit THEN unit_mean_high_95(mean_reward, se, n, two_valued) ELSE mean_reward + t * se END
        AS mean_reward_high,
    pass_rate,
    CASE WHEN unit THEN unit_mean_method_95(mean_reward, se, n, two_valued) WHEN n > 1 THEN 't' ELSE 'none' END
        AS mean_reward_method
FROM per_metric;
