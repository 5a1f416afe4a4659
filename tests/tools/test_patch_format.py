"""Tests for runner.tools.patch_format: Codex's patch envelope parsed (with its line
numbers in errors), new bodies planned by the fuzzy line matcher, and a patch recognised
inside a shell command. Pure functions, so no workspace: the applier's tests are in
test_apply_patch.py."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from runner.errors import PatchError
from runner.tools.patch_format import (
    AddFile,
    Chunk,
    DeleteFile,
    Patch,
    UpdateFile,
    extract_shell_patch,
    parse_patch,
    plan_patch,
    seek_sequence,
)

# --------------------------------------------------------------------------- parser


def test_parse_all_hunk_kinds() -> None:
    patch = parse_patch(
        "*** Begin Patch\n"
        "*** Add File: a.txt\n+one\n+two\n"
        "*** Delete File: b.txt\n"
        "*** Update File: c.py\n*** Move to: d.py\n"
        "@@ def f():\n-    pass\n+    return 1\n"
        "@@\n x\n-y\n*** End of File\n"
        "*** End Patch\n"
    )
    assert patch == Patch(
        [
            AddFile("a.txt", "one\ntwo\n"),
            DeleteFile("b.txt"),
            UpdateFile(
                "c.py",
                "d.py",
                [
                    Chunk("def f():", ["    pass"], ["    return 1"], False),
                    Chunk(None, ["x", "y"], ["x"], True),
                ],
            ),
        ]
    )


def test_parse_stacked_anchor_becomes_anchor_only_chunk() -> None:
    patch = parse_patch(
        "*** Begin Patch\n*** Update File: a\n@@ class A\n@@ def f\n-x\n+y\n*** End Patch"
    )
    hunk = patch.hunks[0]
    assert isinstance(hunk, UpdateFile)
    assert hunk.chunks == [Chunk("class A", [], [], False), Chunk("def f", ["x"], ["y"])]


def test_parse_error_carries_line_number() -> None:
    with pytest.raises(PatchError) as info:
        parse_patch("*** Begin Patch\n*** Update File: x\n*** End Patch")
    assert info.value.line == 2
    assert "update hunk for 'x' is empty" in str(info.value)


def test_parse_error_line_numbers_count_heredoc_line() -> None:
    with pytest.raises(PatchError) as info:
        parse_patch("<<'EOF'\n*** Begin Patch\n*** Bogus\n*** End Patch\nEOF")
    assert info.value.line == 3


def test_patch_error_is_in_the_one_tree() -> None:
    from runner.errors import RunnerError, ToolError

    assert issubclass(PatchError, ToolError) and issubclass(PatchError, RunnerError)
    with pytest.raises(ToolError, match="first line"):
        parse_patch("")


def test_heredoc_needs_begin_and_end_inside() -> None:
    with pytest.raises(PatchError, match="first line"):
        parse_patch("<<'EOF'\nnot a patch\nstill not\nEOF")


_PATCHY_LINES = st.sampled_from(
    [
        "*** Begin Patch",
        "*** End Patch",
        "*** Add File: a",
        "*** Delete File: a",
        "*** Update File: a",
        "*** Move to: b",
        "*** End of File",
        "@@",
        "@@ ctx",
        "+x",
        "-x",
        " x",
        "",
        "   ",
        "<<'EOF'",
        "EOF",
        "junk",
        "*",
        "\r",
    ]
)


@settings(max_examples=300)
@given(st.text())
def test_parser_only_raises_patch_error_on_any_text(text: str) -> None:
    with contextlib.suppress(PatchError):
        parse_patch(text)


@settings(max_examples=500)
@given(st.lists(st.one_of(_PATCHY_LINES, st.text(max_size=8)), max_size=14))
def test_parser_only_raises_patch_error_on_patch_like_text(lines: list[str]) -> None:
    try:
        patch = parse_patch("\n".join(lines))
    except PatchError:
        return
    # Whatever parses, plans against an empty tree with only PatchError, too.
    with contextlib.suppress(PatchError):
        plan_patch(patch, lambda _p: None)


_LINE = st.text(st.characters(blacklist_characters="\n\r"), max_size=20)
_PATH = st.from_regex(r"[a-z][a-z0-9_]{0,8}(/[a-z0-9_]{1,8}){0,2}\.txt", fullmatch=True)


@given(_PATH, st.lists(_LINE, max_size=10))
def test_add_file_round_trips(path: str, lines: list[str]) -> None:
    text = "*** Begin Patch\n*** Add File: " + path + "\n"
    text += "".join("+" + line + "\n" for line in lines) + "*** End Patch\n"
    assert parse_patch(text) == Patch([AddFile(path, "".join(line + "\n" for line in lines))])


@given(
    st.lists(_LINE, min_size=1, max_size=12),
    st.data(),
    st.lists(_LINE, max_size=4),
)
def test_generated_update_applies(lines: list[str], data: st.DataObject, new: list[str]) -> None:
    start = data.draw(st.integers(0, len(lines) - 1))
    length = data.draw(st.integers(1, len(lines) - start))
    old = lines[start : start + length]
    # The first exact occurrence must be the one we picked.
    assume(
        all(lines[i : i + length] != old for i in range(start))
        and seek_sequence(lines, old, 0, False) == start
    )
    text = "*** Begin Patch\n*** Update File: f\n@@\n"
    text += "".join(f"-{o}\n" for o in old) + "".join(f"+{n}\n" for n in new)
    text += "*** End Patch"
    original = "".join(f"{line}\n" for line in lines)
    (change,) = plan_patch(parse_patch(text), lambda _p: original)
    expected = lines[:start] + new + lines[start + length :]
    assert change.contents == "".join(f"{line}\n" for line in expected)


# --------------------------------------------------------------------------- planner


def test_seek_sequence_passes_in_order() -> None:
    lines = ["a  ", "  b", "c\u2014d", "b"]
    assert seek_sequence(lines, ["a"], 0, False) == 0  # trailing whitespace
    assert seek_sequence(lines, ["b"], 0, False) == 3  # exact beats stripped at 1
    assert seek_sequence(lines, ["b"], 0, True) == 3
    assert seek_sequence(lines, ["c-d"], 0, False) == 2  # punctuation folding
    assert seek_sequence(lines, ["zzz"], 0, False) is None
    assert seek_sequence(lines, [], 2, False) == 2
    assert seek_sequence(["x"], ["x", "y"], 0, False) is None


def test_plan_is_pure_and_reads_each_path_once() -> None:
    reads: list[str] = []

    def read(path: str) -> str | None:
        reads.append(path)
        return {"a.txt": "1\n2\n"}.get(path)

    patch = parse_patch(
        "*** Begin Patch\n*** Update File: a.txt\n@@\n-1\n+one\n"
        "*** Update File: ./a.txt\n@@\n-2\n+two\n*** End Patch"
    )
    changes = plan_patch(patch, read)
    assert reads == ["a.txt"]
    assert [c.contents for c in changes] == ["one\n2\n", "one\ntwo\n"]


def test_plan_rejects_empty_patch() -> None:
    with pytest.raises(PatchError, match="no file operations"):
        plan_patch(Patch([]), lambda _p: None)


def test_crlf_detection_uses_majority() -> None:
    patch = parse_patch("*** Begin Patch\n*** Update File: f\n@@\n+new\n*** End Patch")
    (change,) = plan_patch(patch, lambda _p: "a\r\nb\r\nc\n")
    assert change.contents == "a\r\nb\r\nc\nnew\r\n"


# --------------------------------------------------------------------------- shell form

PATCH_TEXT = "*** Begin Patch\n*** Add File: a\n+a\n*** End Patch"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["apply_patch", PATCH_TEXT], (PATCH_TEXT, None)),
        (["applypatch", PATCH_TEXT], (PATCH_TEXT, None)),
        (["bash", "-lc", f"apply_patch <<'EOF'\n{PATCH_TEXT}\nEOF\n"], (PATCH_TEXT + "\n", None)),
        (["bash", "-c", f"apply_patch <<EOF\n{PATCH_TEXT}\nEOF"], (PATCH_TEXT + "\n", None)),
        (["sh", "-c", f'apply_patch << "X"\n{PATCH_TEXT}\nX'], (PATCH_TEXT + "\n", None)),
        (
            ["/usr/bin/zsh", "-lc", f"cd src && apply_patch <<'E'\n{PATCH_TEXT}\nE"],
            (PATCH_TEXT + "\n", "src"),
        ),
        (
            ["bash", "-lc", f"cd 'my dir' && apply_patch <<'EOF'\n{PATCH_TEXT}\nEOF"],
            (PATCH_TEXT + "\n", "my dir"),
        ),
        (
            ["bash", "-lc", f'cd "a/b" &&apply_patch <<EOF\n{PATCH_TEXT}\nEOF'],
            (PATCH_TEXT + "\n", "a/b"),
        ),
    ],
)
def test_extract_shell_patch_forms(argv: list[str], expected: tuple[str, str | None]) -> None:
    assert extract_shell_patch(argv) == expected


@pytest.mark.parametrize(
    "argv",
    [
        ["apply_patch"],
        ["apply_patch", PATCH_TEXT, "extra"],
        ["python", "-c", "print(1)"],
        ["bash", "-lc", "ls -la"],
        ["bash", "-x", f"apply_patch <<'EOF'\n{PATCH_TEXT}\nEOF"],
        ["fish", "-c", f"apply_patch <<'EOF'\n{PATCH_TEXT}\nEOF"],
        ["bash", "-lc", f"echo hi; apply_patch <<'EOF'\n{PATCH_TEXT}\nEOF"],
        ["bash", "-lc", f"apply_patch <<'EOF'\n{PATCH_TEXT}\nEOF\necho done"],
        ["bash", "-lc", f"apply_patch <<'EOF'\n{PATCH_TEXT}\nEOF && echo done"],
        ["bash", "-lc", f"cd src || apply_patch <<'EOF'\n{PATCH_TEXT}\nEOF"],
        ["bash", "-lc", f"cd $HOME && apply_patch <<'EOF'\n{PATCH_TEXT}\nEOF"],
        ["bash", "-lc", f"cd a b && apply_patch <<'EOF'\n{PATCH_TEXT}\nEOF"],
        ["bash", "-lc", f"apply_patch <<-'EOF'\n{PATCH_TEXT}\nEOF"],
        ["bash", "-lc", f"apply_patch file.patch <<'EOF'\n{PATCH_TEXT}\nEOF"],
        ["bash", "-lc", f"apply_patch <<'EOF'\n{PATCH_TEXT}"],  # no closing delimiter
        ["bash", "-lc", f"git apply <<'EOF'\n{PATCH_TEXT}\nEOF"],
    ],
)
def test_extract_shell_patch_rejects(argv: list[str]) -> None:
    assert extract_shell_patch(argv) is None


def test_heredoc_ends_at_first_delimiter_line() -> None:
    script = f"apply_patch <<'EOF'\n{PATCH_TEXT}\nEOF\nrm -rf x\nEOF"
    assert extract_shell_patch(["bash", "-lc", script]) is None
