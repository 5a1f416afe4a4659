"""Every run's exact input is on record: the rendered prompt, the instructions and the tool
schemas, stored once per distinct value under `inputs/` and named from each run in
report.json, with the runner's version and commit; shards merge with their inputs."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any

from runner import hostfs
from runner.redact import Redactor
from runner.reports.inputs import stored
from tests.support.cli import run_cli, write_tasks
from tests.support.fixtures import ThreadFactory
from tests.support.loopback import per_conversation, reply_message

BODY = "  - {id: a, prompt: fix it, repo: .}\n  - {id: b, prompt: explain it, repo: .}\n"
MATRIX = (
    "matrix:\n"
    "  variant:\n"
    "    - {name: terse, prompt_template: 'Be brief. {prompt}'}\n"
    "    - {name: plain}\n"
    "  repeat: 2\n"
)
ROOT = Path(__file__).resolve().parents[1]


def _report(out: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads((out / "report.json").read_text())
    return report


def _json(out: Path, rel: str) -> Any:
    return json.loads((out / rel).read_text())


def test_inputs_are_stored_once_and_named_from_each_run(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    srv = loopback_thread(per_conversation(lambda req, i: reply_message("done")))
    tasks = write_tasks(tmp_path, srv.base_url, BODY, defaults=MATRIX)
    out = tmp_path / "out"
    res = run_cli("run", tasks, "--out", out)
    assert res.returncode == 0, res.stderr
    report = _report(out)
    assert report["schema_version"] == "runner.report/3.7"
    runs = report["runs"]
    assert len(runs) == 8
    files = sorted(p.name for p in (out / "inputs").iterdir())
    # 2 tasks x 2 variants render 4 prompts; one set of instructions, one of tools, one
    # AGENTS.md (none: `{"agents_md": null}`).
    assert len(files) == 7, files
    for p in (out / "inputs").iterdir():
        assert p.name == hashlib.sha256(p.read_bytes()).hexdigest() + ".json"
        assert stat.S_IMODE(p.stat().st_mode) == 0o600
    by_run = {r["run"]: r for r in runs}
    terse = by_run["a.terse.r1"]["inputs"]
    assert _json(out, terse["prompt"]) == {"prompts": ["Be brief. fix it"]}
    assert _json(out, by_run["a.plain.r2"]["inputs"]["prompt"]) == {"prompts": ["fix it"]}
    assert by_run["a.terse.r2"]["inputs"] == terse  # a repeat shares every file
    # What was recorded is what the server was sent.
    sent = srv.requests[0]
    (same,) = {json.dumps(r["inputs"]["instructions"]) for r in runs}
    assert _json(out, json.loads(same))["instructions"] == sent.instructions
    assert _json(out, terse["tools"]) == {"tools": sent.tools}
    # The runner's identity, never a path of this machine.
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    assert report["runner"]["version"]
    if head.returncode == 0:
        assert report["runner"]["commit"] == head.stdout.strip()
    assert "/" not in json.dumps(report["runner"])


def test_merged_shards_keep_their_inputs(loopback_thread: ThreadFactory, tmp_path: Path) -> None:
    srv = loopback_thread(per_conversation(lambda req, i: reply_message("done")))
    tasks = write_tasks(tmp_path, srv.base_url, BODY, defaults=MATRIX)
    shards = [tmp_path / f"s{k}" for k in (1, 2)]
    for k, shard in enumerate(shards, 1):
        res = run_cli("run", tasks, "--out", shard, "--shard", f"{k}/2")
        assert res.returncode == 0, res.stderr
    merged = tmp_path / "merged"
    res = run_cli("report", "merge", *shards, "--out", merged)
    assert res.returncode == 0, res.stderr
    report = _report(merged)
    assert len(report["runs"]) == 8
    for r in report["runs"]:
        for kind in ("prompt", "instructions", "tools"):
            assert (merged / r["inputs"][kind]).is_file(), (r["run"], kind)
    assert report["runner"] == _report(shards[0])["runner"]


def test_an_input_path_is_data_and_checked(loopback_thread: ThreadFactory, tmp_path: Path) -> None:
    srv = loopback_thread(per_conversation(lambda req, i: reply_message("done")))
    tasks = write_tasks(tmp_path, srv.base_url, "  - {id: a, prompt: fix it, repo: .}\n")
    out = tmp_path / "out"
    assert run_cli("run", tasks, "--out", out).returncode == 0
    report = _report(out)
    report["runs"][0]["inputs"]["prompt"] = "inputs/../../etc/passwd"
    (out / "report.json").write_text(json.dumps(report))
    res = run_cli("report", "merge", out, "--out", tmp_path / "m")
    assert res.returncode == 2
    # Named as the report names the field (`runs`; `tasks` is its name before /3).
    assert "runs[0].inputs.prompt" in res.stderr and "tasks[" not in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
    # Two shards naming one input file with different bytes are refused, not mixed.
    both = write_tasks(tmp_path / "two", srv.base_url, BODY)
    shards = [tmp_path / f"s{k}" for k in (1, 2)]
    for k, shard in enumerate(shards, 1):
        assert run_cli("run", both, "--out", shard, "--shard", f"{k}/2").returncode == 0
    rel = _report(shards[0])["runs"][0]["inputs"]["tools"]
    assert rel == _report(shards[1])["runs"][0]["inputs"]["tools"]
    (shards[0] / rel).write_text('{"tools": []}\n')
    res = run_cli("report", "merge", *shards, "--out", tmp_path / "m2")
    assert res.returncode == 2
    assert rel in res.stderr and "two shards wrote the same file" in res.stderr, res.stderr


def test_the_agents_md_and_the_wire_model_are_on_record(
    loopback_thread: ThreadFactory, tmp_path: Path
) -> None:
    """The AGENTS.md text that reached the model is an input like the others, and a
    `models:` alias records the name the provider was sent."""
    srv = loopback_thread(per_conversation(lambda req, i: reply_message("done")))
    guide = "Always run pytest before you stop. Never touch vendor/."
    (tmp_path / "AGENTS.md").write_text(guide + "\n")
    tasks = write_tasks(
        tmp_path,
        srv.base_url,
        "  - {id: a, prompt: fix it, repo: ., model: fake/warm}\n"
        "  - {id: b, prompt: fix it too, repo: ., model: fake/warm}\n",
        defaults="models:\n  fake/warm: {model: mA}\n",
    )
    out = tmp_path / "out"
    res = run_cli("run", tasks, "--out", out)
    assert res.returncode == 0, res.stderr
    runs = _report(out)["runs"]
    sent = json.dumps(srv.requests[0].input)
    assert guide in sent  # what is recorded below is what the model was given
    for r in runs:
        assert r["model"] == "fake/warm" and r["api_model"] == "mA"
        assert _json(out, r["inputs"]["agents_md"]) == {"agents_md": guide + "\n"}
        assert str(tmp_path) not in (out / r["inputs"]["agents_md"]).read_text()
    assert runs[0]["inputs"]["agents_md"] == runs[1]["inputs"]["agents_md"]  # stored once
    assert {req.json["model"] for req in srv.requests} == {"mA"}
    page = (out / "report.html").read_text()
    assert "Never touch vendor/." in page and "AGENTS.md" in page


def test_a_stored_input_a_crash_cut_or_a_link_took_is_written_again(tmp_path: Path) -> None:
    """Inputs are not synced before a run's first request (8 syncs for 4 files): a file a
    crash left empty or cut is told by its bytes and written anew; one that holds its
    bytes is kept as it is (same inode); a link at the name is replaced, not followed."""
    rel = stored(tmp_path, {"prompts": ["hi"]}, Redactor([]))
    path = tmp_path / rel
    good = path.read_bytes()
    assert hashlib.sha256(good).hexdigest() == path.stem
    inode = path.stat().st_ino
    assert stored(tmp_path, {"prompts": ["hi"]}, Redactor([])) == rel
    assert path.stat().st_ino == inode
    for broken in (b"", good[:-3], good[:-1] + b"!"):
        path.write_bytes(broken)
        stored(tmp_path, {"prompts": ["hi"]}, Redactor([]))
        assert path.read_bytes() == good and stat.S_IMODE(path.stat().st_mode) == 0o600
    outside = tmp_path / "outside.json"
    outside.write_bytes(good)
    path.unlink()
    path.symlink_to(outside)
    stored(tmp_path, {"prompts": ["hi"]}, Redactor([]))
    assert not path.is_symlink() and path.read_bytes() == good
    assert outside.read_bytes() == good


def test_what_stands_in_the_inputs_folder_is_replaced_never_followed(tmp_path: Path) -> None:
    """An out dir reused with --force may hold anything: a folder at a file's name, a
    file or a link at the folder's, a right copy of mode 0644 or with a second name."""
    out = tmp_path / "out"
    rel = stored(out, {"prompts": ["hi"]}, Redactor([]))
    path = out / rel
    good = path.read_bytes()
    path.unlink()
    (path / "deep").mkdir(parents=True)
    stored(out, {"prompts": ["hi"]}, Redactor([]))
    assert path.is_file() and path.read_bytes() == good
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    hostfs.remove_tree(path.parent)
    path.parent.symlink_to(elsewhere)
    stored(out, {"prompts": ["hi"]}, Redactor([]))
    assert not path.parent.is_symlink() and path.read_bytes() == good
    assert list(elsewhere.iterdir()) == []
    path.chmod(0o644)
    os.link(path, tmp_path / "second")
    stored(out, {"prompts": ["hi"]}, Redactor([]))
    st = path.stat()
    assert (stat.S_IMODE(st.st_mode), st.st_nlink) == (0o600, 1)
    hostfs.remove_tree(path.parent)
    path.parent.write_text("a file")
    stored(out, {"prompts": ["hi"]}, Redactor([]))
    assert path.read_bytes() == good
