"""deploy/k8s: the kustomize base renders offline with `kubectl kustomize`, every object validates
against the Kubernetes schema (kubernetes-validate, strict), each party's Secret is its kit and
nothing more, and the pods' commands, run locally the way the kubelet would run them, complete the
quickstart and its report."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import QUICKSTART, ROOT
from system_tools import skip_unless_tools

BASE = ROOT / "deploy" / "k8s"
KUBERNETES_VERSION = "1.30.0"
OWNERS = ["owner-1", "owner-2", "owner-3", "owner-4"]


def render(folder: Path, scenario: Path) -> dict[tuple[str, str], dict]:
    """The base with kits freshly provisioned for ``scenario``, rendered by `kubectl kustomize`: (kind, name) ->
    object."""
    skip_unless_tools("kubectl", why="rendering deploy/k8s with `kubectl kustomize`")
    shutil.copytree(BASE, folder, ignore=shutil.ignore_patterns("kits"))
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "marketplace",
            "provision",
            str(scenario),
            "--out",
            str(folder / "kits"),
            "--endpoint",
            "tcp://marketplace-curator:5555",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert made.returncode == 0, made.stderr
    result = subprocess.run(["kubectl", "kustomize", str(folder)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    objects = {(doc["kind"], doc["metadata"]["name"]): doc for doc in yaml.safe_load_all(result.stdout) if doc}
    objects["kits"] = folder / "kits"  # type: ignore[assignment]
    return objects


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict[tuple[str, str], dict]:
    return render(tmp_path_factory.mktemp("k8s") / "k8s", QUICKSTART)


@pytest.fixture(scope="module")
def own_files(tmp_path_factory) -> Path:
    """Files of a marketplace described by its public schema (`marketplace shares`), and its market file."""
    folder = tmp_path_factory.mktemp("own") / "own"
    made = subprocess.run(
        [
            sys.executable,
            "-m",
            "marketplace",
            "shares",
            str(ROOT / "scenarios" / "sketch-quickstart.yaml"),
            "--out",
            str(folder),
            "--set",
            "sketch.samples=2000",
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert made.returncode == 0, made.stderr
    return folder


def secret_files(secret: dict) -> set[str]:
    return set(secret.get("data", {})) | set(secret.get("stringData", {}))


def pod_spec(obj: dict) -> dict:
    return obj["spec"]["template"]["spec"]


def test_every_object_validates_against_the_kubernetes_schema(rendered):
    import kubernetes_validate

    objects = [v for k, v in rendered.items() if k != "kits"]
    for obj in objects:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
    kinds = sorted(kind for kind, _ in (k for k in rendered if k != "kits"))
    assert kinds == sorted(
        [
            "ConfigMap",
            "Deployment",
            "Job",
            "Job",
            "PersistentVolumeClaim",
            "PersistentVolumeClaim",
            "Secret",
            "Secret",
            "Secret",
            "Secret",
            "Secret",
            "Secret",
            "Service",
            "Service",
            "StatefulSet",
        ]
    )


def test_a_broken_object_fails_the_validation(rendered):
    import kubernetes_validate

    broken = json.loads(json.dumps(rendered[("StatefulSet", "marketplace-owner")]))
    broken["spec"]["replicas"] = "four"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def test_one_secret_per_party_kit_each_with_only_its_own_secret_key(rendered):
    for party in ["curator", *OWNERS, "consumer"]:
        files = secret_files(rendered[("Secret", f"kit-{party}")])
        assert [f for f in files if f.endswith(".key_secret")] == [f"{party}.key_secret"]
        publics = sorted(f for f in files if f.endswith(".key"))
        expected = sorted(f"{p}.key" for p in [*OWNERS, "consumer"]) if party == "curator" else ["curator.key"]
        assert publics == expected, party
        assert {"scenario.yaml", "start.sh", "kit.json"} <= files
    assert "scenario.yaml" in rendered[("ConfigMap", "marketplace-scenario")]["data"]


def env_of(container: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", [])}


def test_the_owners_statefulset_runs_one_owner_host_per_pod_and_the_host_sees_only_its_owners_kits(rendered):
    owners = rendered[("StatefulSet", "marketplace-owner")]
    spec = pod_spec(owners)
    env = env_of(spec["containers"][0])
    init_env = env_of(spec["initContainers"][0])
    assert {k: env[k] for k in init_env} == init_env and int(env["OWNERS"]) == len(OWNERS)
    assert owners["spec"]["replicas"] == -(-len(OWNERS) // int(env["OWNERS_PER_POD"])) == 2
    assert "marketplace owners --ids $ids" in spec["containers"][0]["command"][-1]
    secrets = sorted(v["secret"]["secretName"] for v in spec["volumes"] if "secret" in v)
    assert secrets == [f"kit-{o}" for o in OWNERS]
    (owner,) = spec["containers"]
    mounted = {m["name"] for m in owner["volumeMounts"]}
    assert mounted == {"kit", "runs", "ledgers", "own-data"}
    assert {"name": "kit", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}} in spec["volumes"]
    # each owner pod's lifetime ledgers and its owners' own files on claims of its own (one per pod)
    claims = {c["metadata"]["name"]: c for c in owners["spec"]["volumeClaimTemplates"]}
    assert sorted(claims) == ["ledgers", "own-data"]
    assert all(c["spec"]["accessModes"] == ["ReadWriteOnce"] for c in claims.values())
    assert next(m for m in owner["volumeMounts"] if m["name"] == "own-data")["readOnly"] is True
    assert "--data /own-data" in owner["command"][-1]
    assert env["MARKETPLACE_LEDGERS"] == next(m["mountPath"] for m in owner["volumeMounts"] if m["name"] == "ledgers")
    curator = pod_spec(rendered[("Deployment", "marketplace-curator")])
    assert [v["secret"]["secretName"] for v in curator["volumes"] if "secret" in v] == ["kit-curator"]
    consumer = pod_spec(rendered[("Job", "marketplace-consumer")])
    assert [v["secret"]["secretName"] for v in consumer["volumes"] if "secret" in v] == ["kit-consumer"]
    claims = [v["persistentVolumeClaim"]["claimName"] for v in consumer["volumes"] if "persistentVolumeClaim" in v]
    assert sorted(claims) == [
        "marketplace-consumer-data",
        "marketplace-runs",
    ]  # the consumer's own files: its claim only
    for name, obj in rendered.items():
        if name[0] in ("Deployment", "StatefulSet", "Job") and name[1] != "marketplace-consumer":
            assert "marketplace-consumer-data" not in json.dumps(obj), name
    report = pod_spec(rendered[("Job", "marketplace-report")])
    assert not [v for v in report["volumes"] if "secret" in v], "the report step holds no key"
    service = rendered[("Service", "marketplace-curator")]
    assert service["spec"]["ports"][0]["port"] == 5555


class Kubelet:
    """Runs a rendered pod's container commands as local processes: each pod gets a local root
    folder where each volume is mounted (a folder for an emptyDir, the files of a Secret or a
    ConfigMap, one shared folder for the claim), absolute paths in the commands point into it,
    HOSTNAME is the pod's name, and the curator's Service name maps to 127.0.0.1."""

    def __init__(self, rendered: dict, folder: Path, port: int) -> None:
        self.rendered = rendered
        self.folder = folder
        self.port = port
        self.runs = folder / "runs"
        self.runs.mkdir()
        (folder / "bin").mkdir()
        shim = folder / "bin" / "marketplace"
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m marketplace "$@"\n')
        shim.chmod(0o755)

    def root(self, pod: str) -> Path:
        return self.folder / "pods" / pod

    def volume(self, pod: str, volume: dict) -> Path:
        import base64

        if "persistentVolumeClaim" in volume:
            claim = volume["persistentVolumeClaim"]["claimName"]
            if claim == "marketplace-runs":
                return self.runs
            local = self.folder / "claims" / claim  # a claim of one pod's (the consumer's own files)
            local.mkdir(parents=True, exist_ok=True)
            return local
        local = self.folder / "volumes" / pod / volume["name"]
        if local.exists():
            return local
        local.mkdir(parents=True)
        if "secret" in volume:
            for key, value in self.rendered[("Secret", volume["secret"]["secretName"])]["data"].items():
                (local / key).write_bytes(base64.b64decode(value))
        elif "configMap" in volume:
            for key, value in self.rendered[("ConfigMap", volume["configMap"]["name"])]["data"].items():
                (local / key).write_text(value)
        return local

    def mount(self, spec: dict, pod: str, container: dict) -> None:
        volumes = {v["name"]: v for v in spec["volumes"]}
        for m in container["volumeMounts"]:
            volumes.setdefault(
                m["name"], {"name": m["name"], "emptyDir": {}}
            )  # a StatefulSet's per-pod claim: a folder of the pod's
            link = self.root(pod) / m["mountPath"].lstrip("/")
            if not link.is_symlink():
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(self.volume(pod, volumes[m["name"]]), target_is_directory=True)

    def start(self, spec: dict, pod: str, container: dict) -> subprocess.Popen:
        import re

        self.mount(spec, pod, container)
        tops = sorted({"/" + m["mountPath"].split("/")[1] for m in container["volumeMounts"]}, key=len, reverse=True)
        pattern = re.compile(r"(?<![\w./-])(" + "|".join(map(re.escape, tops)) + r")(?=/|\s|$|\")")
        command = [
            pattern.sub(lambda m: f"{self.root(pod)}{m.group(1)}", word).replace("exec sleep infinity", "true")
            for word in container["command"]
        ]
        env = dict(
            os.environ,
            HOSTNAME=pod,
            PYTHONPATH=str(ROOT),
            PATH=f"{self.folder / 'bin'}:{os.environ['PATH']}",
            MARKETPLACE_ENDPOINT=f"tcp://127.0.0.1:{self.port}",
            **env_of(container),
        )
        log = open(self.folder / f"{pod}-{container['name']}.log", "w")
        return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=self.folder)


@pytest.mark.slow
def test_the_pods_commands_run_the_quickstart_to_a_completed_report(rendered, tmp_path):
    report = run_pods(rendered, tmp_path)
    assert report["deployment"]["data"] == "simulated"


@pytest.mark.slow
def test_the_pods_of_a_schema_only_marketplace_each_read_only_their_own_files(own_files, tmp_path):
    """Each owner pod's own-data claim holds the files of the owners it serves, the consumer's claim
    its target and test set; the run completes on those files, and no pod mounts another's."""
    rendered = render(tmp_path / "k8s", own_files / "market.yaml")

    def fill(kubelet: Kubelet) -> None:
        for ordinal in range(2):
            folder = kubelet.folder / "volumes" / f"marketplace-owner-{ordinal}" / "own-data"
            folder.mkdir(parents=True)
            for owner in (f"owner-{2 * ordinal + 1}", f"owner-{2 * ordinal + 2}"):
                shutil.copy2(own_files / f"{owner}.csv", folder)
        claim = kubelet.folder / "claims" / "marketplace-consumer-data"
        claim.mkdir(parents=True)
        for name in ("target.csv", "test.csv"):
            shutil.copy2(own_files / name, claim)

    report = run_pods(rendered, tmp_path / "pods", before=fill)
    assert report["deployment"]["data"] == "own"  # the owners read their claims' files: with none they refuse


