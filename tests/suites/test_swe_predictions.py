"""SWE-bench's predictions.jsonl lines, as the official harness and sb-cli read them."""

from __future__ import annotations

import json

import pytest

from runner.suites.swe_predictions import predictions_lines


def test_predictions_lines_are_what_the_harness_reads() -> None:
    data = predictions_lines(
        [("a__b-1", "gpt-x/prompt-b", "diff --git a/x b/x\n+é\n"), ("a__b-2", "gpt-x/prompt-b", "")]
    )
    lines = data.decode("ascii").splitlines()
    assert [json.loads(line) for line in lines] == [
        {"instance_id": "a__b-1", "model_name_or_path": "gpt-x/prompt-b",
         "model_patch": "diff --git a/x b/x\n+é\n"},
        {"instance_id": "a__b-2", "model_name_or_path": "gpt-x/prompt-b", "model_patch": ""},
    ]  # fmt: skip
    assert list(json.loads(lines[0])) == ["instance_id", "model_name_or_path", "model_patch"]
    assert data.endswith(b"\n") and predictions_lines([]) == b""
    assert json.loads(predictions_lines([("i", "m", None)]))["model_patch"] is None


def test_predictions_refuse_a_second_run_or_model() -> None:
    with pytest.raises(ValueError, match="twice in one predictions file"):
        predictions_lines([("i", "m", "p"), ("i", "m", "q")])
    with pytest.raises(ValueError, match="one file per model and variant"):
        predictions_lines([("i", "m", "p"), ("j", "n", "q")])
