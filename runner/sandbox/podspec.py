"""The Pod manifest of one run's Kubernetes environment, rendered without any I/O.

One Pod per run: `sleep infinity` as its only process, `restartPolicy: Never` (a container
that dies stays dead, so a lost environment is seen as lost and never silently replaced
by a fresh one the run's work is not in), resources from `cpus` and `memory_mb`, and the
runner's labels, which orphan reaping selects on. The same manifest must be accepted by a
cluster and by `podman kube play` (the only Pod runtime on the project's machines), so it
keeps to fields both understand.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import field
from typing import Any, Literal

from runner.frozen import frozen

OWNER_LABEL = "io.runner.owner"
OWNER = "runner"
BATCH_LABEL = "io.runner.batch"
RUN_LABEL = "io.runner.run"
HOST_LABEL = "io.runner.host"
NETWORK_LABEL = "io.runner.network"
"""`none` on a Pod whose run asked for no network: a NetworkPolicy selecting it (see
examples/kubernetes/rbac.yaml) is what enforces that, since a Pod alone cannot."""
CONTAINER = "env"

PullPolicy = Literal["Always", "IfNotPresent", "Never"]

_LABEL_VALUE = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?)?")
_UID = re.compile(r"(\d{1,10})(?::(\d{1,10}))?")
# Dropped for a root user: raw sockets, device nodes and audit writes no task needs, while
# chown, setuid and the rest stay (package managers and tests run as root in most images).
_ROOT_DROPS = ("NET_RAW", "MKNOD", "AUDIT_WRITE", "SYS_CHROOT")


@frozen
class PodSpec:
    name: str
    image: str
    labels: Mapping[str, str]
    namespace: str | None = None
    service_account: str | None = None
    cpus: float | None = None
    memory_mb: int | None = None
    user: str | None = None
    """Numeric `uid[:gid]`; a non-root uid also gets runAsNonRoot and every capability
    dropped."""
    workdir: str | None = None
    pull_policy: PullPolicy = "IfNotPresent"
    pull_secrets: tuple[str, ...] = ()
    owner_pod: tuple[str, str] | None = None
    """(name, uid) of the Pod the runner itself runs in: the cluster's garbage collector
    then deletes this Pod when the runner's is deleted, even after a SIGKILL."""
    extra_labels: Mapping[str, str] = field(default_factory=dict)


def label_value(raw: str) -> str:
    """`raw` when it is a valid label value, else a readable part of it and a hash."""
    if _LABEL_VALUE.fullmatch(raw):
        return raw
    digest = hashlib.sha256(raw.encode()).hexdigest()[:10]
    kept = re.sub(r"[^A-Za-z0-9_.-]+", "-", raw)[:50].strip("-_.")
    return f"{kept}-{digest}" if kept else digest


def pod_name(batch_id: str, run_name: str) -> str:
    """A DNS-1123 label (at most 63 characters) unique to the batch and run."""
    digest = hashlib.sha256(f"{batch_id}\0{run_name}".encode()).hexdigest()[:10]
    readable = re.sub(r"[^a-z0-9]+", "-", f"{batch_id}-{run_name}".lower()).strip("-")
    return f"runner-{readable[:44].strip('-')}-{digest}"


def run_labels(batch_id: str, run_name: str, host: str) -> dict[str, str]:
    return {
        OWNER_LABEL: OWNER,
        BATCH_LABEL: label_value(batch_id),
        RUN_LABEL: label_value(run_name),
        HOST_LABEL: label_value(host),
    }


def parse_user(user: str) -> tuple[int, int | None]:
    found = _UID.fullmatch(user)
    if found is None:
        raise ValueError(f"user must be a numeric uid[:gid] for kubernetes, got {user!r}")
    gid = found.group(2)
    return int(found.group(1)), int(gid) if gid is not None else None


def _cpu(cpus: float) -> str:
    return f"{round(cpus * 1000)}m"


def _security(user: str | None) -> dict[str, Any]:
    ctx: dict[str, Any] = {"allowPrivilegeEscalation": False}
    uid = gid = None
    if user is not None:
        uid, gid = parse_user(user)
        ctx["runAsUser"] = uid
        if gid is not None:
            ctx["runAsGroup"] = gid
    if uid is not None and uid != 0:
        ctx["runAsNonRoot"] = True
        ctx["capabilities"] = {"drop": ["ALL"]}
    else:
        ctx["capabilities"] = {"drop": list(_ROOT_DROPS)}
    return ctx


def render(spec: PodSpec) -> dict[str, Any]:
    """The Pod as a JSON-able mapping."""
    metadata: dict[str, Any] = {"name": spec.name, "labels": {**spec.labels, **spec.extra_labels}}
    if spec.namespace is not None:
        metadata["namespace"] = spec.namespace
    if spec.owner_pod is not None:
        owner_name, owner_uid = spec.owner_pod
        metadata["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": owner_name, "uid": owner_uid}
        ]
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": spec.image,
        "imagePullPolicy": spec.pull_policy,
        "command": ["sleep", "infinity"],
        "securityContext": _security(spec.user),
    }
    if spec.workdir is not None:
        container["workingDir"] = spec.workdir
    amounts: dict[str, str] = {}
    if spec.cpus is not None:
        amounts["cpu"] = _cpu(spec.cpus)
    if spec.memory_mb is not None:
        amounts["memory"] = f"{spec.memory_mb}Mi"
    if amounts:
        # Requests equal to limits: the scheduler reserves what the run may use, so runs
        # packed on one node do not slow each other down (Guaranteed QoS when both are set).
        container["resources"] = {"requests": dict(amounts), "limits": dict(amounts)}
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 1,
        "enableServiceLinks": False,
        "containers": [container],
    }
    if spec.service_account is not None:
        pod_spec["serviceAccountName"] = spec.service_account
    if spec.pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": s} for s in spec.pull_secrets]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}


def manifest(spec: PodSpec) -> str:
    """The manifest as text: JSON, which kubectl and `podman kube play` both read."""
    return json.dumps(render(spec), indent=1, sort_keys=True)
