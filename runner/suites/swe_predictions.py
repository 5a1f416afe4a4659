"""SWE-bench's `predictions.jsonl`: what the official harness (and sb-cli) evaluates,
unchanged, so a result of runner can be checked by the suite's own tools."""

from __future__ import annotations

import json
from collections.abc import Iterable


def predictions_lines(runs: Iterable[tuple[str, str, str | None]]) -> bytes:
    """One `{instance_id, model_name_or_path, model_patch}` line per (instance id, model
    label, patch) run: the file of one model and variant.

    The harness keys predictions by instance id and keeps the last, so two runs of one
    instance (repeats) would silently grade one of them: that is refused, as is a second
    model label. A patch of None stays null (the harness's "patch_is_None"); an agent that
    changed nothing gives "". Plain ASCII JSON, so any text survives the round trip."""
    out: list[bytes] = []
    seen: set[str] = set()
    label: str | None = None
    for instance_id, model, patch in runs:
        if instance_id in seen:
            raise ValueError(
                f"{instance_id}: twice in one predictions file; write one file per repeat"
            )
        if label is not None and model != label:
            raise ValueError(
                f"{model!r} and {label!r} in one predictions file; write one "
                "file per model and variant"
            )
        seen.add(instance_id)
        label = model
        line = {"instance_id": instance_id, "model_name_or_path": model, "model_patch": patch}
        out.append(json.dumps(line).encode("ascii") + b"\n")
    return b"".join(out)
