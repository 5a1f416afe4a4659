"""Tests for runner.tools.apply_patch.

Golden cases live in `tests/tools/patches/*.case`, one case per file, so the state
before, the patch and the expected result read top to bottom in one place. Format:

    # comment lines (ignored until the first section header)
    ~~~ before PATH [+crlf] [+noeol] [+esc]   a file present before the patch
    ~~~ patch [+crlf] [+esc]                  the patch text
    ~~~ argv WORD...                          instead of `patch`: a shell tool call whose
                                              argv is WORD... plus the section text
    ~~~ after PATH [+crlf] [+noeol] [+esc]    a file expected afterwards
    ~~~ output                                the exact success output (optional)
    ~~~ error                                 the exact failure output

A section's text is every line up to the next `~~~` header, each ending in "\\n" (blank
lines count). `+crlf` ends lines with "\\r\\n" instead, `+noeol` drops the last line's
ending, and `+esc` decodes `\\uXXXX`, `\\r`, `\\t` and `\\\\` so invisible characters stay
visible in the case file. For `error` and `output` the final newline is dropped.

With `error`, the tree afterwards must equal the tree before, byte for byte. Otherwise
the tree afterwards must hold exactly the `after` files: a file that is not listed must
not exist.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from runner.sandbox.local import LocalExecutor
from runner.sandbox.localenv import LocalEnvironment
from runner.tools import ToolCall, ToolContext, ToolResult
from runner.tools import apply_patch as ap
from runner.tools.apply_patch import LARK_GRAMMAR, ApplyPatchTool
from runner.tools.patch_format import (
    AddFile,
    ApplyResult,
    DeleteFile,
    UpdateFile,
    extract_shell_patch,
    parse_patch,
)

PATCHES = Path(__file__).parent / "patches"


def apply_patch(root: Path, text: str, *, workdir: str | None = None) -> ApplyResult:
    """The applier over the `local` environment of `root`, unsandboxed (only a move runs
    a command there, to keep the file's mode)."""
    env = LocalEnvironment(LocalExecutor(), root, env={"PATH": os.environ.get("PATH", "")})
    return asyncio.run(ap.apply_patch(env, text, workdir=workdir))


# --------------------------------------------------------------------------- golden


@dataclass
class Case:
    name: str
    before: dict[str, bytes] = field(default_factory=dict)
    after: dict[str, bytes] = field(default_factory=dict)
    patch: str | None = None
    argv: list[str] | None = None
    output: str | None = None
    error: str | None = None


_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|r|t|\\)")


def _unescape(text: str) -> str:
    def one(m: re.Match[str]) -> str:
        code = m.group(1)
        if code.startswith("u"):
            return chr(int(code[1:], 16))
        return {"r": "\r", "t": "\t", "\\": "\\"}[code]

    return _ESCAPE.sub(one, text)


def _section_text(lines: list[str], flags: set[str]) -> str:
    eol = "\r\n" if "+crlf" in flags else "\n"
    text = "".join(line + eol for line in lines)
    if "+noeol" in flags and text.endswith(eol):
        text = text[: -len(eol)]
    return _unescape(text) if "+esc" in flags else text


def load_case(path: Path) -> Case:
    case = Case(name=path.stem)
    sections: list[tuple[list[str], list[str]]] = []
    for line in path.read_text(encoding="utf-8").split("\n")[:-1]:
        if line.startswith("~~~ "):
            sections.append((line[4:].split(), []))
        elif sections:
            sections[-1][1].append(line)
    for header, lines in sections:
        kind, words = header[0], [w for w in header[1:] if not w.startswith("+")]
        flags = {w for w in header[1:] if w.startswith("+")}
        text = _section_text(lines, flags)
        if kind == "before":
            case.before[words[0]] = text.encode("utf-8")
        elif kind == "after":
            case.after[words[0]] = text.encode("utf-8")
        elif kind == "patch":
            case.patch = text
        elif kind == "argv":
            case.argv = [*words, text.removesuffix("\n")]
        elif kind == "output":
            case.output = text.removesuffix("\n")
        elif kind == "error":
            case.error = text.removesuffix("\n")
        else:
            raise ValueError(f"{path.name}: unknown section {kind!r}")
    assert (case.patch is None) != (case.argv is None), f"{path.name}: need patch or argv"
    return case


