"""A stored run as one MLflow run: parameters, headline metrics and the artifact files.

Where: the tracking store ``tracking_uri`` names (the config's ``output.export_config.mlflow.tracking_uri``),
else ``MLFLOW_TRACKING_URI``, else a local sqlite store ``mlflow.db`` in the export directory (its artifacts in
``mlartifacts/`` beside it). Credentials for a remote server come from the environment only
(``MLFLOW_TRACKING_TOKEN``, ``MLFLOW_TRACKING_USERNAME``/``PASSWORD``), which MLflow reads itself.

Exporting again reuses the MLflow run tagged with the same ``nel.run_id`` in the experiment: parameters already
logged are kept (MLflow's parameters are immutable, and a run's configuration does not change), metrics are logged
again (MLflow shows the latest value), artifacts are replaced. So a re-export never duplicates a run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient

from workbench.export.run_facts import run_metrics, run_params
from workbench.secrets import redact_value

RUN_TAG = "nel.run_id"
_METRICS, _PARAMS = 1000, 100  # what one MLflow log_batch call takes at most


@dataclass(frozen=True, slots=True)
class MlflowExport:
    """Where the run went: the tracking URI (credentials redacted), the experiment, the MLflow run id, and
    whether an earlier export's run was reused."""

    tracking_uri: str
    experiment: str
    mlflow_run_id: str
    reused: bool


def tracking_uri(configured: str | None, out_dir: Path) -> str:
    """The configured URI, else ``MLFLOW_TRACKING_URI``, else ``sqlite:///OUT/mlflow.db``."""
    return configured or os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{(out_dir / 'mlflow.db').resolve()}"


def export_mlflow(bundle: dict[str, Any], files: list[Path], out_dir: Path, *, uri: str | None = None,
                  experiment: str | None = None, run_name: str | None = None,
                  tags: dict[str, str] | None = None) -> MlflowExport:
    """Log ``bundle``'s run (parameters, metrics, ``files`` as artifacts) to MLflow; see the module docstring."""
    target = tracking_uri(uri, out_dir)
    client = MlflowClient(tracking_uri=target)
    name = experiment or bundle["benchmark"]
    found = client.get_experiment_by_name(name)
    if found is not None:
        experiment_id = found.experiment_id
    else:
        local = target.startswith("sqlite:") and not uri and not os.environ.get("MLFLOW_TRACKING_URI")
        location = (out_dir / "mlartifacts").resolve().as_uri() if local else None
        experiment_id = client.create_experiment(name, artifact_location=location)
    run_id = bundle["run_id"]
    existing = client.search_runs([experiment_id], filter_string=f"tags.`{RUN_TAG}` = '{_quote(run_id)}'",
                                  max_results=1)
    all_tags = {RUN_TAG: run_id, "nel.benchmark": bundle["benchmark"], "nel.status": bundle["status"],
                "mlflow.runName": run_name or run_id, **(tags or {})}
    if existing:
        run = existing[0]
        known = run.data.params
    else:
        run = client.create_run(experiment_id, run_name=run_name or run_id, tags=all_tags)
        known = {}
    mlflow_run = run.info.run_id
    params = [Param(k, v[:6000]) for k, v in run_params(bundle).items() if k not in known]
    metrics = [Metric(k, v, 0, 0) for k, v in run_metrics(bundle).items()]
    run_tags = [RunTag(k, v) for k, v in all_tags.items()]
    client.log_batch(mlflow_run, metrics=metrics[:_METRICS], params=params[:_PARAMS], tags=run_tags)
    for i in range(_METRICS, len(metrics), _METRICS):
        client.log_batch(mlflow_run, metrics=metrics[i:i + _METRICS])
    for i in range(_PARAMS, len(params), _PARAMS):
        client.log_batch(mlflow_run, params=params[i:i + _PARAMS])
    for path in files:
        if path.is_dir():
            client.log_artifacts(mlflow_run, str(path), artifact_path=path.name)
        else:
            client.log_artifact(mlflow_run, str(path))
    status = "FINISHED" if bundle["status"] == "complete" else "FAILED" if bundle["status"] == "failed" else "KILLED"
    client.set_terminated(mlflow_run, status=status)
    return MlflowExport(str(redact_value(target)), name, mlflow_run, bool(existing))


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")