def run_pods(rendered: dict, tmp_path: Path, before=None) -> dict:
    """Run the rendered pods' commands locally (:class:`Kubelet`) to the run's report."""
    import socket

    tmp_path.mkdir(parents=True, exist_ok=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kubelet = Kubelet(rendered, tmp_path, port)
    if before is not None:
        before(kubelet)
    curator_spec, curator_pod = (
        pod_spec(rendered[("Deployment", "marketplace-curator")]),
        "marketplace-curator-5d8f7-x2x4q",
    )
    # the curator listens on the Service's port in the cluster; here on a free one
    kit = kubelet.volume(curator_pod, curator_spec["volumes"][0]) / "start.sh"
    kit.write_text(kit.read_text().replace("tcp://0.0.0.0:5555", f"tcp://127.0.0.1:{port}"))
    procs: dict[str, subprocess.Popen] = {}
    try:
        report_spec = pod_spec(rendered[("Job", "marketplace-report")])
        procs["report"] = kubelet.start(report_spec, "marketplace-report-fghij", report_spec["containers"][0])
        procs["curator"] = kubelet.start(curator_spec, curator_pod, curator_spec["containers"][0])
        statefulset = rendered[("StatefulSet", "marketplace-owner")]
        owners = pod_spec(statefulset)
        for ordinal in range(statefulset["spec"]["replicas"]):
            pod = f"marketplace-owner-{ordinal}"
            init = kubelet.start(owners, pod, owners["initContainers"][0])
            assert init.wait(30) == 0, (tmp_path / f"{pod}-own-kits.log").read_text()
            served = f"owner-{2 * ordinal + 1}..owner-{2 * ordinal + 2}"
            assert f"{pod} holds the kits of {served}" in (tmp_path / f"{pod}-own-kits.log").read_text()
            procs[pod] = kubelet.start(owners, pod, owners["containers"][0])
        consumer = pod_spec(rendered[("Job", "marketplace-consumer")])
        procs["consumer"] = kubelet.start(consumer, "marketplace-consumer-abcde", consumer["containers"][0])
        deadline = time.monotonic() + 240
        for name, proc in procs.items():
            assert proc.wait(max(1, deadline - time.monotonic())) == 0, name
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    report = json.loads((kubelet.runs / "report" / "report.json").read_text())
    assert report["status"] == "completed", report["failures"]
    # each owner pod is an owner host: one file for its two owners
    assert sorted(p.name for p in (kubelet.runs / "parties").iterdir()) == sorted(
        ["curator.json", "consumer.json", "owner-1..owner-2.json", "owner-3..owner-4.json"]
    )
    logs = "".join(p.read_text() for p in tmp_path.glob("*.log"))
    assert "exited with status 0; idle until the run is deleted" in logs
    return report
