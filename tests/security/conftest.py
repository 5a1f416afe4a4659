"""The `who` fixture: each security test that takes it runs as root and as a user made
for the test; `user`: a user with no home, for tests that run the runner as it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import runner
from tests.support.isolation import PATH, Who
from tests.support.security import KEY


@pytest.fixture(params=["root", "user"])
def who(request: pytest.FixtureRequest) -> Iterator[Who]:
    if os.geteuid() != 0:
        pytest.skip("these tests place files under /srv, /var and /home: they need root")
    if request.param == "root":
        home = Path(os.path.expanduser("~"))
        env = {**os.environ, "PATH": PATH, "FAKE_API_KEY": KEY}
        env.pop("TMPDIR", None)
        yield Who(None, home, env, sys.executable)
        return
    if shutil.which("useradd") is None:
        pytest.skip("useradd (passwd) is not installed")
    python = shutil.which(f"python{sys.version_info[0]}.{sys.version_info[1]}", path=PATH)
    if python is None:
        pytest.skip("no system python of this version for the unprivileged user")
    base = Path(tempfile.mkdtemp(prefix="runner-iso-home-", dir="/var/tmp"))
    base.chmod(0o755)
    name = f"ri{uuid.uuid4().hex[:8]}"
    home = base / name
    subprocess.run(
        ["useradd", "--create-home", "--home-dir", str(home), "--user-group", name],
        check=True,
        capture_output=True,
    )
    tmp = Path(tempfile.mkdtemp(prefix="runner-iso-tmp-", dir="/tmp"))
    subprocess.run(["chown", f"{name}:{name}", str(tmp)], check=True)
    site = next(p for p in sys.path if p.endswith("site-packages") and p.startswith(sys.prefix))
    src = str(Path(runner.__file__).resolve().parent.parent)
    env = {
        "HOME": str(home),
        "USER": name,
        "PATH": PATH,
        "TMPDIR": str(tmp),
        "PYTHONPATH": f"{src}:{site}",
        "FAKE_API_KEY": KEY,
    }
    try:
        yield Who(name, home, env, python)
    finally:
        subprocess.run(["userdel", "--remove", name], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def user() -> Iterator[str]:
    if os.geteuid() != 0:
        pytest.skip("creating a user for the test needs root")
    if shutil.which("useradd") is None:
        pytest.skip("useradd (passwd) is not installed")
    name = f"rs{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "--user-group", "--no-create-home", name], check=True)
    try:
        yield name
    finally:
        subprocess.run(["userdel", name], capture_output=True)
