"""The deployment, for real: the nel image built from a locally made base (deploy/build-image.sh, nothing pulled),
`nel serve` in a container answering /health and its probe, an eval between containers into a bind-mounted store,
the Kubernetes manifests checked and then run as the Job controller would run them (one container per completion
index, the claim as a bind mount, then the merge Job), and the docker-compose sharded profile end to end.

Every container and network carries a label unique to this run and is removed afterwards; dockerd and the images
stay (a later run reuses the image while the source is unchanged)."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from workbench.sandbox.daemon import DockerdMissing, ensure_dockerd
from workbench.store import open_store

# The first test pays for the image build (base image + wheelhouse + docker build: ~3 min from nothing).
pytestmark = pytest.mark.timeout(600)

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
IMAGE = os.environ.get("NEL_IMAGE", "nel-workbench:local")
BASE = os.environ.get("NEL_BASE_IMAGE", "nel-base:bookworm")
RUN = f"nel-test-{secrets.token_hex(4)}"  # prefix of every name, and the label value, of this test run
LABEL = f"org.nel.test={RUN}"
SHARD_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"


# ---------------------------------------------------------------- docker helpers


def docker(*args: str, timeout: float = 120, check: bool = True, **kw: Any) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        ["docker", *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, **kw
    )
    if check and proc.returncode != 0:
        pytest.fail(f"docker {' '.join(args)}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def _docker_ok() -> bool:
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _wait(what: str, check: Any, timeout: float = 30, interval: float = 0.25) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def _logs(name: str) -> str:
    proc = docker("logs", name, check=False)
    return f"--- logs of {name}:\n{proc.stdout}{proc.stderr}"


def _store_dir(tmp_path: Path, name: str = "data") -> Path:
    """A host directory to bind-mount at /data: the image's user (uid 10001) writes there."""
    path = tmp_path / name
    path.mkdir()
    path.chmod(0o777)
    return path


@pytest.fixture(scope="session")
def docker_engine(tmp_path_factory: pytest.TempPathFactory) -> None:
    """A running Docker engine: the one there is, else dockerd started here (and left running)."""
    if shutil.which("docker") is None:
        pytest.skip("the Docker client is not installed (`make system` installs docker.io)")
    try:
        ensure_dockerd(tmp_path_factory.mktemp("dockerd") / "dockerd.log")
    except DockerdMissing as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def image(docker_engine: None) -> str:
    """The nel image, built by deploy/build-image.sh (which skips the build when the source hash is unchanged)."""
    proc = subprocess.run(
        [str(DEPLOY / "build-image.sh")],
        capture_output=True,
        text=True,
        timeout=560,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "NEL_IMAGE": IMAGE, "NEL_BASE_IMAGE": BASE},
    )
    assert proc.returncode == 0, f"deploy/build-image.sh: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return IMAGE


@pytest.fixture(scope="module", autouse=True)
def _cleanup() -> Iterator[None]:
    """Remove this run's containers and networks, whatever happened."""
    yield
    if shutil.which("docker") is None or not _docker_ok():
        return
    ids = docker("ps", "-aq", "--filter", f"label={LABEL}", check=False).stdout.split()
    if ids:
        docker("rm", "-f", "-v", *ids, check=False)
    nets = docker("network", "ls", "-q", "--filter", f"label={LABEL}", check=False).stdout.split()
    if nets:
        docker("network", "rm", *nets, check=False)


@pytest.fixture
def network(docker_engine: None) -> str:
    """A user-defined bridge network: containers on it find each other by name (as Services do in a cluster)."""
    name = f"{RUN}-net-{secrets.token_hex(2)}"
    docker("network", "create", "--label", LABEL, name)
    return name


# ---------------------------------------------------------------- manifests


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _one(path: Path, kind: str) -> dict[str, Any]:
    (doc,) = [d for d in _docs(path) if d["kind"] == kind]
    return doc


