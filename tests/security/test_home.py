"""Class 8 of issue 14: the sandbox hides the invoking user's real home (git config,
cargo credentials, anything else kept there) whatever the uid, as root and as a normal
user created here for the test; the toolchains on PATH under it still run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import runner
from tests.support.fixtures import make_git_repo

TOKEN = "ghp_home_secret_4e7b2d1c9a"
SECRETS = {
    ".gitconfig": f'[url "https://{TOKEN}@github.com/"]\n\tinsteadOf = gh:\n',
    ".config/git/config": f"[credential]\n\thelper = store {TOKEN}\n",
    ".cargo/credentials.toml": f'[registry]\ntoken = "{TOKEN}"\n',
    # Inside toolchain folders that PATH makes visible again: still hidden.
    ".cargo/config.toml": f'[registry]\ntoken = "{TOKEN}"\n',
    ".cargo/config": f'[registries.x]\ntoken = "{TOKEN}"\n',
    ".local/share/python_keyring/keyring_pass.cfg": f"[x]\npassword = {TOKEN}\n",
    ".local/bin/mytool": "#!/bin/sh\necho tool-ok\n",
    ".cargo/bin/cargotool": "#!/bin/sh\necho cargo-tool-ok\n",
}
READ = (
    ".gitconfig",
    ".config/git/config",
    ".cargo/credentials.toml",
    ".cargo/config.toml",
    ".cargo/config",
    ".local/share/python_keyring/keyring_pass.cfg",
)

PROBE = textwrap.dedent("""
    READ = __READ__
    import anyio, os, sys
    from pathlib import Path
    from runner.sandbox import make_executor, make_policy
    home, ws = Path(sys.argv[1]), Path(sys.argv[2])
    policy = make_policy("workspace-write", workspace=ws, hidden=[ws.parent])
    files = " ".join(str(home / f) for f in READ)
    script = f"cat {files}; ls -a {home}; mytool; cargotool; echo end"
    res = anyio.run(lambda: make_executor(policy).run(
        ["bash", "-c", script], cwd=ws, timeout_s=30,
        env={"PATH": os.environ["PATH"]}))
    print(res.exit_code, res.output.decode())
""").replace("__READ__", repr(READ))


def _plant(home: Path) -> None:
    for name, text in SECRETS.items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(text)
    (home / ".local/bin/mytool").chmod(0o755)
    (home / ".cargo/bin/cargotool").chmod(0o755)


def _check(output: str, home: Path) -> None:
    assert TOKEN not in output, output
    # Gone (the home is an empty tmpfs) or masked by an empty, unreadable file.
    hidden = output.count("No such file or directory") + output.count("Permission denied")
    assert hidden == len(READ), output
    assert ".gitconfig" not in output.split(": No such file")[-1]  # not listed by ls
    assert "tool-ok" in output and "cargo-tool-ok" in output, output
    assert output.rstrip().endswith("end"), output


@pytest.fixture
def user() -> Iterator[tuple[str, Path]]:
    if os.geteuid() != 0:
        pytest.skip("creating a user for the test needs root")
    if shutil.which("useradd") is None:
        pytest.skip("useradd (passwd) is not installed")
    base = Path(tempfile.mkdtemp(prefix="runner-home-test-", dir="/var/tmp"))
    base.chmod(0o755)
    name = f"rt{uuid.uuid4().hex[:8]}"
    home = base / name
    subprocess.run(
        [
            "useradd",
            "--create-home",
            "--home-dir",
            str(home),
            "--user-group",
            "--shell",
            "/bin/bash",
            name,
        ],
        check=True,
        capture_output=True,
    )
    try:
        yield name, home
    finally:
        subprocess.run(["userdel", "--remove", name], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def test_home_is_hidden_for_an_unprivileged_runner(user: tuple[str, Path]) -> None:
    name, home = user
    # The interpreter must be one the new user may run; the runner's packages come from
    # this venv, which is readable by everyone.
    python = shutil.which(
        f"python{sys.version_info[0]}.{sys.version_info[1]}", path="/usr/local/bin:/usr/bin:/bin"
    )
    if python is None:
        pytest.skip("no system python of this version for the unprivileged user")
    _plant(home)
    ws = make_git_repo(home / "work" / "ws")
    subprocess.run(["chown", "-R", f"{name}:{name}", str(home)], check=True)
    site = next(p for p in sys.path if p.endswith("site-packages") and p.startswith(sys.prefix))
    src = str(Path(runner.__file__).resolve().parent.parent)
    env = {
        "HOME": str(home),
        "USER": name,
        "PYTHONPATH": f"{src}:{site}",
        "PATH": f"{home}/.local/bin:{home}/.cargo/bin:/usr/local/bin:/usr/bin:/bin",
    }
    probe = subprocess.run(
        [
            "setpriv",
            f"--reuid={name}",
            f"--regid={name}",
            "--init-groups",
            python,
            "-c",
            PROBE,
            str(home),
            str(ws),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert probe.returncode == 0, probe.stderr
    _check(probe.stdout, home)


def test_home_is_hidden_for_a_root_runner(tmp_path: Path) -> None:
    """As root the command runs as nobody; the home is hidden all the same (here a home
    given through HOME, readable by all, as CI images often have)."""
    if os.geteuid() != 0:
        pytest.skip("the root case needs root")
    home = Path(tempfile.mkdtemp(prefix="runner-roothome-test-", dir="/var/tmp"))
    try:
        home.chmod(0o755)
        _plant(home)
        for p in home.rglob("*"):
            p.chmod(0o755 if p.is_dir() or p.name.endswith("tool") else 0o644)
        ws = make_git_repo(tmp_path / "ws")
        env = {
            **os.environ,
            "HOME": str(home),
            "PATH": f"{home}/.local/bin:{home}/.cargo/bin:{os.environ['PATH']}",
        }
        probe = subprocess.run(
            [sys.executable, "-c", PROBE, str(home), str(ws)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert probe.returncode == 0, probe.stderr
        _check(probe.stdout, home)
    finally:
        shutil.rmtree(home, ignore_errors=True)
