"""The environment a model-run command sees.

Names containing KEY, SECRET, TOKEN, PASSWORD or CREDENTIAL are dropped (Codex drops the
first three by default; we are stricter), so provider keys and push tokens never reach
the agent's shell. Pagers and colours are switched off because nobody reads a terminal.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

SECRET_NAME = re.compile(r"KEY|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)

FIXED = {
    "NO_COLOR": "1",
    "TERM": "dumb",
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "GH_PAGER": "cat",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "RUNNER_CI": "1",
}


def child_env(base: Mapping[str, str], *, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in base.items() if not SECRET_NAME.search(k)}
    if env.pop("RUNNER_UNSET_PYDANTIC_DISABLE_PLUGINS", None):
        env.pop("PYDANTIC_DISABLE_PLUGINS", None)   # set by our CLI for itself only
    env.update(FIXED)
    env.update(extra or {})
    return env
