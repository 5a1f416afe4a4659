"""Record what `codex exec --json` prints for the golden scenario (tests/e2e/test_json_events.py).

Not run by the test suite: it needs the Codex CLI (`npm install @openai/codex@0.169.0`).
Codex talks to the loopback server, which scripts the same model answers the runner's
golden test gets; the workspace path in the output is replaced by /WORKSPACE.

    .venv/bin/python tests/golden/codex_exec/record.py PATH/TO/codex > OUT.jsonl
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from tests.support.loopback import start_in_thread  # noqa: E402
from tests.support.scenarios import scenario  # noqa: E402


def main(codex: str) -> int:
    srv = start_in_thread(scenario("exec_command"), strict=False)
    with tempfile.TemporaryDirectory() as tmp:
        home, ws = Path(tmp, "home"), Path(tmp, "ws")
        home.mkdir()
        ws.mkdir()
        subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
        (home / "config.toml").write_text(
            'model = "gpt-5.5"\nmodel_provider = "loop"\napproval_policy = "never"\n'
            'sandbox_mode = "danger-full-access"\n[model_providers.loop]\nname = "loop"\n'
            f'base_url = "{srv.base_url}"\nenv_key = "LOOP_KEY"\nwire_api = "responses"\n'
        )
        env = {**os.environ, "CODEX_HOME": str(home), "LOOP_KEY": "k"}
        res = subprocess.run(
            [codex, "exec", "--json", "--skip-git-repo-check", "-C", str(ws), "do it"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        sys.stdout.write(res.stdout.replace(str(ws), "/WORKSPACE"))
    srv.stop()
    return res.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
