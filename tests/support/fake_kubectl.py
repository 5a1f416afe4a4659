#!/usr/bin/env python3
"""A stand-in `kubectl` over podman, for the machines with no cluster.

It implements the few verbs runner/sandbox/kubernetes.py uses, on `podman kube play`, with
kubectl's exit codes and the messages the runner reads (`NotFound`, `AlreadyExists`,
`command terminated with exit code N`). A Pod `P` of namespace `NS` is the podman pod
`NS.P` (its container `NS.P-env`), labelled with its namespace so that label selectors stay
within one. Standard library only: the runner calls it with a minimal environment.

    create -f -            the manifest on stdin (JSON)  -> podman kube play --network none
    wait --for=condition=Ready pod/P --timeout=Ns
    exec [-i] P -c C -- ARGV                            -> podman exec [-i]
    get pod P -o json | get pods -l SELECTOR -o json
    delete pod P... [--grace-period=0 --wait=false --ignore-not-found]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

NS_LABEL = "fake-kubectl/namespace"
CONF = "[containers]\ndefault_ulimits = ['nofile=20000:20000', 'nproc=4096:4096']\n"


def podman(*args: str, **kw: object) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["podman", "--runtime", "runc", *args], check=False, **kw)  # type: ignore[call-overload,no-any-return]


def fail(message: str, code: int = 1) -> None:
    sys.stderr.write(message + "\n")
    sys.exit(code)


def not_found(name: str) -> None:
    fail(f'Error from server (NotFound): pods "{name}" not found')


def inspect(ns: str, name: str) -> dict[str, object] | None:
    done = podman("pod", "inspect", f"{ns}.{name}", capture_output=True)
    if done.returncode != 0:
        return None
    data = json.loads(done.stdout)
    found: dict[str, object] = data[0] if isinstance(data, list) else data
    return found


def container_state(ns: str, name: str) -> dict[str, object] | None:
    done = podman("inspect", "--type", "container", f"{ns}.{name}-env", capture_output=True)
    if done.returncode != 0:
        return None
    state: dict[str, object] = json.loads(done.stdout)[0]["State"]
    return state


def as_pod(ns: str, name: str, labels: dict[str, str]) -> dict[str, object]:
    state = container_state(ns, name) or {}
    running = state.get("Status") == "running"
    if running:
        status: dict[str, object] = {
            "phase": "Running",
            "containerStatuses": [{"name": "env", "ready": True, "state": {"running": {}}}],
        }
    elif state.get("Status") in ("exited", "stopped"):
        status = {
            "phase": "Failed",
            "containerStatuses": [
                {
                    "name": "env",
                    "state": {"terminated": {"exitCode": state.get("ExitCode"), "reason": "Error"}},
                }
            ],
        }
    else:
        status = {"phase": "Pending"}
    kept = {k: v for k, v in labels.items() if k != NS_LABEL}
    return {"metadata": {"name": name, "namespace": ns, "labels": kept}, "status": status}


def create(ns: str) -> None:
    pod = json.loads(sys.stdin.read())
    meta = pod["metadata"]
    ns = meta.get("namespace", ns)
    name = meta["name"]
    if inspect(ns, name) is not None:
        fail(f'Error from server (AlreadyExists): pods "{name}" already exists')
    meta["name"] = f"{ns}.{name}"
    meta.setdefault("labels", {})[NS_LABEL] = ns
    with tempfile.NamedTemporaryFile("w", suffix=".json") as fh:
        json.dump(pod, fh)
        fh.flush()
        done = podman("kube", "play", "--network", "none", fh.name, capture_output=True)
    if done.returncode != 0:
        podman("pod", "rm", "-f", "-t", "0", f"{ns}.{name}", capture_output=True)
        fail("Error from server: " + done.stderr.decode(errors="replace").strip())
    print(f"pod/{name}")


def wait(ns: str, args: list[str]) -> None:
    target = next(a for a in args if a.startswith("pod/"))[4:]
    limit = next((a for a in args if a.startswith("--timeout=")), "--timeout=30s")
    deadline = time.monotonic() + float(limit.split("=", 1)[1].rstrip("s"))
    while time.monotonic() < deadline:
        state = container_state(ns, target)
        if state is None:
            not_found(target)
        elif state.get("Status") == "running":
            print(f"pod/{target} condition met")
            return
        time.sleep(0.05)
    fail(f"error: timed out waiting for the condition on pods/{target}")


def exec_(ns: str, args: list[str]) -> None:
    split = args.index("--")
    head, argv = args[:split], args[split + 1 :]
    interactive = "-i" in head
    name = next(a for i, a in enumerate(head) if not a.startswith("-") and head[i - 1] != "-c")
    state = container_state(ns, name)
    if state is None:
        not_found(name)
    if state and state.get("Status") != "running":
        fail('error: unable to upgrade connection: container not found ("env")')
    flags = ["-i"] if interactive else []
    done = podman(
        "exec", *flags, f"{ns}.{name}-env", *argv, stdin=None if interactive else subprocess.DEVNULL
    )
    code = done.returncode
    if code == 0:
        return
    if code in (125, 137) and (container_state(ns, name) or {}).get("Status") != "running":
        fail("error: error reading from error stream: stream closed (the pod went away)")
    fail(f"command terminated with exit code {code}", code)


def get(ns: str, args: list[str]) -> None:
    if "-l" in args:
        selector = args[args.index("-l") + 1]
        filters = [f"label={NS_LABEL}={ns}"] + [f"label={kv}" for kv in selector.split(",")]
        flags = [x for f in filters for x in ("--filter", f)]
        done = podman("pod", "ps", *flags, "--format", "json", capture_output=True)
        items = []
        for row in json.loads(done.stdout or b"[]"):
            labels = row.get("Labels") or {}
            if labels.get(NS_LABEL) == ns:
                short = row["Name"][len(ns) + 1 :]
                items.append(as_pod(ns, short, labels))
        print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
        return
    name = args[args.index("pod") + 1]
    found = inspect(ns, name)
    if found is None:
        not_found(name)
        return
    print(json.dumps(as_pod(ns, name, dict(found.get("Labels") or {}))))  # type: ignore[call-overload]


def delete(ns: str, args: list[str]) -> None:
    names = [a for a in args[args.index("pod") + 1 :] if not a.startswith("-")]
    for name in names:
        if inspect(ns, name) is None:
            if "--ignore-not-found" not in args:
                not_found(name)
            continue
        podman("pod", "rm", "-f", "-t", "0", f"{ns}.{name}", capture_output=True)
        print(f'pod "{name}" deleted')


def main(argv: list[str]) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as fh:
        fh.write(CONF)
    os.environ["CONTAINERS_CONF"] = fh.name
    try:
        ns = "default"
        rest: list[str] = []
        it = iter(argv)
        for arg in it:
            if arg in ("--namespace", "-n"):
                ns = next(it)
            elif arg == "--context":
                next(it)
            else:
                rest.append(arg)
            if rest and rest[0] == "exec" and arg == "--":
                rest.extend(it)
        verb, args = rest[0], rest[1:]
        if verb == "create":
            create(ns)
        elif verb == "wait":
            wait(ns, args)
        elif verb == "exec":
            exec_(ns, args)
        elif verb == "get":
            get(ns, args)
        elif verb == "delete":
            delete(ns, args)
        else:
            fail(f"fake kubectl: {verb!r} is not implemented")
    finally:
        os.unlink(fh.name)


if __name__ == "__main__":
    main(sys.argv[1:])
