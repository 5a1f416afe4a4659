"""The permissions message the model reads, checked against what the sandbox does: every
claim in it (network, writable roots, read-only, /tmp, .git, lifetime) is probed."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import uuid
from pathlib import Path

import pytest

from runner import prompt as prompts
from runner.items import message_text
from runner.sandbox import Policy, SandboxMode
from runner.sandbox.policy import LIFETIME_NOTE, PROTECTED_NOTE, TMP_NOTE
from tests.support.sandbox import Box, HostService, Runner, out


def message_for(policy: Policy, cwd: Path) -> str:
    """The developer message exactly as the batch builds it from a policy."""
    items = prompts.initial_context(
        cwd=cwd,
        sandbox=policy.mode,
        network=policy.network,
        writable_roots=list(policy.prompt_roots()),
        developer_instructions=None,
        runner_home=None,
        shell="bash",
        current_date="2026-01-01",
        timezone="UTC",
        permission_notes=list(policy.notes()),
    )[0]
    return message_text(items[0])


def listed_roots(text: str) -> set[Path]:
    found = re.search(r"The writable roots? (?:is|are) (.*)\.\n", text)
    return {Path(p) for p in re.findall(r"`([^`]+)`", found.group(1))} if found else set()


@pytest.mark.parametrize("network", [False, True])
@pytest.mark.parametrize("mode", ["read-only", "workspace-write", "danger-full-access"])
def test_message_matches_enforcement(
    box: Box, run: Runner, host_service: HostService, mode: SandboxMode, network: bool
) -> None:
    extra = box.outside / "cache"
    extra.mkdir(mode=0o777)
    elsewhere = box.outside / "elsewhere"
    elsewhere.mkdir(mode=0o777)
    policy = box.policy(mode, network=network, roots=[extra])
    text = message_for(policy, box.path)

    tag = uuid.uuid4().hex
    candidates = [box.path, extra, elsewhere]
    script = "\n".join(
        [f"touch {p}/probe-{tag} 2>/dev/null && echo 'writable {p}'" for p in candidates]
        + [
            f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', "
            f"{host_service.port}), 2)\" 2>/dev/null && echo 'network reached'",
            f"touch /tmp/probe-{tag} && echo 'tmp writable'",
            "touch .git/probe 2>/dev/null && echo 'git writable'",
            f"(exec -a lifetime-{tag} sleep 30 &)",
        ]
    )
    probes = out(run(policy, script))
    writable = {Path(p) for p in re.findall(r"^writable (.*)$", probes, re.M)}

    assert ("Network access is enabled" in text) == ("network reached" in probes), probes
    assert ("Network access is restricted" in text) == ("network reached" not in probes)
    if "may read and change any file" in text:
        assert writable == set(candidates)
    elif "nothing on disk may be created" in text:
        assert writable == set()
    else:
        assert "`workspace-write`" in text and "change files only inside `cwd`" in text
        assert writable == {box.path, *listed_roots(text)} == {box.path, extra}
    if TMP_NOTE in text:  # writable, and private
        assert "tmp writable" in probes and not Path("/tmp", f"probe-{tag}").exists()
    if PROTECTED_NOTE in text:
        assert box.path in writable and "git writable" not in probes
    lingering = [
        int(p.name)
        for p in Path("/proc").iterdir()
        if p.name.isdigit() and _cmdline(p).startswith(f"lifetime-{tag}")
    ]
    for pid in lingering:  # none should be left, but never leave one behind
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if LIFETIME_NOTE in text:
        assert lingering == []
    assert (mode != "danger-full-access") == (TMP_NOTE in text) == (LIFETIME_NOTE in text)


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""
