"""`runner report merge|compare|branches`: each reads finished out dirs and prints what it
found; the work is in `runner.reports` and `runner.branches`."""

from __future__ import annotations

import argparse
from pathlib import Path

from runner.cli_common import flag_problem, say, warn
from runner.vocabulary import EXIT_OK, EXIT_RUNNER, EXIT_TASK_FAILED


def report_merge(args: argparse.Namespace) -> int:
    """Exits as `runner run` would have for the same runs (0, 1 or 3)."""
    from runner.batch import exit_code
    from runner.reports.merge import merge_command
    from runner.reports.summary import partial_text

    report = merge_command(args.dirs, args.out, partial=args.partial, force=args.force)
    t = report.totals
    if report.partial:
        warn(f"PARTIAL merge: {partial_text(report)}; every output is marked partial")
    warn(
        f"merged {len(report.shards)} shard(s): {t.runs} run(s): {t.finished} "
        f"finished ({t.completed} passed), {t.skipped} skipped, {t.errored} errored"
    )
    warn(f"report: {args.out / 'report.json'}", one_line=True)
    return exit_code(r.status for r in report.runs)


def report_compare(args: argparse.Namespace) -> int:
    """0; with --fail-on-regression 1 when a pass rate or the mean reward dropped
    significantly, 3 when the inputs cannot tell (partial, nothing finished on one side,
    too few tasks graded on both)."""
    from runner.reports.compare import check_selection, compare, render_compare
    from runner.reports.merge import load_shard

    if not 0 < args.alpha < 1:
        raise flag_problem("--alpha", "must be between 0 and 1, e.g. 0.05")
    base, new = load_shard(args.base).report, load_shard(args.new).report
    check_selection(base, new, args.base_variant, args.new_variant, args.base_model, args.new_model)
    result = compare(
        base,
        new,
        base_name=_label(args.base, args.base_variant, args.base_model),
        new_name=_label(args.new, args.new_variant, args.new_model),
        base_variant=args.base_variant,
        new_variant=args.new_variant,
        base_model=args.base_model,
        new_model=args.new_model,
        allow_different_tasks=args.allow_different_tasks,
        alpha=args.alpha,
    )
    if args.format == "json":
        say(result.to_json())
    else:
        say(render_compare(result).removesuffix("\n"))
    if not args.fail_on_regression:
        return EXIT_OK
    for why in result.inconclusive:
        warn(f"compare: inconclusive: {why}", one_line=True)
    failed = result.regressions or result.reward_regressions
    return EXIT_TASK_FAILED if failed else EXIT_RUNNER if result.inconclusive else EXIT_OK


def _label(directory: Path, variant: str | None, model: str | None) -> str:
    return directory.name + (f" {model}" if model else "") + (f" [{variant}]" if variant else "")


def report_branches(args: argparse.Namespace) -> int:
    """One line per branch the batch recorded; only branches still at the run's commit are
    deleted, so work someone added on top is never lost."""
    from runner import workspace
    from runner.reports.merge import load_shard

    report = load_shard(args.dir).report
    repo: Path = args.repo
    if not repo.is_dir():
        raise flag_problem(
            "--repo", f"{repo} is not a directory; give the repository the runs used"
        )
    try:
        workspace.check_base(repo, "HEAD")
    except workspace.WorkspaceError as exc:
        raise flag_problem("--repo", str(exc)) from None
    from runner.branches import chosen_ids, review
    from runner.journal import Journal

    chosen = chosen_ids(report, args.batch_id, delete=args.delete)
    first = Journal(args.dir).first_start(report.batch_id)
    counts: dict[str, int] = {}
    for v in review(repo, report, delete=args.delete, first_start=first, chosen=chosen):
        counts[v.state] = counts.get(v.state, 0) + 1
        say(v.line(args.delete), one_line=True)
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no branches"
    warn(f"{args.dir}: {summary} (batch {', '.join(sorted(chosen)) or 'ids: none'})", one_line=True)
    return EXIT_OK
