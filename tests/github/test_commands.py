"""`python -m runner.github`: the steps' command line, its flag types, the `docs` command,
and a step's RunnerError as one annotation and exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.github import main
from runner.github.commands import build_parser
from runner.github.render import DOCS_END, DOCS_START
from runner.vocabulary import RunStatus

ACTION_YML = """\
inputs:
  prompt: {description: "What to ask"}
outputs:
  cost: {description: "US dollars"}
"""


def test_docs_writes_the_readme_tables_from_the_action(tmp_path: Path) -> None:
    action, readme = tmp_path / "action.yml", tmp_path / "README.md"
    action.write_text(ACTION_YML)
    readme.write_text(f"# A\n{DOCS_START}\nstale row\n{DOCS_END}\n")
    assert main(["docs", "--action", str(action), "--readme", str(readme)]) == 0
    text = readme.read_text()
    assert "| `prompt` |  | What to ask |" in text and "stale row" not in text


def test_a_steps_error_is_one_annotation_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    action, readme = tmp_path / "action.yml", tmp_path / "README.md"
    action.write_text(ACTION_YML)
    readme.write_text("# no markers\n")
    assert main(["docs", "--action", str(action), "--readme", str(readme)]) == 2
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("::error title=runner::README needs one '<!-- action-docs:start")
    assert readme.read_text() == "# no markers\n"


def test_statuses_are_from_the_vocabulary(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["pull-requests", "--report", "r", "--statuses", "failed, "])
    assert args.statuses == frozenset({RunStatus.FAILED})
    default = build_parser().parse_args(["pull-requests", "--report", "r"])
    assert default.statuses == frozenset({RunStatus.COMPLETED})
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["pull-requests", "--report", "r", "--statuses", "complete"])
    assert exit_.value.code == 2
    assert "'complete': each must be one of completed, " in capsys.readouterr().err


@pytest.mark.parametrize(("given", "kept"), [(" TRUE ", True), ("yes", False), ("", False)])
def test_keep_sudo_is_only_true_when_it_says_true(given: str, kept: bool) -> None:
    args = build_parser().parse_args(["run", "--out", "o", "--keep-sudo", given])
    assert args.keep_sudo is kept


def test_a_step_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([])
    assert exit_.value.code == 2 and "required: command" in capsys.readouterr().err
