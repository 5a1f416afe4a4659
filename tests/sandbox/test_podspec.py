"""The Pod manifest: its fields, and that `podman kube play` runs it (the one Pod runtime
on these machines; a cluster's API server is exercised in CI, tests/sandbox/test_kubernetes.py)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from runner.sandbox import podspec
from runner.sandbox.podspec import PodSpec, label_value, pod_name, render, run_labels
from tests.support import tiny_image

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")


def spec(**kw: object) -> PodSpec:
    base: dict[str, object] = {
        "name": "runner-b-r-0123456789",
        "image": "registry.example/bench:1",
        "labels": run_labels("20260101-abc", "task one/v1#2", "orchestrator-0"),
    }
    return PodSpec(**{**base, **kw})  # type: ignore[arg-type]


def test_the_pod_sleeps_never_restarts_and_carries_the_runners_labels() -> None:
    pod = render(spec(namespace="bench", service_account="runner-env"))
    assert pod["kind"] == "Pod" and pod["apiVersion"] == "v1"
    assert pod["metadata"]["namespace"] == "bench"
    labels = pod["metadata"]["labels"]
    assert labels[podspec.OWNER_LABEL] == "runner"
    assert labels[podspec.BATCH_LABEL] == "20260101-abc"
    assert labels[podspec.HOST_LABEL] == "orchestrator-0"
    assert all(LABEL_VALUE.fullmatch(v) for v in labels.values())
    body = pod["spec"]
    assert body["restartPolicy"] == "Never"
    assert body["automountServiceAccountToken"] is False
    assert body["serviceAccountName"] == "runner-env"
    (container,) = body["containers"]
    assert container["command"] == ["sleep", "infinity"]
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert "resources" not in container and "workingDir" not in container
    assert "imagePullSecrets" not in body and "ownerReferences" not in pod["metadata"]


def test_resources_user_pull_and_owner() -> None:
    pod = render(
        spec(
            cpus=1.5,
            memory_mb=2048,
            user="1000:1001",
            workdir="/testbed",
            pull_policy="Always",
            pull_secrets=("regcred",),
            owner_pod=("runner-benchmark-0-x", "uid-1"),
        )
    )
    (container,) = pod["spec"]["containers"]
    amounts = {"cpu": "1500m", "memory": "2048Mi"}
    assert container["resources"] == {"requests": amounts, "limits": amounts}
    assert container["workingDir"] == "/testbed"
    assert container["imagePullPolicy"] == "Always"
    ctx = container["securityContext"]
    assert (ctx["runAsUser"], ctx["runAsGroup"], ctx["runAsNonRoot"]) == (1000, 1001, True)
    assert ctx["capabilities"] == {"drop": ["ALL"]}
    assert pod["spec"]["imagePullSecrets"] == [{"name": "regcred"}]
    (owner,) = pod["metadata"]["ownerReferences"]
    assert owner == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "runner-benchmark-0-x",
        "uid": "uid-1",
    }


def test_a_root_user_keeps_the_capabilities_package_managers_need() -> None:
    for user in (None, "0"):
        ctx = render(spec(user=user))["spec"]["containers"][0]["securityContext"]
        assert "runAsNonRoot" not in ctx
        assert "ALL" not in ctx["capabilities"]["drop"]
        assert "NET_RAW" in ctx["capabilities"]["drop"]


def test_a_user_that_is_not_numeric_is_refused() -> None:
    with pytest.raises(ValueError, match="numeric uid"):
        render(spec(user="app"))


def test_names_and_label_values_are_valid_for_any_ids() -> None:
    odd = ["x" * 200, "Task/One two", "-lead", "ünïcode", "a", "..", "v1#2"]
    names = {pod_name(b, r) for b in odd for r in odd}
    assert len(names) == len(odd) ** 2
    assert all(DNS_LABEL.fullmatch(n) and len(n) <= 63 for n in names)
    values = [label_value(v) for v in odd]
    assert all(LABEL_VALUE.fullmatch(v) and v for v in values)
    assert label_value("20260101-abc") == "20260101-abc"


def test_the_manifest_is_json_text_of_the_rendered_pod() -> None:
    s = spec(namespace="bench")
    assert json.loads(podspec.manifest(s)) == render(s)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("podman") is None, reason="podman is not installed")
def test_podman_kube_play_runs_the_manifest(tmp_path: Path) -> None:
    image = tiny_image.ensure()
    name = f"runner-podspec-{uuid.uuid4().hex[:8]}"
    s = PodSpec(
        name=name,
        image=image,
        labels=run_labels("podspec-test", "play", "host"),
        namespace="bench",
        service_account="runner-env",
        cpus=0.5,
        memory_mb=256,
        user="1000:1000",
        workdir="/work",
        pull_policy="Never",
        owner_pod=("orchestrator", "0000"),
    )
    path = tmp_path / "pod.json"
    path.write_text(podspec.manifest(s))
    conf = tmp_path / "containers.conf"
    conf.write_text("[containers]\ndefault_ulimits = ['nofile=20000:20000', 'nproc=4096:4096']\n")
    env = {**os.environ, "CONTAINERS_CONF": str(conf)}

    def podman(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["podman", "--runtime", "runc", *args], env=env, capture_output=True, text=True
        )

    try:
        played = podman("kube", "play", "--network", "none", str(path))
        assert played.returncode == 0, played.stderr
        ps = podman("pod", "inspect", name)
        assert ps.returncode == 0, ps.stderr
        labels = json.loads(ps.stdout)
        labels = (labels[0] if isinstance(labels, list) else labels)["Labels"]
        assert labels[podspec.OWNER_LABEL] == "runner"
        ran = podman("exec", f"{name}-{podspec.CONTAINER}", "sh", "-c", "id -u; pwd")
        assert ran.stdout.split() == ["1000", "/work"], ran.stderr
    finally:
        podman("pod", "rm", "-f", "-t", "0", name)
