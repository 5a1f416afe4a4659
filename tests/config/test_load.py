"""The config pass reads each user file once, however many runs use it (an audit hook
counts the opens)."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from runner.config import expand, load_task_file, source_sha256

_OPENS: Counter[str] = Counter()
_WATCHED: list[Path] = []


def _hook(event: str, args: tuple[object, ...]) -> None:
    if event == "open" and _WATCHED and isinstance(args[0], (str, Path)):
        path = str(args[0])
        if any(path.startswith(str(d)) for d in _WATCHED):
            _OPENS[Path(path).name] += 1


sys.addaudithook(_hook)  # hooks cannot be removed; it counts only under _WATCHED


def test_each_user_file_is_read_once(tmp_path: Path) -> None:
    (tmp_path / "instr.md").write_text("Be careful.\n")
    (tmp_path / "v.md").write_text("Be quick.\n")
    (tmp_path / "compact.md").write_text("Summarise.\n")
    (tmp_path / "schema.json").write_text('{"type": "object"}')
    skill = tmp_path / "skills" / "one"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: one\ndescription: does one thing\n---\nbody\n")
    task_file = tmp_path / "t.yaml"
    task_file.write_text(
        "version: 1\n"
        "matrix:\n  model: [local/smollm2, ollama/qwen]\n  repeat: 2\n"
        "  variant:\n    - {name: plain}\n    - {name: quick, instructions_file: v.md}\n"
        "defaults:\n  instructions_file: instr.md\n  compact_prompt_file: compact.md\n"
        "  output_schema: schema.json\n  skills: [skills]\n"
        "tasks:\n  - {id: a, prompt: p}\n  - {id: b, prompt: q}\n  - {id: c, prompt: r}\n"
    )
    _WATCHED.append(tmp_path)
    try:
        tf = load_task_file(task_file)
        runs = expand(tf, tmp_path, file=str(task_file))
        assert len(runs) == 3 * 2 * 2 * 2
        assert source_sha256(tf) and {r.fingerprint for r in runs}  # no file read for these
    finally:
        _WATCHED.clear()
    assert {r.instructions for r in runs} == {"Be careful.", "Be quick."}
    assert dict(_OPENS) == {
        "t.yaml": 1,
        "instr.md": 1,
        "v.md": 1,
        "compact.md": 1,
        "schema.json": 1,
        "one": 1,  # the skill's folder: its SKILL.md is opened relative to it
    }
