"""What a person watching a batch sees on stderr while it runs.

The batch calls one `EventSink`; for `runner run` that is `CommandLineEvents`, which shows
progress through a `Progress`: `make_progress` picks how it looks from where the output goes:
a live display in a terminal, plain lines in a CI log (no escape codes to garble it), and
under GitHub Actions plain lines with each finished run folded into a `::group::`.

Everything here reads what the batch already knows (its events and the finished runs'
`RunReport`s) and never changes a run. Text from a run (final messages, errors, check
output) is untrusted: control characters are shown escaped, rich markup is never parsed, and
every line goes through `safe_text`, the one rule for what the runner prints, so an agent
cannot print `::add-mask::`, `::endgroup::` or a terminal escape into the log.

Why one module: three renderings (live, plain lines, GitHub groups) of the same events,
kept side by side so they say the same things.
"""

from __future__ import annotations

import errno
import io
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Protocol, cast

from runner.items import as_int
from runner.reports.fmt import duration, printable, safe_text
from runner.vocabulary import RunStatus, Verdict

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.live import Live

    from runner.reports.events import JsonStream
    from runner.reports.model import RunReport

REFRESH_INTERVAL_S = 0.25
"""The live display redraws at most 4 times a second, however many events arrive."""

MESSAGE_HEAD_LINES = 12
CHECK_TAIL_LINES = 20
RUNNING_SHOWN = 4


class Progress(Protocol):
    """What the batch tells whoever watches. Calls come from the batch's event loop."""

    def start(self, total_runs: int) -> None: ...

    def run_started(self, run: str, model: str) -> None: ...

    def event(self, run: str, event: Mapping[str, Any]) -> None:
        """Every event of the run's thread (the same dicts that go to its JSONL log)."""

    def run_finished(self, task: RunReport) -> None: ...

    def close(self) -> None: ...


class EventSink(Progress, Protocol):
    """The one thing a batch reports to while it runs: the progress calls, every event of
    every run (`event`: redacted, tagged with `task` and `ts`, the dicts of the JSONL
    logs) and `note`, a line for the person watching (resuming, a warning)."""

    def note(self, text: str) -> None: ...


class CommandLineEvents:
    """`runner run`'s sink: the progress display and notes on stderr and, under `--json`,
    the event stream on stdout (`JsonStream`)."""

    def __init__(self, show: Progress, notes: IO[str], stream: JsonStream | None) -> None:
        self._show = show
        self._notes = notes
        self._stream = stream

    def start(self, total_runs: int) -> None:
        self._show.start(total_runs)

    def note(self, text: str) -> None:
        self._notes.write(safe_text(text, one_line=True) + "\n")

    def run_started(self, run: str, model: str) -> None:
        self._show.run_started(run, model)

    def event(self, run: str, event: Mapping[str, Any]) -> None:
        if self._stream is not None:
            self._stream.event(run, event)
        self._show.event(run, event)

    def run_finished(self, task: RunReport) -> None:
        if self._stream is not None:
            self._stream.finish(task.run)
        self._show.run_finished(task)

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
        self._show.close()


class SafeStream(io.TextIOBase):
    """A stream for progress and notes (stderr) whose reader may go away: `runner run ...
    2>&1 1>out | head -1` closes the pipe after one line. Progress must never stop a
    batch, so a write or flush that finds the pipe closed is dropped, and the descriptor is
    pointed at /dev/null so that nothing else (rich, a warning, Python's flush at exit)
    trips over it either; the runs, the reports and the exit code are unaffected."""

    def __init__(self, stream: IO[str]) -> None:
        super().__init__()
        self.stream = stream
        self.broken = False

    def _closed_pipe(self, exc: OSError) -> None:
        if not isinstance(exc, BrokenPipeError) and exc.errno != errno.EPIPE:
            raise exc
        self.broken = True
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self.stream.fileno())
            os.close(null)
        except (OSError, ValueError, io.UnsupportedOperation):
            pass  # not a real descriptor (a test's capture): dropping writes is enough

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                self.stream.write(text)
            except OSError as exc:
                self._closed_pipe(exc)
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self.stream.flush()
            except OSError as exc:
                self._closed_pipe(exc)

    def isatty(self) -> bool:
        return not self.broken and _isatty(self.stream)

    def fileno(self) -> int:
        return self.stream.fileno()

    def as_io(self) -> IO[str]:
        """Typed as the stream it stands in for."""
        return cast("IO[str]", self)


