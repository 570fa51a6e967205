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


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict[tuple[str, str], dict]:
    """The base with freshly provisioned kits, rendered by `kubectl kustomize`: (kind, name) -> object."""
    skip_unless_tools("kubectl", why="rendering deploy/k8s with `kubectl kustomize`")
    folder = tmp_path_factory.mktemp("k8s") / "k8s"
    shutil.copytree(BASE, folder, ignore=shutil.ignore_patterns("kits"))
    made = subprocess.run([sys.executable, "-m", "marketplace", "provision", str(QUICKSTART), "--out", str(folder / "kits"),
                           "--endpoint", "tcp://marketplace-curator:5555"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert made.returncode == 0, made.stderr
    result = subprocess.run(["kubectl", "kustomize", str(folder)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    objects = {(doc["kind"], doc["metadata"]["name"]): doc for doc in yaml.safe_load_all(result.stdout) if doc}
    objects["kits"] = folder / "kits"  # type: ignore[assignment]
    return objects


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
    assert kinds == sorted(["ConfigMap", "Deployment", "Job", "Job", "PersistentVolumeClaim", "Secret", "Secret", "Secret",
                            "Secret", "Secret", "Secret", "Service", "Service", "StatefulSet"])


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
    assert mounted == {"kit", "runs", "ledgers"} and {"name": "kit", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}} in spec["volumes"]
    # each owner pod's lifetime ledgers on a claim of its own, named by the environment the owners read
    (claim,) = owners["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "ledgers" and claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert env["MARKETPLACE_LEDGERS"] == next(m["mountPath"] for m in owner["volumeMounts"] if m["name"] == "ledgers")
    curator = pod_spec(rendered[("Deployment", "marketplace-curator")])
    assert [v["secret"]["secretName"] for v in curator["volumes"] if "secret" in v] == ["kit-curator"]
    consumer = pod_spec(rendered[("Job", "marketplace-consumer")])
    assert [v["secret"]["secretName"] for v in consumer["volumes"] if "secret" in v] == ["kit-consumer"]
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
            return self.runs
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
            volumes.setdefault(m["name"], {"name": m["name"], "emptyDir": {}})  # a StatefulSet's per-pod claim: a folder of the pod's
            link = self.root(pod) / m["mountPath"].lstrip("/")
            if not link.is_symlink():
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(self.volume(pod, volumes[m["name"]]), target_is_directory=True)

    def start(self, spec: dict, pod: str, container: dict) -> subprocess.Popen:
        import re

        self.mount(spec, pod, container)
        tops = sorted({"/" + m["mountPath"].split("/")[1] for m in container["volumeMounts"]}, key=len, reverse=True)
        pattern = re.compile(r"(?<![\w./-])(" + "|".join(map(re.escape, tops)) + r")(?=/|\s|$|\")")
        command = [pattern.sub(lambda m: f"{self.root(pod)}{m.group(1)}", word).replace("exec sleep infinity", "true")
                   for word in container["command"]]
        env = dict(os.environ, HOSTNAME=pod, PYTHONPATH=str(ROOT), PATH=f"{self.folder / 'bin'}:{os.environ['PATH']}",
                   MARKETPLACE_ENDPOINT=f"tcp://127.0.0.1:{self.port}", **env_of(container))
        log = open(self.folder / f"{pod}-{container['name']}.log", "w")
        return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=self.folder)


@pytest.mark.slow
def test_the_pods_commands_run_the_quickstart_to_a_completed_report(rendered, tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kubelet = Kubelet(rendered, tmp_path, port)
    curator_spec, curator_pod = pod_spec(rendered[("Deployment", "marketplace-curator")]), "marketplace-curator-5d8f7-x2x4q"
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
        ["curator.json", "consumer.json", "owner-1..owner-2.json", "owner-3..owner-4.json"])
    logs = "".join(p.read_text() for p in tmp_path.glob("*.log"))
    assert "exited with status 0; idle until the run is deleted" in logs