def _container(workload: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The pod spec and its (only) container."""
    pod = workload["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return pod, container


def _expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' $(VAR) expansion in args and env values."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m[1], m[0]), str(text))


def _pod_env(
    container: dict[str, Any],
    *,
    annotations: Mapping[str, str],
    secret_values: Mapping[str, Mapping[str, str]],
    extra: Mapping[str, str] = {},
) -> dict[str, str]:
    """The container's environment as the kubelet resolves it: values, fieldRefs to annotations, secretKeyRefs."""
    env: dict[str, str] = dict(extra)
    for item in container.get("env", []):
        name = item["name"]
        if "value" in item:
            env[name] = _expand(item["value"], env)
            continue
        source = item["valueFrom"]
        if "fieldRef" in source:
            m = re.fullmatch(r"metadata\.annotations\['([^']+)'\]", source["fieldRef"]["fieldPath"])
            assert m, f"{name}: a fieldRef this emulation does not know: {source}"
            env[name] = annotations[m[1]]
        elif "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            env[name] = secret_values[ref["name"]][ref["key"]]
        else:
            raise AssertionError(f"{name}: unexpected valueFrom {source}")
    return env


def _run_args(
    pod: dict[str, Any],
    container: dict[str, Any],
    *,
    name: str,
    env: Mapping[str, str],
    claims: Mapping[str, Path] = {},
    config_maps: Mapping[str, Path] = {},
    network: str | None = None,
    aliases: Sequence[str] = (),
    detach: bool = False,
    extra: Sequence[str] = (),
) -> list[str]:
    """`docker run` arguments for a pod's container: its image replaced by the local one, the claims and the
    ConfigMaps (``config_maps``: a directory holding each one's files) by bind mounts."""
    args = ["run", "--name", name, "--label", LABEL]
    args += ["-d"] if detach else []
    sec = {**pod.get("securityContext", {}), **container.get("securityContext", {})}
    if "runAsUser" in sec:
        args += ["--user", f"{sec['runAsUser']}:{sec.get('runAsGroup', sec['runAsUser'])}"]
    if "fsGroup" in sec:
        args += ["--group-add", str(sec["fsGroup"])]
    if sec.get("readOnlyRootFilesystem"):
        args.append("--read-only")
    if sec.get("allowPrivilegeEscalation") is False:
        args += ["--security-opt", "no-new-privileges"]
    for cap in sec.get("capabilities", {}).get("drop", []):
        args += ["--cap-drop", cap]
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        if "persistentVolumeClaim" in volume:
            args += ["-v", f"{claims[volume['persistentVolumeClaim']['claimName']]}:{mount['mountPath']}"]
        elif "configMap" in volume:
            args += ["-v", f"{config_maps[volume['configMap']['name']]}:{mount['mountPath']}:ro"]
        elif "emptyDir" in volume:
            args += ["--tmpfs", f"{mount['mountPath']}:exec,mode=1777"]
        else:
            raise AssertionError(f"unexpected volume {volume}")
    for key, value in env.items():
        args += ["-e", f"{key}={value}"]
    if network:
        args += ["--network", network, *(f"--network-alias={a}" for a in aliases)]
    command = [_expand(c, env) for c in container.get("command", [])]
    if command:
        args += ["--entrypoint", command[0]]
    return [*args, *extra, IMAGE, *command[1:], *(_expand(a, env) for a in container.get("args", []))]


def _exec_probe(
    name: str, probe: dict[str, Any], env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    extra = [f"-e={k}={v}" for k, v in (env or {}).items()]
    return docker("exec", *extra, name, *probe["exec"]["command"], check=False, timeout=30)


def _start_mock(network: str) -> tuple[str, str]:
    """The mock model of deploy/k8s/mock.yaml, reachable on ``network`` by its Service's name."""
    docs = _docs(K8S / "mock.yaml")
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    service = next(d for d in docs if d["kind"] == "Service")
    pod, container = _container(deployment)
    name = f"{RUN}-mock-{secrets.token_hex(2)}"
    docker(
        *_run_args(
            pod, container, name=name, env={}, network=network, aliases=[service["metadata"]["name"]], detach=True
        )
    )
    port = container["ports"][0]["containerPort"]
    path = container["readinessProbe"]["httpGet"]["path"]
    url = f"http://127.0.0.1:{port}{path}"
    _wait(
        f"the mock's readiness ({url})",
        lambda: docker("exec", name, "nel-healthcheck", url, check=False).returncode == 0,
        timeout=40,
    )
    return name, service["metadata"]["name"]


def _run_all(argvs: Sequence[list[str]], timeout: float = 120) -> list[subprocess.CompletedProcess[str]]:
    with ThreadPoolExecutor(max_workers=max(1, len(argvs))) as pool:
        return list(pool.map(lambda a: docker(*a, check=False, timeout=timeout), argvs))


def _assert_ran(proc: subprocess.CompletedProcess[str], code: int = 0) -> None:
    assert proc.returncode == code, f"{proc.args}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr


# ---------------------------------------------------------------- (a) nel serve


def test_serve_answers_health_through_a_published_port_and_its_probes_pass(image: str) -> None:
    deployment = _one(K8S / "serve.yaml", "Deployment")
    pod, container = _container(deployment)
    token = secrets.token_hex(16)
    env = _pod_env(container, annotations={}, secret_values={"nel-serve-token": {"token": token}})
    port = container["ports"][0]["containerPort"]
    probe_cmd = " ".join(container["readinessProbe"]["exec"]["command"])
    name = f"{RUN}-serve"
    docker(
        *_run_args(
            pod,
            container,
            name=name,
            env=env,
            detach=True,
            extra=[
                "-p",
                f"127.0.0.1::{port}",
                "--health-cmd",
                probe_cmd,
                "--health-interval",
                "1s",
                "--health-timeout",
                "4s",
                "--health-retries",
                "3",
            ],
        )
    )
    host_port = docker("port", name, str(port)).stdout.split()[0].rsplit(":", 1)[1]
    url = f"http://127.0.0.1:{host_port}/health"

    def health(auth: str | None) -> tuple[int, dict[str, Any]] | None:
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {auth}"} if auth else {})
        try:
            with urllib.request.urlopen(request, timeout=3) as reply:
                return reply.status, json.load(reply)
        except urllib.error.HTTPError as exc:
            return exc.code, json.load(exc)
        except (urllib.error.URLError, ConnectionError):
            return None

    try:
        status, body = _wait("GET /health through the published port", lambda: health(token), timeout=40)
    except BaseException:
        print(_logs(name))
        raise
    assert status == 200, body
    assert body["status"] == "ok" and body["benchmark"] == "gsm8k" and body["dataset_size"] > 1000
    status, _ = health(None) or (0, {})
    assert status == 401, "binding beyond loopback requires the token"

    for kind in ("readinessProbe", "livenessProbe"):
        probe = _exec_probe(name, container[kind])
        assert probe.returncode == 0, f"{kind}: {probe.stdout}{probe.stderr}"
        assert "gsm8k" in probe.stdout
    wrong = _exec_probe(name, container["livenessProbe"], {"NEL_SERVE_TOKEN": "wrong"})
    assert wrong.returncode == 1 and "401" in wrong.stderr
    _wait(
        "docker's health status 'healthy'",
        lambda: docker("inspect", "-f", "{{.State.Health.Status}}", name).stdout.strip() == "healthy",
        timeout=30,
    )
    assert docker("inspect", "-f", "{{.Config.User}}", name).stdout.strip() == "10001:10001"


def test_serve_refuses_to_listen_beyond_loopback_without_a_token(image: str) -> None:
    proc = docker(
        "run",
        "--rm",
        "--label",
        LABEL,
        image,
        "serve",
        "-b",
        "gsm8k",
        "--host",
        "0.0.0.0",
        "--allow-remote",
        check=False,
        timeout=60,
    )
    assert proc.returncode == 2 and "needs a token" in proc.stderr, proc.stderr


# ---------------------------------------------------------------- (b) an eval between containers


def test_an_eval_container_writes_a_complete_run_into_a_bind_mounted_store(
    image: str, network: str, tmp_path: Path
) -> None:
    _, host = _start_mock(network)
    data = _store_dir(tmp_path)
    proc = docker(
        "run",
        "--rm",
        "--label",
        LABEL,
        "--network",
        network,
        "-v",
        f"{data}:/data",
        image,
        "eval",
        "run",
        "-b",
        "gsm8k",
        "--model-url",
        f"http://{host}:8000/v1",
        "--model-id",
        "nel-mock",
        "--max-problems",
        "12",
        "--repeats",
        "2",
        "--run-id",
        "in-docker",
        "--no-progress",
        timeout=120,
    )
    _assert_ran(proc)
    assert "store    /data/nel.duckdb" in proc.stdout
    store = open_store(data / "nel.duckdb")
    run = store.sql("SELECT run_id, status, n_tasks FROM runs").rows()
    assert run == [("in-docker", "complete", 12)]
    steps = store.steps()
    assert steps.height == 24 and steps.select("task_idx", "repeat").unique().height == 24
    assert (data / "nel-results" / "runs" / "in-docker" / "summary.json").is_file()


# ---------------------------------------------------------------- (c) the Kubernetes manifests


def test_the_manifests_are_kubernetes_objects_wired_as_documented() -> None:
    pvc = _one(K8S / "pvc.yaml", "PersistentVolumeClaim")
    assert "ReadWriteMany" in pvc["spec"]["accessModes"]
    claim = pvc["metadata"]["name"]

    for path in sorted(K8S.glob("*.yaml")):
        for doc in _docs(path):
            if doc.get("kind") == "Kustomization":
                continue
            assert doc.get("apiVersion") and doc.get("kind") and doc["metadata"]["name"], path
            if doc["kind"] in ("Deployment", "Job"):
                assert doc["apiVersion"] == {"Deployment": "apps/v1", "Job": "batch/v1"}[doc["kind"]]
                pod, container = _container(doc)
                labels = doc["spec"]["template"]["metadata"]["labels"]
                if doc["kind"] == "Deployment":
                    assert doc["spec"]["selector"]["matchLabels"].items() <= labels.items(), path
                else:
                    assert pod["restartPolicy"] in ("Never", "OnFailure"), path
                assert container["image"].split(":")[0] == IMAGE.split(":")[0], path
                for item in container.get("env", []):
                    assert not re.search(r"KEY|TOKEN|SECRET|PASSWORD", item["name"]) or "secretKeyRef" in item.get(
                        "valueFrom", {}
                    ), f"{path}: {item['name']} must come from a Secret, never inline"
                for volume in pod.get("volumes", []):
                    if "persistentVolumeClaim" in volume:
                        assert volume["persistentVolumeClaim"]["claimName"] == claim, path

    shards = _one(K8S / "eval-shards-job.yaml", "Job")
    spec = shards["spec"]
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] >= 2 and 1 <= spec["parallelism"] <= spec["completions"]
    _, container = _container(shards)
    env = {item["name"]: item for item in container["env"]}
    assert env["NEL_TOTAL_SHARDS"]["value"] == str(spec["completions"])
    assert env["NEL_SHARD_IDX"]["valueFrom"]["fieldRef"]["fieldPath"] == (
        f"metadata.annotations['{SHARD_INDEX_ANNOTATION}']"
    )
    assert env["NEMO_API_KEY"]["valueFrom"]["secretKeyRef"] == {"name": "nel-model-api", "key": "api-key"}
    args = container["args"]
    assert args[:2] == ["eval", "run"] and "--resume" in args
    spec_path = args[args.index("--spec") + 1]  # every shard reads the one run specification, whole
    pod, _ = _container(shards)
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"]}
    assert set(mounts) == {"/data", "/etc/nel"} and spec_path.startswith("/etc/nel/")
    config_map = _one(K8S / "run-spec.yaml", "ConfigMap")
    assert mounts["/etc/nel"]["configMap"]["name"] == config_map["metadata"]["name"]
    spec = json.loads(config_map["data"][Path(spec_path).name])
    assert spec["output"]["store"].startswith("/data/") and spec["benchmarks"][0]["run_id"]

    merge = _one(K8S / "merge-job.yaml", "Job")
    assert merge["spec"].get("completionMode", "NonIndexed") == "NonIndexed"
    _, container = _container(merge)
    assert container["args"] == ["eval", "merge", "/data"]

    serve_docs = _docs(K8S / "serve.yaml")
    deployment = next(d for d in serve_docs if d["kind"] == "Deployment")
    service = next(d for d in serve_docs if d["kind"] == "Service")
    _, container = _container(deployment)
    assert service["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    port_names = {p["name"] for p in container["ports"]}
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= port_names
    for kind in ("readinessProbe", "livenessProbe"):
        assert any("/health" in part for part in container[kind]["exec"]["command"]), kind
    assert container["env"] == [
        {"name": "NEL_SERVE_TOKEN", "valueFrom": {"secretKeyRef": {"name": "nel-serve-token", "key": "token"}}}
    ]
    assert "--allow-remote" in container["args"] and "0.0.0.0" in container["args"]

    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert all((K8S / r).is_file() for r in kustomization["resources"])
    assert "merge-job.yaml" not in kustomization["resources"], "the merge is applied once the shards are complete"


def test_the_indexed_job_then_the_merge_job_as_the_job_controller_runs_them(
    image: str, network: str, tmp_path: Path
) -> None:
    """Each completion index runs the pod template's container (the claim a bind mount, the Services names on one
    network); then the merge Job. A merge before every shard has finished names the missing one and exits 1."""
    _start_mock(network)
    data = _store_dir(tmp_path)
    shards = _one(K8S / "eval-shards-job.yaml", "Job")
    pod, container = _container(shards)
    n = shards["spec"]["completions"]
    api = {"nel-model-api": {"api-key": "not-needed-by-the-mock"}}
    claims = {"nel-data": data}
    config_map = _one(K8S / "run-spec.yaml", "ConfigMap")
    spec_dir = tmp_path / "run-spec"  # the ConfigMap's files, as the kubelet mounts them
    spec_dir.mkdir()
    for name, text in config_map["data"].items():
        (spec_dir / name).write_text(text)
    spec_dir.chmod(0o755)
    config_maps = {config_map["metadata"]["name"]: spec_dir}

    def shard(index: int, attempt: int = 0) -> list[str]:
        env = _pod_env(
            container,
            annotations={SHARD_INDEX_ANNOTATION: str(index)},
            secret_values=api,
            extra={"JOB_COMPLETION_INDEX": str(index)},
        )
        assert env["NEL_SHARD_IDX"] == str(index) and env["NEL_TOTAL_SHARDS"] == str(n)
        return _run_args(pod, container, name=f"{RUN}-shard-{index}-{attempt}", env=env, claims=claims,
                         config_maps=config_maps, network=network)

    merge_pod, merge_container = _container(_one(K8S / "merge-job.yaml", "Job"))

    def merge(attempt: int) -> subprocess.CompletedProcess[str]:
        return docker(
            *_run_args(merge_pod, merge_container, name=f"{RUN}-merge-{attempt}", env={}, claims=claims),
            check=False,
            timeout=120,
        )

    first = _run_all([shard(i) for i in range(n - 1)])  # the last index is late
    for proc in first:
        _assert_ran(proc)
    store = data / "nel.duckdb"
    assert not store.exists() and (data / "nel.duckdb.segments").is_dir(), "shards write segments, not the file"

    early = merge(0)
    _assert_ran(early, code=1)
    assert f"missing shards: {n - 1}" in early.stdout

    _assert_ran(_run_all([shard(n - 1)])[0])
    retried = _run_all([shard(0, attempt=1)])[0]  # a pod the controller retries continues its shard
    _assert_ran(retried)
    assert "0 new steps" in retried.stdout

    done = merge(1)
    _assert_ran(done)
    (bench,) = json.loads(config_map["data"]["spec.json"])["benchmarks"]
    problems, repeats, run_id = bench["max_problems"], bench["repeats"], bench["run_id"]
    assert f"run {run_id}: complete" in done.stdout

    s = open_store(store)
    assert s.sql("SELECT run_id, status, total_shards, n_tasks FROM runs").rows() == [(run_id, "complete", n, problems)]
    steps = s.steps()
    assert steps.height == problems * repeats
    assert steps.select("task_idx", "repeat").unique().height == problems * repeats
    assert sorted(steps["shard_idx"].unique().to_list()) == list(range(n))
    assert (data / "runs" / run_id).is_dir(), "the merge exports the complete run"


# ---------------------------------------------------------------- (d) docker-compose


def test_docker_compose_runs_the_sharded_profile_end_to_end(image: str, tmp_path: Path) -> None:
    if shutil.which("docker-compose") is None:
        pytest.skip("docker-compose is not installed (`make system` installs it)")
    data = _store_dir(tmp_path)
    project = f"{RUN}-compose"
    env = {
        **os.environ,
        "NEL_IMAGE": image,
        "NEL_DATA": str(data),
        "NEL_RUN_ID": "composed",
        "NEL_MAX_PROBLEMS": "10",
        "NEL_REPEATS": "3",
    }
    for key in ("NEL_SHARD_IDX", "NEL_TOTAL_SHARDS", "NEL_STORE", "NEMO_API_KEY", "NEL_SERVE_TOKEN"):
        env.pop(key, None)
    compose = ["docker-compose", "-p", project, "-f", str(DEPLOY / "docker-compose.yaml"), "--profile", "sharded"]

    def run(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*compose, *args], capture_output=True, text=True, env=env, timeout=timeout, stdin=subprocess.DEVNULL
        )

    config = run("--profile", "eval", "--profile", "serve", "config", "--services")
    assert config.returncode == 0, config.stderr
    assert set(config.stdout.split()) == {"mock", "serve", "eval", "shard-0", "shard-1", "merge"}
    try:
        proc = run("run", "--rm", "merge")  # starts mock, waits for it healthy, both shards, then merges
        assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}\n{run('logs').stdout}"
        assert "30 new steps from 2 finished shards" in proc.stdout and "run composed: complete" in proc.stdout
        s = open_store(data / "nel.duckdb")
        assert s.sql("SELECT status, total_shards FROM runs").rows() == [("complete", 2)]
        steps = s.steps()
        assert steps.height == 30 and steps.group_by("shard_idx").len().sort("shard_idx")["len"].to_list() == [15, 15]
    finally:
        down = run("down", "-v", "--remove-orphans", timeout=120)
        assert down.returncode == 0, down.stderr
    assert not docker("ps", "-aq", "--filter", f"label=com.docker.compose.project={project}").stdout.strip()