def make_progress(stream: IO[str], *, env: Mapping[str, str] | None = None) -> Progress:
    """GitHub Actions groups when `GITHUB_ACTIONS=true`; a live display when `stream` is a
    terminal (and TERM is not `dumb`); plain lines otherwise."""
    env = os.environ if env is None else env
    if env.get("GITHUB_ACTIONS") == "true":
        return GitHubProgress(stream)
    if _isatty(stream) and env.get("TERM") != "dumb":
        return LiveProgress(stream)
    return PlainProgress(stream)


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


# C0 and C1 controls but tab and newline, DEL, lone surrogates: a terminal escape in an
# agent's output must not reach the watcher's terminal. Bidirectional overrides and isolates
# too: they make text (in a terminal or report.html) read other than it is.
def compact(n: float) -> str:
    """Token counts at a glance: 950, 12.3k, 4.56M."""
    if n < 1000:
        return f"{n:.0f}"
    if n < 1_000_000:
        return f"{n / 1000:.1f}k"
    return f"{n / 1_000_000:.2f}M"


@dataclass
class _RunCount:
    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    cost_unknown: bool = False
    requests: int = 0


class Tally:
    """Running totals of the batch: from request events while a run goes, replaced by the
    run's own report (the authoritative numbers) when it finishes."""

    def __init__(self) -> None:
        self.total = 0
        self.finished = 0
        self.failed = 0
        """Runs that ran and did not pass (errored runs are not in it)."""
        self.errored = 0
        """Runs the infrastructure broke or a signal stopped: no verdict on the agent."""
        self.running: dict[str, str] = {}
        self.runs: dict[str, _RunCount] = {}

    def started(self, run: str, model: str) -> None:
        self.running[run] = model
        self.runs.setdefault(run, _RunCount())

    def event(self, run: str, event: Mapping[str, Any]) -> None:
        if event.get("type") != "request.completed":
            return
        c = self.runs.setdefault(run, _RunCount())
        c.requests += 1
        usage = event.get("usage")
        if isinstance(usage, Mapping):
            c.input_tokens += as_int(usage.get("input_tokens"))
            c.cached_tokens += as_int(usage.get("cached_tokens"))
            c.output_tokens += as_int(usage.get("output_tokens"))
        cost = event.get("cost_usd")
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            c.cost_usd += float(cost)
        else:
            c.cost_unknown = True

    def done(self, task: RunReport) -> None:
        name = task.run or task.id
        self.running.pop(name, None)
        self.finished += 1
        if task.status.verdict is Verdict.ERRORED:
            self.errored += 1
        elif task.status.verdict is Verdict.FAILED:
            self.failed += 1
        u = task.usage
        self.runs[name] = _RunCount(
            u.input_tokens,
            u.cached_tokens,
            u.output_tokens,
            task.cost_usd or 0.0,
            task.cost_usd is None,
            len(task.requests),
        )

    def tokens(self) -> tuple[int, int, int]:
        return (
            sum(c.input_tokens for c in self.runs.values()),
            sum(c.cached_tokens for c in self.runs.values()),
            sum(c.output_tokens for c in self.runs.values()),
        )

    def cost(self) -> str:
        """`$0.41` when every run's price is known, `>= $0.41` when some are not, empty
        when none is (a local model): never a partial sum that reads as the whole."""
        counted = [c for c in self.runs.values() if c.requests]
        known = [c for c in counted if not c.cost_unknown]
        total = sum(c.cost_usd for c in counted)
        if not known and not total:
            return ""
        return (">= " if len(known) < len(counted) else "") + f"${total:.4f}"

    def summary(self, *, final: bool = False) -> str:
        """`final`: the batch is over, so runs neither finished nor running never started
        (batch budget, Ctrl-C) and are counted as such, never as failures."""
        sent, cached, out = self.tokens()
        hit = f" ({cached / sent:.0%} cached)" if sent else ""
        cost = self.cost()
        skipped = self.total - self.finished - len(self.running)
        started = f", {skipped} not started" if final and skipped > 0 else ""
        return (
            f"{self.finished}/{self.total} runs done, {len(self.running)} running, "
            f"{self.failed} failed, {self.errored} errored{started}, "
            f"{compact(sent)} tokens in{hit}, {compact(out)} out" + (f", {cost}" if cost else "")
        )


