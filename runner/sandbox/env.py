"""The environment a model-run command sees.

Names containing KEY, SECRET, TOKEN, PASSWORD or CREDENTIAL are dropped (Codex drops the
first three by default; we are stricter), so provider keys and push tokens never reach
the agent's shell. Pagers and colours are switched off because nobody reads a terminal.
A sandboxed command gets less still: only the allowlist of `sandbox_env`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from importlib import resources

SECRET_NAME = re.compile(
    r"KEY|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL|_(?:PAT|AUTH|PWD|PASS)$", re.IGNORECASE
)
"""Names that hold a secret: anywhere in the name, or as its last word (`GH_PAT`,
`NPM_CONFIG__AUTH`, `DB_PWD`), which keeps `PATH`, `PWD`, `OLDPWD` and `GIT_AUTHOR_NAME`
ordinary."""

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
        env.pop("PYDANTIC_DISABLE_PLUGINS", None)  # set by our CLI for itself only
    env.update(FIXED)
    env.update(extra or {})
    return env


PASSED = ("PATH", "TZ", "SHELL")
"""The only variables a sandboxed command inherits: an allowlist, so a secret under a name
nobody thought of (`DATABASE_URL`, `SENTRY_DSN`, a `.netrc`-style `*_AUTH`) stays out."""

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


def sandbox_env(base: Mapping[str, str], *, home: str, user: str | None) -> dict[str, str]:
    """The whole environment of a sandboxed command (and of bubblewrap itself, whose
    process 1 inside the sandbox shows it in `/proc/1/environ`)."""
    env = {k: base[k] for k in PASSED if k in base}
    env.setdefault("PATH", DEFAULT_PATH)
    env.update(FIXED)
    env.update({"HOME": home, "TMPDIR": "/tmp"})
    if user:
        env.update({"USER": user, "LOGNAME": user})
    return env


def login_profile(path: str) -> str:
    """`~/.profile` of the sandbox's home. A login shell (`bash -lc`, the way models call
    the shell) runs /etc/profile, which on Debian sets PATH anew; this file, which such a
    shell reads next, puts back the PATH the command was given (the runner's, minus what
    the sandbox hides), so the agent finds the tools the check finds."""
    return f"PATH={shlex.quote(path)}\nexport PATH\n"


LOGIN_PATH = "RUNNER_LOGIN_PATH"
"""The PATH a login shell of an unsandboxed command puts back (see `keep_login_path`)."""
EARLIER_BASH_ENV = "RUNNER_BASH_ENV"
"""The BASH_ENV the command was given, read first by the runner's own."""


def keep_login_path(env: Mapping[str, str]) -> dict[str, str]:
    """`env` for an unsandboxed command, whose login shell reads the user's real home. The
    sandbox writes its own `.profile` (`login_profile`); here nothing may be written to
    the user's home, so bash is pointed through BASH_ENV, which a non-interactive login
    shell reads after the profiles, at a file of the runner's own (`data/login_path.sh`)
    that puts this PATH back in front. A BASH_ENV already set is read first, as before."""
    script = resources.files("runner").joinpath("data", "login_path.sh")
    if "PATH" not in env or not script.is_file():
        return dict(env)
    out = {k: v for k, v in env.items() if k not in (LOGIN_PATH, EARLIER_BASH_ENV)}
    if env.get("BASH_ENV"):
        out[EARLIER_BASH_ENV] = env["BASH_ENV"]
    out.update({"BASH_ENV": str(script), LOGIN_PATH: env["PATH"]})
    return out
