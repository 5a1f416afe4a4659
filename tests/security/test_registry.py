"""The list of this user's batches' folders, attacked across batches and users (attacker
review of issue 25, findings 4 and 6, and its second review): a squatted work root, a
TMPDIR inside a task's repository, a user without a home. The registry's own behaviour
(live, kept, pruned, killed, bounded) is tested in tests/sandbox/test_registry.py."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import runner


def test_a_squatted_work_root_falls_back_to_one_named_for_the_uid(tmp_path: Path) -> None:
    """Finding 4: root's `/tmp/runner-work` (or a link planted there) no longer blocks a
    user whose TMPDIR is unset: the runner takes `runner-work-<uid>` beside it."""
    from runner.batch import _private_run_dirs

    squat = tmp_path / "runner-work"
    os.symlink(tmp_path, squat)
    assert _private_run_dirs(tmp_path) == tmp_path / f"runner-work-{os.geteuid()}"
    assert (os.stat(tmp_path / f"runner-work-{os.geteuid()}").st_mode & 0o777) == 0o700
    if os.geteuid() == 0:
        squat.unlink()
        squat.mkdir()
        os.chown(squat, 65534, 65534)
        os.rmdir(tmp_path / "runner-work-0")
        assert _private_run_dirs(tmp_path) == tmp_path / "runner-work-0"


def test_tmpdir_inside_a_tasks_repository_is_refused(tmp_path: Path) -> None:
    """Finding 6: the repository's path would be every command's cwd."""
    from tests.support.cli import run_cli
    from tests.support.fixtures import make_git_repo
    from tests.support.security import tasks

    repo = make_git_repo(tmp_path / "repo", {"README.md": "x\n"})
    (repo / "tmp").mkdir()
    task_file = tasks(tmp_path, "http://127.0.0.1:9", repo, ["t"])
    res = run_cli("run", task_file, "--out", tmp_path / "out", env={"TMPDIR": str(repo / "tmp")})
    assert res.returncode == 2, res.stderr
    assert f"TMPDIR: {repo}/tmp lies inside the repository {repo}" in res.stderr
    assert "Traceback" not in res.stderr and not (repo / "tmp" / "runner-work").exists()


LIVE_AND_LISTED = (
    "import sys; from pathlib import Path; from runner.sandbox import registry\n"
    "with registry.live([Path(sys.argv[1])]):\n"
    "    print(registry.folder()); print(Path(sys.argv[1]) in registry.registered())\n"
)


def test_a_user_without_a_home_registers_under_tmp(tmp_path: Path, user: str) -> None:
    """Second attack review of issue 25: a user made without a home (`useradd` without
    `-m`, common in CI and containers) had every batch refused, since the registry could
    not be made in the home the password database names."""
    python = shutil.which(
        f"python{sys.version_info[0]}.{sys.version_info[1]}", path="/usr/local/bin:/usr/bin:/bin"
    )
    if python is None:
        pytest.skip("no system python of this version for the unprivileged user")
    entry = pwd.getpwnam(user)
    assert not os.path.exists(entry.pw_dir)
    work = Path(tempfile.mkdtemp(prefix="runner-reg-test-", dir="/var/tmp"))
    try:
        os.chown(work, entry.pw_uid, entry.pw_gid)
        site = next(p for p in sys.path if p.endswith("site-packages") and p.startswith(sys.prefix))
        src = str(Path(runner.__file__).resolve().parent.parent)
        proc = subprocess.run(
            ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", python]
            + ["-c", LIVE_AND_LISTED, str(work)],
            env={"PATH": "/usr/bin:/bin", "HOME": entry.pw_dir, "PYTHONPATH": f"{src}:{site}"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        live = Path(f"/tmp/runner-live-{entry.pw_uid}")
        assert proc.stdout.split() == [str(live), "True"]
        st = os.lstat(live)
        assert st.st_uid == entry.pw_uid and (st.st_mode & 0o777) == 0o700
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(f"/tmp/runner-live-{entry.pw_uid}", ignore_errors=True)