def finished_line(task: RunReport, tally: Tally) -> str:
    """One line a finished run is known by in a log (no escape codes)."""
    u = task.usage
    hit = f"{u.cached_tokens / u.input_tokens:.0%}" if u.input_tokens else "-"
    cost = "" if task.cost_usd is None else f", ${task.cost_usd:.4f}"
    return printable(
        f"[{tally.finished}/{tally.total}] {task.run or task.id}: {task.status}: "
        f"{len(task.requests)} requests, {task.tool_calls} tool calls, {u.input_tokens} input "
        f"tokens ({hit} cached){cost}, {duration(task.duration_s)}"
    ).replace("\n", "\\x0a")


def details(task: RunReport) -> list[str]:
    """What a reader of the log wants next: why it failed, where the change went, the
    check's last lines and the head of the final message."""
    lines = []
    if task.error:
        lines += [f"error: {line}" for line in task.error.splitlines()[:MESSAGE_HEAD_LINES]]
    res = task.result
    if res is not None:
        if res.branch:
            lines.append(
                f"branch {res.branch} ({res.files_changed} files, +{res.insertions} "
                f"-{res.deletions})"
            )
        elif res.violations:
            lines.append(f"no branch: {'; '.join(res.violations)}")
        else:
            lines.append(
                f"patch {res.patch} ({res.files_changed} files, +{res.insertions} -{res.deletions})"
            )
    if task.check is not None:
        verdict = "passed" if task.check.passed else f"failed (exit {task.check.exit_code})"
        lines.append(f"check `{task.check.command}` {verdict}")
        if not task.check.passed:
            tail = task.check.output_tail.splitlines()[-CHECK_TAIL_LINES:]
            lines += [f"  | {line}" for line in tail]
    if task.final_message:
        head = task.final_message.splitlines()
        lines.append("final message:")
        lines += [f"  {line}" for line in head[:MESSAGE_HEAD_LINES]]
        if len(head) > MESSAGE_HEAD_LINES:
            lines.append(f"  ... ({len(head) - MESSAGE_HEAD_LINES} more lines in report.json)")
    return [printable(line) for line in lines]


class PlainProgress:
    """A start line, then one line (plus indented details) per finished run, then totals."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.tally = Tally()

    def _write(self, text: str, *, commands: tuple[str, str] | None = None) -> None:
        """`text` through `safe_text`; `commands`: our own workflow commands to put before
        and after it (a group), the only ones ever written unescaped."""
        lines = [safe_text(text)]
        if commands is not None:
            lines = [commands[0], *lines, commands[1]]
        self.stream.write("\n".join(lines) + "\n")
        self.stream.flush()

    def start(self, total_runs: int) -> None:
        self.tally.total = total_runs
        self._write(f"runner: {total_runs} run{'s' if total_runs != 1 else ''}")

    def run_started(self, run: str, model: str) -> None:
        self.tally.started(run, model)

    def event(self, run: str, event: Mapping[str, Any]) -> None:
        self.tally.event(run, event)

    def run_finished(self, task: RunReport) -> None:
        self.tally.done(task)
        brief = [
            line
            for line in details(task)
            if line.startswith(("error:", "branch ", "no branch:", "patch "))
        ]
        self._write("\n".join([finished_line(task, self.tally), *(f"  {b}" for b in brief)]))

    def close(self) -> None:
        self._write(f"runner: {self.tally.summary(final=True)}")


def workflow_escape(text: str) -> str:
    """A workflow command's message: `%`, CR and LF escaped as the runner expects."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


class GitHubProgress(PlainProgress):
    """Plain lines; each finished run is a collapsed `::group::` holding its details, which
    are written through `safe_text` like every other line, so nothing a run printed is
    taken as a command."""

    def run_finished(self, task: RunReport) -> None:
        self.tally.done(task)
        title = workflow_escape(safe_text(f"{task.run or task.id} \u2014 {task.status}"))
        body = [finished_line(task, self.tally), *details(task)]
        self._write("\n".join(body), commands=(f"::group::{title}", "::endgroup::"))


