"""Whom the isolation tests run the runner as (root, or a user made for the test and
reached through `setpriv`), and how they read what a run's commands printed."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.support.loopback import RecordedRequest, Reply, last_user_text, per_conversation

PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True)
class Who:
    """Whom the runner runs as, and with which environment."""

    name: str | None
    """None: root."""
    home: Path
    env: dict[str, str]
    python: str

    def own(self, path: Path) -> None:
        if self.name is not None:
            subprocess.run(["chown", "-R", f"{self.name}:{self.name}", str(path)], check=True)

    def argv(self, *args: str | Path) -> list[str]:
        argv = [self.python, "-m", "runner", *map(str, args)]
        if self.name is not None:
            drop = ["setpriv", f"--reuid={self.name}", f"--regid={self.name}", "--init-groups"]
            argv = drop + argv
        return argv

    def cli(
        self, *args: str | Path, path: str = PATH, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        full = {**self.env, "PATH": path, **(env or {})}
        return subprocess.run(
            self.argv(*args), env=full, capture_output=True, text=True, timeout=180, cwd="/"
        )


def run_outputs(out: Path, run: str) -> str:
    """Everything the run's commands printed, as the model was sent it."""
    text = []
    for line in (out / "threads" / f"{run}.jsonl").read_text().splitlines():
        item = json.loads(line).get("item") or {}
        if item.get("type") == "command_execution":
            text.append(str(item.get("aggregated_output", "")))
    return "\n".join(text)


def scripted(steps: dict[str, list[Reply]]) -> object:
    def go(req: RecordedRequest, i: int) -> Reply:
        mine = steps[last_user_text(req).strip()]
        return mine[min(i, len(mine) - 1)]

    return per_conversation(go)
