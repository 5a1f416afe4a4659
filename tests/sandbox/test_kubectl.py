"""kubectl calls are bounded: a timeout each, two retries of a hang, none of an answer."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import anyio
import pytest

from runner.errors import EnvironmentFault
from runner.sandbox.kubectl import Kubectl


def test_every_kubectl_call_is_bounded_and_retried_twice(tmp_path: Path) -> None:
    """A kubectl that hangs: each call is killed at its timeout and made three times."""
    count = tmp_path / "calls"
    hang = tmp_path / "kubectl"
    hang.write_text(f"#!/bin/sh\necho x >> {count}\nexec sleep 100\n")
    hang.chmod(0o755)
    slow = Kubectl(executable=str(hang), call_timeout_s=0.3)
    with pytest.raises(EnvironmentFault, match="did not answer in time, 3 times"):
        anyio.run(partial(slow.call, ["get", "pods"]))
    assert len(count.read_text().split()) == 3
    refused = tmp_path / "refused"
    refused.write_text(
        f"#!/bin/sh\necho x >> {count}.2\necho 'error: Forbidden: pods is forbidden' >&2\nexit 1\n"
    )
    refused.chmod(0o755)
    done = anyio.run(partial(Kubectl(executable=str(refused)).call, ["get", "pods"]))
    assert done.code == 1 and "Forbidden" in done.said
    assert len((tmp_path / "calls.2").read_text().split()) == 1
