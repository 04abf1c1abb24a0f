-- Failure categories per run, most frequent first.
SELECT run_id, failure_category, n, round(100 * share, 2) AS pct
FROM failure_counts
ORDER BY run_id, n DESC;
