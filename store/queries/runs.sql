-- Every run, newest first, with its source (nel, gym, lm-eval, inspect), pass@1 and its 95 % interval.
SELECT run_id, source, benchmark, model_id, status, n_tasks, n_repeats, n_steps, n_steps_expected,
       round(pass_at_1, 4) AS pass_at_1, round(pass_at_1_low, 4) AS low, round(pass_at_1_high, 4) AS high,
       n_errors, created_at
FROM run_metrics
ORDER BY created_at DESC;
