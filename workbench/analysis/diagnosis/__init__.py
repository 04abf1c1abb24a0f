"""BLADE-style diagnosis: which tasks drove a score shift, and why (``nel diagnose``, the notebooks'
widgets). Deterministic: every number is computed from the runs, every claim cites task ids and counts;
the suggested interventions come from documented rules and are labelled as heuristic."""
