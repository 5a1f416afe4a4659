"""The `environment:` section: how its layers merge into a run, and what `runner validate`
checks on this machine (the engine program, the image, the build folder), through real
files, real programs on PATH and, where installed, the real podman."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.config import load_runs
from runner.errors import ConfigError
from tests.support.cli import run_cli
from tests.support.fixtures import make_git_repo

OLD_FINGERPRINT = "0f565a178124c145"
"""A run of PLAIN's file as runners before `environment:` hashed it (measured on main)."""
PLAIN = (
    "version: 1\ndefaults:\n  limits: {max_requests: 7}\n"
    'tasks:\n  - id: a\n    prompt: do it\n    check: "true"\n'
)


def _file(folder: Path, text: str) -> Path:
    path = folder / "tasks.yaml"
    path.write_text(text)
    return path


def _problems(path: Path, **kw: object) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_runs(path, **kw)  # type: ignore[arg-type]
    return [str(p) for p in caught.value.problems]


def _bin(folder: Path, name: str, script: str) -> Path:
    """A real program on a PATH of its own: a shell script standing in for an engine."""
    folder.mkdir(exist_ok=True)
    prog = folder / name
    prog.write_text("#!/bin/sh\n" + script)
    prog.chmod(0o755)
    return folder


def test_layers_merge_field_by_field_and_image_or_build_is_one_choice(tmp_path: Path) -> None:
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "Dockerfile").write_text("FROM scratch\n")
    path = _file(
        tmp_path,
        "version: 1\n"
        "defaults:\n"
        "  environment: {backend: podman, image: localhost/base:1, workdir: /app, cpus: 2}\n"
        "matrix:\n"
        "  variant:\n"
        "    - {name: plain}\n"
        "    - name: big\n"
        "      environment: {memory_mb: 4096, cpus: 4}\n"
        "tasks:\n"
        "  - id: own\n"
        "    prompt: p\n"
        "    environment: {build: img, network: bridge}\n"
        "  - id: inherits\n"
        "    prompt: p\n",
    )
    runs = {r.name: r for r in load_runs(path, offline=True, env={})}
    own = runs["own.plain"].environment
    assert (own.backend, own.image, own.build, own.workdir) == ("podman", None, "img", "/app")
    assert (own.network, own.cpus, own.memory_mb) == ("bridge", 2, None)
    assert runs["own.plain"].build_dir == (tmp_path / "img").resolve()
    big = runs["inherits.big"].environment
    assert (big.image, big.cpus, big.memory_mb, big.network) == (
        "localhost/base:1",
        4,
        4096,
        "none",
    )
    assert runs["inherits.big"].build_dir is None
    assert runs["inherits.big"].at("environment", "cpus").line == 8
    assert runs["inherits.plain"].at("environment", "cpus").line == 3
    assert not runs["own.plain"].repo_named


def test_a_run_without_environment_keeps_its_fingerprint(tmp_path: Path) -> None:
    plain = load_runs(_file(tmp_path, PLAIN), offline=True, env={})
    assert [r.fingerprint for r in plain] == [OLD_FINGERPRINT]
    local = PLAIN.replace("    check:", "    environment: {backend: local}\n    check:")
    assert load_runs(_file(tmp_path, local), offline=True, env={})[0].fingerprint == OLD_FINGERPRINT
    boxed = PLAIN.replace(
        "    check:", "    environment: {backend: podman, image: localhost/x}\n    check:"
    )
    assert load_runs(_file(tmp_path, boxed), offline=True, env={})[0].fingerprint != OLD_FINGERPRINT


def test_a_container_task_needs_no_repository_a_local_one_still_does(tmp_path: Path) -> None:
    engines = _bin(tmp_path / "bin", "podman", "exit 0\n")  # every image is there
    env = {"PATH": str(engines)}
    boxed = _file(
        tmp_path,
        "version: 1\ntasks:\n  - id: a\n    prompt: p\n"
        "    environment: {backend: podman, image: localhost/x}\n",
    )
    (run,) = load_runs(boxed, env=env)  # not offline: the folder is no git repository
    assert not run.repo_named
    local = _file(tmp_path, "version: 1\ntasks:\n  - id: a\n    prompt: p\n")
    (found,) = _problems(local, env=env)
    assert found.startswith(f"{local}:3: tasks[0].repo: ") and "is not a commit there" in found