def snapshot(root: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            full = Path(dirpath) / name
            files[full.relative_to(root).as_posix()] = full.read_bytes()
    return files


def write_tree(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


CASES = sorted(PATCHES.glob("*.case"))


def test_there_are_enough_golden_cases() -> None:
    assert len(CASES) >= 40


@pytest.mark.parametrize("case_file", CASES, ids=[c.stem for c in CASES])
def test_golden(case_file: Path, tmp_path: Path) -> None:
    case = load_case(case_file)
    root = tmp_path / "root"
    root.mkdir()
    write_tree(root, case.before)

    if case.argv is not None:
        found = extract_shell_patch(case.argv)
        assert found is not None, "shell form not recognised"
        text, workdir = found
        result = apply_patch(root, text, workdir=workdir)
    else:
        assert case.patch is not None
        result = apply_patch(root, case.patch)

    if case.error is not None:
        assert result.output == case.error
        assert not result.success
        assert snapshot(root) == case.before
    else:
        assert result.success, result.output
        assert snapshot(root) == case.after
        if case.output is not None:
            assert result.output == case.output


# --------------------------------------------------------------------------- applier


def _patch(*body: str) -> str:
    return "\n".join(["*** Begin Patch", *body, "*** End Patch"])


def test_symlink_final_component_escape(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("secret\n")
    (root / "link.txt").symlink_to(outside)
    result = apply_patch(root, _patch("*** Update File: link.txt", "@@", "-secret", "+pwned"))
    assert not result.success
    assert "symbolic link" in result.output
    assert outside.read_text() == "secret\n"


def test_symlinked_parent_dir_escape(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "sub").symlink_to(elsewhere, target_is_directory=True)
    result = apply_patch(root, _patch("*** Add File: sub/new.txt", "+x"))
    assert not result.success
    assert "refused path 'sub/new.txt'" in result.output
    assert list(elsewhere.iterdir()) == []


def test_dangling_symlink_escape(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "dangling").symlink_to(tmp_path / "not_yet")
    result = apply_patch(root, _patch("*** Add File: dangling", "+x"))
    assert not result.success
    assert not (tmp_path / "not_yet").exists()


def test_symlink_inside_root_is_allowed(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "real").mkdir(parents=True)
    (root / "real" / "f.txt").write_text("a\n")
    (root / "alias").symlink_to(root / "real", target_is_directory=True)
    result = apply_patch(root, _patch("*** Update File: alias/f.txt", "@@", "-a", "+b"))
    assert result.success, result.output
    assert (root / "real" / "f.txt").read_text() == "b\n"


def test_root_itself_through_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    result = apply_patch(link, _patch("*** Add File: a.txt", "+a"))
    assert result.success, result.output
    assert (real / "a.txt").read_text() == "a\n"


def test_escape_refused_before_other_hunks_write(tmp_path: Path) -> None:
    (tmp_path / "ok.txt").write_text("ok\n")
    result = apply_patch(
        tmp_path,
        _patch("*** Update File: ok.txt", "@@", "-ok", "+changed", "*** Delete File: /etc/hosts"),
    )
    assert not result.success
    assert (tmp_path / "ok.txt").read_text() == "ok\n"


def test_changes_list_for_events(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.txt").write_text("a\n")
    (tmp_path / "src" / "b.txt").write_text("b\n")
    text = _patch(
        "*** Add File: c.txt",
        "+c",
        "*** Delete File: b.txt",
        "*** Update File: a.txt",
        "*** Move to: ../moved.txt",
        "@@",
        "-a",
        "+A",
    )
    result = apply_patch(tmp_path, text, workdir="src")
    assert result.success, result.output
    assert result.changes == [
        {"path": "src/c.txt", "kind": "add"},
        {"path": "src/b.txt", "kind": "delete"},
        {"path": "src/a.txt", "kind": "update"},
    ]
    assert result.output == (
        "Success. Updated the following files:\nA c.txt\nM ../moved.txt\nD b.txt"
    )
    assert (tmp_path / "moved.txt").read_text() == "A\n"


def test_update_of_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    result = apply_patch(tmp_path, _patch("*** Update File: d", "@@", "+x"))
    assert not result.success
    assert "d is a directory" in result.output


def test_add_under_existing_file_is_refused_up_front(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a\n")
    (tmp_path / "file").write_text("not a dir\n")
    result = apply_patch(
        tmp_path,
        _patch("*** Update File: a.txt", "@@", "-a", "+b", "*** Add File: file/x.txt", "+x"),
    )
    assert not result.success
    assert "file is a file, not a directory" in result.output
    assert (tmp_path / "a.txt").read_text() == "a\n"


def test_non_utf8_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "bin.dat").write_bytes(b"\xff\xfe\x00")
    result = apply_patch(tmp_path, _patch("*** Update File: bin.dat", "@@", "+x"))
    assert not result.success
    assert "not UTF-8" in result.output


def test_write_failure_rolls_back(tmp_path: Path) -> None:
    """A write that fails for real (the target is a FIFO nobody reads: refused at once,
    never blocked on) undoes the writes before it."""
    (tmp_path / "a.txt").write_text("a\n")
    os.mkfifo(tmp_path / "fifo")
    result = apply_patch(
        tmp_path,
        _patch(
            "*** Update File: a.txt",
            "@@",
            "-a",
            "+A",
            "*** Add File: new/b.txt",
            "+b",
            "*** Add File: fifo",
            "+c",
        ),
    )
    assert not result.success
    assert "writing failed" in result.output and "fifo" in result.output.lower()
    assert "No files were changed." in result.output
    assert (tmp_path / "a.txt").read_bytes() == b"a\n"
    assert not (tmp_path / "new").exists()


def test_move_keeps_file_mode(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("echo hi\n")
    script.chmod(0o755)
    result = apply_patch(tmp_path, _patch("*** Update File: run.sh", "*** Move to: bin/run.sh"))
    assert result.success, result.output
    assert not script.exists()
    assert (tmp_path / "bin" / "run.sh").stat().st_mode & 0o777 == 0o755


def test_update_keeps_file_mode(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("echo hi\n")
    script.chmod(0o750)
    result = apply_patch(tmp_path, _patch("*** Update File: run.sh", "@@", "-echo hi", "+echo"))
    assert result.success, result.output
    assert script.stat().st_mode & 0o777 == 0o750


def test_delete_symlink_removes_link_not_target(tmp_path: Path) -> None:
    (tmp_path / "target.txt").write_text("t\n")
    (tmp_path / "link.txt").symlink_to(tmp_path / "target.txt")
    result = apply_patch(tmp_path, _patch("*** Delete File: link.txt"))
    assert result.success, result.output
    assert not (tmp_path / "link.txt").is_symlink()
    assert (tmp_path / "target.txt").read_text() == "t\n"


# --------------------------------------------------------------------------- tool


class _NoExecutor:
    limit_notes: list[str] = []

    async def run(self, *args: object, **kwargs: object) -> object:
        raise AssertionError("apply_patch must not run commands")


def _ctx(root: Path) -> ToolContext:
    env = LocalEnvironment(_NoExecutor(), root)  # type: ignore[arg-type]
    return ToolContext(environment=env, env={})


def _run(tool: ApplyPatchTool, call: ToolCall, root: Path) -> ToolResult:
    return asyncio.run(tool.run(call, _ctx(root)))


def test_function_spec_shape() -> None:
    spec = ApplyPatchTool().spec()
    assert spec["type"] == "function"
    assert spec["name"] == "apply_patch"
    assert spec["strict"] is False
    assert spec["parameters"] == {
        "type": "object",
        "properties": {
            "input": {
                "type": "string",
                "description": spec["parameters"]["properties"]["input"]["description"],
            }
        },
        "required": ["input"],
        "additionalProperties": False,
    }
    description = spec["description"]
    for needle in ("*** Begin Patch", "relative", "3 lines", "@@", "*** End Patch"):
        assert needle in description
    assert json.dumps(spec) == json.dumps(ApplyPatchTool().spec())  # stable bytes


def test_freeform_spec_shape() -> None:
    spec = ApplyPatchTool(freeform=True).spec()
    assert set(spec) == {"type", "name", "description", "format"}
    assert spec["type"] == "custom"
    assert spec["name"] == "apply_patch"
    assert spec["format"] == {"type": "grammar", "syntax": "lark", "definition": LARK_GRAMMAR}


def test_function_description_example_is_a_valid_patch() -> None:
    description = ApplyPatchTool().spec()["description"]
    example = description[description.rindex("*** Begin Patch") :]
    patch = parse_patch(example)
    assert [type(h) for h in patch.hunks] == [AddFile, UpdateFile, DeleteFile]


def test_lark_grammar_accepts_patches() -> None:
    lark = pytest.importorskip("lark")
    parser = lark.Lark(LARK_GRAMMAR, parser="lalr")
    description = ApplyPatchTool().spec()["description"]
    parser.parse(description[description.rindex("*** Begin Patch") :])
    parser.parse(
        "*** Begin Patch\n*** Update File: a\n*** Move to: b\n@@\n \n-x\n+\n"
        "*** End of File\n*** End Patch"
    )
    with pytest.raises(lark.exceptions.LarkError):
        parser.parse("*** Begin Patch\n*** Frobnicate: a\n*** End Patch\n")


def test_run_function_call(tmp_path: Path) -> None:
    call = ToolCall("c1", "apply_patch", json.dumps({"input": _patch("*** Add File: x", "+1")}))
    result = _run(ApplyPatchTool(), call, tmp_path)
    assert result.success
    assert result.output == "Success. Updated the following files:\nA x"
    assert result.event == {
        "type": "file_change",
        "changes": [{"path": "x", "kind": "add"}],
        "status": "completed",
    }
    assert (tmp_path / "x").read_text() == "1\n"


def test_run_custom_call(tmp_path: Path) -> None:
    (tmp_path / "y").write_text("old\n")
    call = ToolCall(
        "c2", "apply_patch", _patch("*** Update File: y", "@@", "-old", "+new"), kind="custom"
    )
    result = _run(ApplyPatchTool(freeform=True), call, tmp_path)
    assert result.success
    assert result.event is not None and result.event["status"] == "completed"
    assert (tmp_path / "y").read_text() == "new\n"


def test_run_failure_event(tmp_path: Path) -> None:
    call = ToolCall("c3", "apply_patch", _patch("*** Delete File: nope"), kind="custom")
    result = _run(ApplyPatchTool(freeform=True), call, tmp_path)
    assert not result.success
    assert result.event == {
        "type": "file_change",
        "changes": [{"path": "nope", "kind": "delete"}],
        "status": "failed",
    }


@pytest.mark.parametrize("arguments", ["{not json", "[]", '{"patch": "x"}', '{"input": 3}'])
def test_run_bad_arguments(arguments: str, tmp_path: Path) -> None:
    result = _run(ApplyPatchTool(), ToolCall("c4", "apply_patch", arguments), tmp_path)
    assert not result.success
    assert result.output.startswith("apply_patch failed: ")
    assert '"input"' in result.output
    assert snapshot(tmp_path) == {}


def test_module_exports() -> None:
    for name in ap.__all__:
        assert hasattr(ap, name)
