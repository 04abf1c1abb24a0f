-- Tasks that pass on some attempts and fail on others: the highest-signal slice for triage.
SELECT run_id, task_idx, task_id, n_pass, n, round(pass_rate, 3) AS pass_rate,
       round(wilson_low, 3) AS wilson_low, round(wilson_high, 3) AS wilson_high
FROM task_stats
WHERE bucket = 'sometimes'
ORDER BY run_id, pass_rate, task_idx;