class LiveProgress:
    """A live display (rich) redrawn in place: a bar of finished runs, counts of running and
    failed ones, tokens, cache hit and cost, and the runs in flight; every finished run's line
    is printed above it, so the scrollback keeps the history.

    Redraws happen on the caller's calls, at most every `REFRESH_INTERVAL_S`, rather than on
    rich's refresh thread: the tallies are only ever touched from the batch's event loop.
    """

    def __init__(
        self,
        stream: IO[str],
        *,
        force_terminal: bool | None = None,
        width: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from rich.console import Console
        from rich.live import Live

        self.tally = Tally()
        self._clock = clock
        self._started = clock()
        self._last = -math.inf
        self.console: Console = Console(
            file=stream,
            force_terminal=force_terminal,
            width=width,
            highlight=False,
            markup=False,
            emoji=False,
        )
        self._live: Live = Live(
            console=self.console,
            auto_refresh=False,
            redirect_stdout=False,
            redirect_stderr=False,
            get_renderable=self._render,
        )

    def _render(self) -> RenderableType:
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        t = self.tally
        bar = Table.grid(padding=(0, 1))
        bar.add_row(
            ProgressBar(total=max(t.total, 1), completed=t.finished, width=30),
            Text(f"{t.finished}/{t.total} runs done"),
            Text(duration(self._clock() - self._started), style="dim"),
        )
        sent, cached, out = t.tokens()
        parts = [
            f"running {len(t.running)}",
            f"failed {t.failed}",
            f"errored {t.errored}",
            f"tokens {compact(sent)} in, {compact(out)} out",
            f"cache hit {cached / sent:.0%}" if sent else "cache hit -",
        ]
        cost = t.cost()
        if cost:
            parts.append(f"cost {cost}")
        rows: list[RenderableType] = [bar, Text(" \u00b7 ".join(parts))]
        if t.running:
            names = list(t.running)
            shown = ", ".join(printable(n) for n in names[:RUNNING_SHOWN])
            more = f" (+{len(names) - RUNNING_SHOWN})" if len(names) > RUNNING_SHOWN else ""
            rows.append(Text(f"now: {shown}{more}", style="dim", overflow="ellipsis", no_wrap=True))
        return Group(*rows)

    def _refresh(self, *, force: bool = False) -> None:
        now = self._clock()
        if force or now - self._last >= REFRESH_INTERVAL_S:
            self._last = now
            self._live.refresh()

    def start(self, total_runs: int) -> None:
        self.tally.total = total_runs
        self._live.start()
        self._refresh(force=True)

    def run_started(self, run: str, model: str) -> None:
        self.tally.started(run, model)
        self._refresh()

    def event(self, run: str, event: Mapping[str, Any]) -> None:
        self.tally.event(run, event)
        self._refresh()

    def run_finished(self, task: RunReport) -> None:
        from rich.text import Text

        self.tally.done(task)
        style = "green" if task.status is RunStatus.COMPLETED else "red"
        text = Text(safe_text(finished_line(task, self.tally)), style=style)
        for extra in details(task):
            if extra.startswith(("error:", "branch ", "no branch:", "patch ")):
                text.append(f"\n  {safe_text(extra, one_line=True)}", style="dim")
        # One print: rich redraws the display under every printed renderable.
        self.console.print(text)
        self._refresh(force=True)

    def close(self) -> None:
        self._refresh(force=True)
        self._live.stop()
        self.console.print(safe_text(f"runner: {self.tally.summary(final=True)}"), markup=False)


class QuietProgress:
    """For callers that show nothing (library use, benchmarks)."""

    def start(self, total_runs: int) -> None:
        pass

    def note(self, text: str) -> None:
        pass

    def run_started(self, run: str, model: str) -> None:
        pass

    def event(self, run: str, event: Mapping[str, Any]) -> None:
        pass

    def run_finished(self, task: RunReport) -> None:
        pass

    def close(self) -> None:
        pass
