"""The wiring of one run: its model client (one per provider, shared by the batch), its
tools and the thread that drives them, built from a `Run`.

The only module that knows every concrete client, tool and sandbox class; the loop sees
only their protocols."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

from runner import prompt as prompts
from runner.agent import Budget, Sink, Thread, ThreadSpec
from runner.config import ModelOptions, Run
from runner.errors import ModelError
from runner.http import provider_headers
from runner.output_schema import text_format
from runner.providers import ModelClient, ModelResponse, Prompt, find_compactor
from runner.providers.health import MAX_CONNECT_FAILURES, Health, Watched
from runner.redact import Redactor
from runner.sandbox import make_environment, make_policy
from runner.sandbox.env import child_env
from runner.sandbox.environment import Environment
from runner.sandbox.policy import Policy
from runner.sizes import SizeCaps
from runner.skills import Staged
from runner.tools import Tool, ToolCall, ToolContext, ToolResult
from runner.tools.mcp import SANDBOX_NOTE as MCP_NOTE
from runner.tools.offered import offered_tools


def sampling(
    opts: ModelOptions,
) -> tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any] | None]:
    """Split model options into extra body fields, `reasoning` and `text`."""
    extra = {
        k: v
        for k, v in (
            ("temperature", opts.temperature),
            ("top_p", opts.top_p),
            ("seed", opts.seed),
            ("max_output_tokens", opts.max_output_tokens),
        )
        if v is not None
    }
    reasoning: dict[str, Any] | None = None
    if opts.reasoning_effort is not None:
        reasoning = {"effort": opts.reasoning_effort}
        if opts.reasoning_summary not in (None, "none"):
            reasoning["summary"] = opts.reasoning_summary
    text = {"verbosity": opts.verbosity} if opts.verbosity else None
    return extra, reasoning, text


def make_tools(task: Run) -> list[Tool]:
    return offered_tools(
        task.tools,
        apply_patch_tool=task.apply_patch_tool,
        shell_timeout_ms=task.shell_timeout_ms,
        web_search=task.web_search,
    )


class Clients:
    """One client per provider, opened on first use and closed with the batch."""

    def __init__(
        self,
        stack: AsyncExitStack,
        env: dict[str, str],
        max_connect_failures: int = MAX_CONNECT_FAILURES,
    ) -> None:
        self._stack = stack
        self._env = env
        self._clients: dict[str, ModelClient] = {}
        self._health: dict[str, Health] = {}
        self._max_connect_failures = max_connect_failures
        self._lock = anyio.Lock()

    def down(self, task: Run) -> str | None:
        """Why the task's provider gets nothing more (it stopped answering), if it does."""
        health = self._health.get(task.provider_name)
        return None if health is None else health.down

    async def get(self, task: Run) -> ModelClient:
        async with self._lock:
            if task.provider_name not in self._clients:
                client = await self._open(task)
                if task.provider.max_connections is not None:
                    client = _Capped(client, task.provider.max_connections)
                self._clients[task.provider_name] = client
            return self._clients[task.provider_name]

    async def _open(self, task: Run) -> ModelClient:
        p = task.provider
        base_url = p.base_url
        if task.provider_name == "local":
            from runner.providers.local import LocalEngine

            engine = await self._stack.enter_async_context(LocalEngine())
            base_url = engine.base_url
        headers, api_key = provider_headers(
            http_headers=p.http_headers,
            env_http_headers=p.env_http_headers,
            env_key=p.env_key,
            auth=p.auth,
            env=self._env,
        )
        client: ModelClient
        if p.wire_api == "chat":
            from runner.providers.chat import ChatClient
            from runner.providers.constrained import Constrained

            client = ChatClient(
                base_url,
                api_key=api_key,
                headers=headers,
                query_params=p.query_params,
                constrained_tools=p.constrained_tools,
                constrained=Constrained(grammar=p.constrained_grammar),
                stream_idle_timeout_s=p.stream_idle_timeout_s,
                request_timeout_s=p.request_timeout_s,
            )
        else:
            from runner.providers.responses import ResponsesClient

            client = ResponsesClient(
                base_url,
                api_key=api_key,
                headers=headers,
                query_params=p.query_params,
                store=p.store,
                stream_idle_timeout_s=p.stream_idle_timeout_s,
                request_timeout_s=p.request_timeout_s,
            )
        from runner.providers.retry import RetryingClient

        health = Health(task.provider_name, base_url, self._max_connect_failures)
        self._health[task.provider_name] = health
        client = RetryingClient(
            Watched(client, health),
            request_max_retries=p.request_max_retries,
            stream_max_retries=p.stream_max_retries,
            max_wait_s=p.max_retry_wait_s,
            key_env=p.env_key,
        )
        self._stack.push_async_callback(client.aclose)
        return client


class _Capped:
    """At most `n` requests in flight to one provider, whatever `--concurrency` is."""

    def __init__(self, inner: ModelClient, n: int) -> None:
        self.inner = inner
        self.slots = anyio.CapacityLimiter(n)

    async def generate(self, prompt: Prompt) -> ModelResponse:
        async with self.slots:
            return await self.inner.generate(prompt)

    async def compact(self, prompt: Prompt) -> ModelResponse:
        """Compaction requests count against the same connection cap."""
        inner = find_compactor(self.inner)
        if inner is None:
            raise ModelError("this provider has no compaction endpoint")
        async with self.slots:
            return await inner.compact(prompt)

    async def aclose(self) -> None:
        await self.inner.aclose()