def test_a_missing_engine_is_located_at_backend_or_executable(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    path = _file(
        tmp_path,
        "version: 1\n"
        "tasks:\n"
        "  - id: a\n"
        "    prompt: p\n"
        "    environment: {backend: docker, image: localhost/x}\n"
        "  - id: b\n"
        "    prompt: p\n"
        "    environment:\n"
        "      backend: podman\n"
        "      image: localhost/x\n"
        "      executable: podman-remote\n"
        "  - id: c\n"
        "    prompt: p\n"
        "    environment: {backend: kubernetes, image: registry.example/a:1}\n",
    )
    found = _problems(path, env={"PATH": str(empty)})
    assert (
        f"{path}:5: tasks[0].environment.backend: backend docker needs 'docker', "
        "which is not on PATH" in "\n".join(found)
    )
    assert any(
        f"{path}:11: tasks[1].environment.executable: " in p and "podman-remote" in p for p in found
    )
    assert any(
        f"{path}:14: tasks[2].environment.backend: " in p and "'kubectl'" in p for p in found
    )
    assert load_runs(path, env={"PATH": str(empty)}, offline=True)  # offline: not looked for


def test_the_image_is_asked_of_the_engine_a_real_program_on_path(tmp_path: Path) -> None:
    # A stand-in engine that knows one image, and records what it was asked.
    log = tmp_path / "asked.txt"
    engines = _bin(
        tmp_path / "bin",
        "docker",
        f'echo "$@" >> {log}\n'
        'if [ "$5" = localhost/present:1 ]; then echo sha256:abc; exit 0; fi\n'
        'echo "Error: no such image: $5" >&2; exit 1\n',
    )
    path = _file(
        tmp_path,
        "version: 1\n"
        "defaults:\n"
        "  environment: {backend: docker, image: localhost/present:1}\n"
        "tasks:\n"
        "  - id: a\n"
        "    prompt: p\n"
        "  - id: b\n"
        "    prompt: p\n"
        "    environment: {image: localhost/absent:2}\n"
        "  - id: c\n"
        "    prompt: p\n"
        "    environment: {image: localhost/absent:2}\n",
    )
    found = _problems(path, env={"PATH": str(engines)})
    assert len(found) == 2 and all("localhost/absent:2 is not on this machine" in p for p in found)
    assert f"{path}:9: tasks[1].environment.image: " in found[0]
    assert "no such image: localhost/absent:2" in found[0]
    asked = log.read_text().splitlines()
    assert sorted(asked) == [  # each image once, however many runs name it
        "image inspect --format {{.Id}} localhost/absent:2",
        "image inspect --format {{.Id}} localhost/present:1",
    ]
    res = run_cli("validate", path, env={"PATH": str(engines)})
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert res.stderr.count("is not on this machine") == 2
    assert run_cli("validate", "--offline", path, env={"PATH": str(engines)}).returncode == 0


@pytest.fixture(scope="module")
def podman_image() -> Iterator[str]:
    """An image imported into the real podman from an empty tarball, removed afterwards."""
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed here (make podman)")
    name = f"localhost/runner-validate-{uuid.uuid4().hex[:12]}:1"
    empty = subprocess.run(["tar", "cf", "-", "--files-from", "/dev/null"], capture_output=True)
    subprocess.run(
        ["podman", "import", "-q", "-", name],
        input=empty.stdout,
        check=True,
        capture_output=True,
        timeout=120,
    )
    try:
        yield name
    finally:
        subprocess.run(["podman", "rmi", "-f", name], capture_output=True, timeout=120)


def test_the_real_podman_finds_an_image_it_has_and_not_one_it_lacks(
    tmp_path: Path, podman_image: str
) -> None:
    path = _file(
        tmp_path,
        "version: 1\n"
        "defaults: {environment: {backend: podman}}\n"
        "tasks:\n"
        f"  - {{id: here, prompt: p, environment: {{image: '{podman_image}'}}}}\n"
        "  - {id: gone, prompt: p, environment: {image: 'localhost/runner-no-such-image:0'}}\n",
    )
    env = {k: os.environ[k] for k in ("PATH", "HOME", "XDG_RUNTIME_DIR") if k in os.environ}
    found = _problems(path, env=env)
    assert len(found) == 1, found
    assert (
        f"{path}:5: tasks[1].environment.image: image localhost/runner-no-such-image:0 "
        "is not on this machine" in found[0]
    )


def test_a_build_folder_must_keep_its_files_inside(tmp_path: Path) -> None:
    img = tmp_path / "img"
    img.mkdir()
    (img / "Dockerfile").write_text("FROM scratch\nCOPY . /app\n")
    (img / "inside.txt").write_text("x")
    (img / "ok").symlink_to("inside.txt")
    path = _file(
        tmp_path,
        "version: 1\ntasks:\n  - id: a\n    prompt: p\n"
        "    environment: {backend: podman, build: img}\n",
    )
    assert load_runs(path, offline=True, env={})[0].build_dir == img.resolve()
    (img / "sub").mkdir()
    (img / "sub" / "secret").symlink_to(tmp_path / "tasks.yaml")
    (wrong,) = _problems(path, offline=True, env={})
    assert f"{path}:5: tasks[0].environment.build: sub/secret in " in wrong
    assert "is a link out of the build folder" in wrong
    (img / "sub" / "secret").unlink()
    (img / "Dockerfile").unlink()
    (img / "Dockerfile").symlink_to(img / "inside.txt")  # a link is not the Dockerfile
    (wrong,) = _problems(path, offline=True, env={})
    assert "holds no Dockerfile (or Containerfile) as a regular file" in wrong


def test_a_task_repo_that_is_named_is_still_checked_for_a_container_run(tmp_path: Path) -> None:
    make_git_repo(tmp_path / "repo")
    engines = _bin(tmp_path / "bin", "podman", "exit 0\n")
    path = _file(
        tmp_path,
        "version: 1\ntasks:\n  - id: a\n    prompt: p\n    repo: repo\n"
        "    git: {base: no-such-ref}\n"
        "    environment: {backend: podman, image: localhost/x}\n",
    )
    found = _problems(path, env={"PATH": str(engines)})
    assert any("tasks[0].git.base" in p for p in found), found


BYPASSES = [
    "--mount=type=volume,src=v,dst=/h,volume-opt=type=none,volume-opt=o=bind,volume-opt=device=/",
    "--mount=type=tmpfs,dst=/t",
    "--volume=v:/data",
    "--hooks-dir=/tmp/hooks",
    "--env-file=/etc/shadow",
    "--cidfile=/etc/cron.d/x",
    "--pidfile=/etc/cron.d/x",
    "--conmon-pidfile=/etc/cron.d/x",
    "--log-opt=path=/etc/cron.d/x",
    "--pids-limit=-1",
    "--cgroup-parent=/",
    "--label-file=/etc/shadow",
    "--authfile=/root/.docker/config.json",
    "--decryption-key=/root/key.pem",
    "--init-path=/tmp/evil",
    "--seccomp-policy=image",
    "--sysctl=kernel.core_pattern=|/tmp/x",
    "--chrootdirs=/",
    "--preserve-fds=5",
    "--image-volume=bind",
    "--uidmap=0:0:65536",
    "--privileged",
    "--security-opt=seccomp=unconfined",
    "--env=OPENAI_API_KEY",
    "--env=OPENAI*",
    "--tmpfs=/t:size=1m,dev",
    "--tmpfs=/t:suid",
    "--tmpfs=../t",
    "--tmpfs=/",
    "--ulimit=nofile=-1:-1",
    "--ulimit=nproc=unlimited",
    "--ulimit=rtprio=99",
    "--ulimit=nofile=20000:10000",
    "--add-host=h:host-gateway",
    "--dns=example.com",
    "--pull=always",
    "--read-only=false",
    "--cap-drop",
]


@pytest.mark.parametrize("arg", BYPASSES)
def test_run_args_outside_the_allow_list_are_refused_and_located(tmp_path: Path, arg: str) -> None:
    path = _file(
        tmp_path,
        "version: 1\ntasks:\n  - id: a\n    prompt: p\n"
        "    environment:\n      backend: podman\n      image: localhost/x\n"
        f"      run_args:\n        - --read-only\n        - {json.dumps(arg)}\n",
    )
    (wrong,) = _problems(path, offline=True, env={})
    assert f"{path}:10: tasks[0].environment.run_args[1]: " in wrong, wrong
    assert "is refused" in wrong or "takes no value" in wrong, wrong
    assert "allowed: --tmpfs=/PATH[:OPTS], --shm-size=SIZE" in wrong, wrong
    proc = run_cli(["validate", "--offline", str(path)], env={})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr


def test_the_allowed_run_args_pass_as_written(tmp_path: Path) -> None:
    allowed = [
        "--tmpfs=/scratch",
        "--tmpfs=/run/t:rw,noexec,nosuid,nodev,size=64m,mode=1777",
        "--shm-size=256m",
        "--ulimit=nofile=20000:20000",
        "--ulimit=core=0",
        "--add-host=db.local:10.0.0.5",
        "--add-host=v6:::1",
        "--hostname=box",
        "--dns=10.0.0.53",
        "--platform=linux/arm64/v8",
        "--pull=never",
        "--read-only",
        "--read-only-tmpfs",
        "--cap-drop=ALL",
        "--security-opt=no-new-privileges",
        "--env=LANG=C.UTF-8",
        "--env=EMPTY=",
    ]
    path = _file(
        tmp_path,
        "version: 1\ntasks:\n  - id: a\n    prompt: p\n"
        "    environment:\n      backend: podman\n      image: localhost/x\n"
        f"      run_args: {json.dumps(allowed)}\n",
    )
    (run,) = load_runs(path, offline=True, env={})
    assert run.environment is not None and run.environment.run_args == tuple(allowed)


@pytest.mark.parametrize("program", ["/tmp/x/evil.sh", "/usr/bin/podman", "./podman", "sh"])
def test_executable_names_an_engine_never_a_path(tmp_path: Path, program: str) -> None:
    """`validate` and runs start the engine program: a task file (which a pull request may
    change) names only an engine, found on the PATH of whoever starts runner."""
    mark = tmp_path / "ran"
    evil = tmp_path / "evil.sh"
    evil.write_text(f'#!/bin/sh\necho "$@" >> {mark}\necho podman\n')
    evil.chmod(0o755)
    path = _file(
        tmp_path,
        "version: 1\ntasks:\n  - id: a\n    prompt: p\n    environment:\n"
        "      backend: podman\n      image: localhost/x\n"
        f"      executable: {str(evil) if program == '/tmp/x/evil.sh' else program}\n",
    )
    (said,) = _problems(path)
    assert f"{path}:8: tasks[0].environment.executable: must be one of podman, docker" in said
    assert not mark.exists()
