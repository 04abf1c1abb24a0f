-- Answered but wrong: what the model said against what was expected.
SELECT run_id, task_idx, repeat, expected_answer, extracted_answer, scoring_method
FROM steps
WHERE NOT passed AND failure_category IS NULL
ORDER BY run_id, task_idx, repeat;