def make_thread(
    t: Run,
    cwd: Path,
    model: ModelClient,
    env: dict[str, str],
    log: Sink,
    *,
    today: str,
    tz: str,
    runner_home: Path | None,
    budget: Budget | None = None,
    extra_tools: Sequence[Tool] = (),
    redact: Redactor | None = None,
    hidden: Sequence[Path] = (),
    skills: Staged | None = None,
    environment: Environment | None = None,
    docs_from: Path | None = None,
) -> tuple[Thread, list[str]]:
    """The run's thread, and a note for each AGENTS.md the prompt left out. `hidden`:
    what the sandbox hides besides the runs' directory (see `sandbox_policy`); `skills`:
    the task's skills as a sandboxed run sees them (`skills.stage`), else where they are.
    `environment`: a container or Pod (runner/envrun.py) instead of the host, `cwd` its
    workdir; its commands get the image's own variables, none of the host's, and the
    AGENTS.md of `docs_from` (the host folder copied in), if any; `skills` there are the
    copies envrun puts in it (none when not given: the host's paths mean nothing there)."""
    from runner import compaction

    staged = skills if skills is not None else Staged(t.skills, ())
    extra, reasoning, text = sampling(t.model_options)
    mcp_notes = [MCP_NOTE] if extra_tools else []
    if environment is None:
        # One policy for what the sandbox enforces and what the model is told.
        policy = sandbox_policy(t, cwd, hidden, staged.mounts)
        child = child_env(env)
        environment = make_environment(policy, workdir=cwd, env=child)  # SandboxError
        context, notes = prompts.initial_context(
            cwd=cwd,
            sandbox=t.sandbox,
            network=policy.network,
            writable_roots=list(policy.prompt_roots()),
            developer_instructions=t.developer_instructions,
            runner_home=runner_home,
            shell="bash",
            current_date=today,
            timezone=tz,
            permission_notes=[*policy.notes(), *mcp_notes],
            skills=prompts.skills_instructions(staged.skills, context_window=t.context_window),
        )
        read_only = policy.mode == "read-only"
    else:
        child = {}
        context, notes = prompts.initial_context(
            cwd=cwd,
            sandbox="danger-full-access",
            network=t.environment.network != "none",
            writable_roots=[],
            developer_instructions=t.developer_instructions,
            runner_home=runner_home,
            shell="bash",
            current_date=today,
            timezone=tz,
            permission_notes=[container_note(t), *mcp_notes],
            docs_from=docs_from or False,
            skills=prompts.skills_instructions(
                skills.skills if skills is not None else (), context_window=t.context_window
            ),
        )
        read_only = False
    if t.output_schema is not None:
        text = {**(text or {}), "format": text_format(t.output_schema)}
    spec = ThreadSpec(
        thread_id=str(uuid.uuid4()),
        model=t.api_model or t.model,
        instructions=t.instructions or prompts.base_instructions(),
        context=context,
        prompts=(t.prompt, *t.turns),
        max_requests=t.limits.max_requests,
        timeout_s=t.limits.timeout_s,
        max_tool_calls=t.limits.max_tool_calls,
        budget=budget,
        parallel_tool_calls=bool(t.model_options.parallel_tool_calls),
        reasoning=reasoning,
        text=text,
        extra=extra,
        compaction=compaction.CompactionSettings(
            limit=t.auto_compact_limit, prompt=t.compact_prompt or compaction.default_prompt()
        ),
        compactor=find_compactor(model) if t.provider.remote_compaction else None,
        caps=SizeCaps(
            response_bytes=t.limits.max_response_bytes,
            item_bytes=t.limits.max_item_bytes,
            history_bytes=t.limits.max_history_bytes,
            request_bytes=t.limits.max_request_bytes,
        ),
    )
    ctx = ToolContext(environment=environment, env=child, read_only=read_only)
    tools: list[Tool] = [*make_tools(t), *extra_tools]
    if redact:
        tools = [Redacting(tool, redact) for tool in tools]
    return Thread(spec, model, tools, ctx, log), notes


def container_note(t: Run) -> str:
    """What the model is told of a container run: the whole container is its own."""
    env = t.environment
    where = "a Kubernetes Pod" if env.backend == "kubernetes" else f"a {env.backend} container"
    net = "with no network" if env.network == "none" else "with network access"
    return f"Commands run in {where} {net}: everything in it is yours to change."


def sandbox_policy(
    t: Run,
    cwd: Path,
    hidden: Sequence[Path] = (),
    mounted: Sequence[tuple[Path, Path]] = (),
) -> Policy:
    """The policy of a run's commands and its check. Hidden: the runs' directory (cwd's
    parent: the other runs and the runner's private git dirs) and `hidden` (the batch
    adds the out dir, the user's repository...); `mounted`: the copies of the skills,
    whose `SKILL.md` the model opens itself (the check needs none)."""
    return make_policy(
        t.sandbox,
        workspace=cwd,
        writable_roots=t.writable_roots,
        network=t.network_access,
        hidden=[cwd.parent, *hidden],
        mounted=mounted,
    )


class Redacting:
    """A tool whose output is redacted before the model sees it: without a sandbox a
    command can read the runner's own environment (/proc/$PPID/environ), and what the
    model reads is sent to the provider and may be echoed into any artifact."""

    def __init__(self, inner: Tool, redact: Redactor) -> None:
        self.inner = inner
        self.name = inner.name
        self.redact = redact

    def spec(self) -> dict[str, Any]:
        return self.inner.spec()

    def started(self, call: ToolCall) -> dict[str, Any] | None:
        return self.inner.started(call)

    async def run(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        result = await self.inner.run(call, ctx)
        return dataclasses.replace(result, output=self.redact(result.output))
