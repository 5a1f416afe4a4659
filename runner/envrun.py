"""A run's container or Pod, from its image to its removal (issue 26).

The batch shares one `Environments`: an engine per executable, one `Builder` per engine
(each build folder built once, a few at a time), and the cap on live environments
(`max_environments`), apart from `--concurrency` since containers, not threads, are what
make an engine flaky past a few dozen. Each run gets a `RunEnvironment`:

- `prepare` (before the thread): the image built if the task says `build:`, a free slot;
- `start` (beside the first model request, so its cost is not the run's start-up): the
  container made, the host workspace copied in when the task names a `repo:`, the start
  state of workdir recorded (`changes.snapshot`); the first tool call waits for it;
- `finish` (in the shielded wind-up): the diff of workdir, its patch, applied to the host
  workspace when there is one (whose commit and branch are then made as for a host run),
  and the artifacts copied out;
- `stop` on every exit path, shielded, and safe to call twice.

A fault at any step (`EnvironmentFault`; `EnvironmentLost` mid-run) is recorded in the
run's `EnvironmentInfo`, which makes the run an `error` naming the backend, and ends the
thread: whatever it did next would be judged against nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import json
import os
import shutil
import tarfile
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio

from runner.artifacts import copy_artifacts
from runner.config import Run, uses_environment
from runner.config.environment import CONTAINER_BACKENDS
from runner.errors import EnvironmentFault, EnvironmentLost, UnsafeFileError, WorkspaceError
from runner.fsutil import atomic_write_bytes
from runner.record import EnvironmentInfo, left_out_note
from runner.redact import Redactor
from runner.sandbox import changes
from runner.sandbox.container import ContainerEnvironment
from runner.sandbox.engine import Engine
from runner.sandbox.environment import DEFAULT_OUTPUT_CAP, Environment, ExecResult
from runner.sandbox.images import MAX_PARALLEL_BUILDS, Builder, reap_builds
from runner.sandbox.kubectl import Kubectl
from runner.sandbox.orphans import LiveBatch, batch_alive, reap_orphans
from runner.skills import Staged, stage
from runner.swe_fresh import gold_patch
from runner.workspace.git import run_git

COPY_IN_MAX_BYTES = 1 << 30
"""The host workspace copied into a container (a tar held in memory once)."""
DEFAULT_WORKDIR = "/work"
"""Where a host repository goes in an image that names no WORKDIR."""


class Environments:
    """What the runs of one batch share (made by `run_batch`)."""

    def __init__(
        self, batch_id: str, max_environments: int, env: Mapping[str, str] | None = None
    ) -> None:
        self.batch_id = batch_id
        self.slots = anyio.Semaphore(max(1, max_environments))
        self.live = 0
        """Environments holding a slot now (read by tests and the progress line)."""
        self._base_env = dict(os.environ if env is None else env)
        self._engines: dict[str, Engine] = {}
        self._builders: dict[str, Builder] = {}
        self._reaped: set[str] = set()
        self._folder_locks: dict[Path, anyio.Lock] = {}
        self._images: dict[tuple[str, Path], str] = {}
        """The image each build folder has for the whole batch: its tag when the batch
        started (`reserve`), or when its first run built it. Files written into the folder
        later change no run's image: one batch, one image per folder."""
        self.mark: LiveBatch | None = None
        """The batch's live mark (set once the batch holds it), where its images are listed."""

    def engine(self, t: Run) -> Engine:
        exe = t.environment.executable or t.environment.backend
        if exe not in self._engines:
            self._engines[exe] = Engine(exe, base_env=self._base_env)
        return self._engines[exe]

    def builder(self, t: Run) -> Builder:
        engine = self.engine(t)
        if engine.executable not in self._builders:
            self._builders[engine.executable] = Builder(
                engine,
                max_parallel=MAX_PARALLEL_BUILDS,
                timeout_s=t.environment.timeout_s,
                batch_id=self.batch_id,
                mark=self.mark,
            )
        return self._builders[engine.executable]

    async def reserve(self, tasks: Sequence[Run]) -> None:
        """List in the batch's mark the image every run will use (the tag of its build
        folder, as it is now), so `runner images prune` keeps them while the batch lives.
        A folder that cannot be read now is left to its run, which says why."""
        assert self.mark is not None
        seen: set[tuple[str, Path]] = set()
        ids: dict[str, dict[str, str | None]] = {}
        for t in tasks:
            if t.environment.backend not in CONTAINER_BACKENDS:
                continue
            if t.environment.image:
                self.mark.uses([t.environment.image])
            exe = self.engine(t).executable
            if t.build_dir is not None and (exe, t.build_dir) not in seen:
                seen.add((exe, t.build_dir))
                with contextlib.suppress(EnvironmentFault, UnsafeFileError, OSError):
                    tag, _ = await self.builder(t).tag(t.build_dir, ids.setdefault(exe, {}))
                    self.mark.uses([tag])
                    self._images[(exe, t.build_dir)] = tag

    async def build(self, t: Run) -> tuple[str, bool]:
        """The tag of the run's `build:` image, and whether this call built it (one run
        of the folder does; the others wait for it and find it). The tag is decided once
        per batch (`_images`): the image of the folder as the batch found it, when that
        is built, else the one its first run builds."""
        assert t.build_dir is not None
        builder = self.builder(t)
        key = (builder.engine.executable, t.build_dir)
        async with self._folder_locks.setdefault(t.build_dir, anyio.Lock()):
            before = len(builder.built)
            image = await builder.image(t.build_dir, self._images.get(key))
            self._images[key] = image
            return image, image in builder.built[before:]

    def kubectl(self) -> Kubectl:
        """kubectl with the batch's environment (its PATH and KUBECONFIG, no secret)."""
        return Kubectl(base_env=self._base_env)

    async def reap(self, tasks: Sequence[Run]) -> list[str]:
        """Remove the containers and untagged build leftovers of this user's dead
        batches, for each engine the batch uses, and the Pods this host's dead batches
        left, in each namespace the batch uses: never another user's or host's, nor a live
        batch's (`live_batch`)."""
        gone: list[str] = []
        for t in tasks:
            if t.environment.backend in CONTAINER_BACKENDS:
                engine = self.engine(t)
                if engine.executable not in self._reaped:
                    self._reaped.add(engine.executable)
                    gone += await reap_orphans(engine)
                    gone += await reap_builds(engine)
            elif t.environment.backend == "kubernetes":
                ns = t.environment.namespace
                if f"kubernetes:{ns}" not in self._reaped:
                    from runner.sandbox.kubernetes import reap_orphans as reap_pods

                    self._reaped.add(f"kubernetes:{ns}")
                    gone += await reap_pods(
                        self.kubectl(), namespace=ns, host=os.uname().nodename, alive=batch_alive
                    )
        return gone


class RunEnvironment:
    """One run's environment and what is known of it (`info`, for the report)."""

    def __init__(self, envs: Environments, t: Run, out_dir: Path) -> None:
        self.envs = envs
        self.run = t
        self.out_dir = out_dir
        self.settings = t.environment
        self.info = EnvironmentInfo(backend=self.settings.backend, image=self.settings.image)
        self.inner: Environment | None = None
        self.ready = anyio.Event()
        self.snapshot: changes.Snapshot | None = None
        self.thread_scope: anyio.CancelScope | None = None
        """Cancelled when the environment is lost, so the thread stops at once."""
        self.skills: Staged | None = None
        """The task's skills as the environment shows them (`SKILLS_AT/<n>`, as in the
        local sandbox), copied in by `start`; None without skills."""
        self._slot = False
        self._retired = False
        self._copy: bytes | None = None
        self._skills_dir: str | None = None
        self._shell: str | None = None

    @property
    def fault(self) -> str | None:
        return self.info.fault

    def failed(self, exc: Exception) -> None:
        """Record the first fault, naming the backend, and end the thread."""
        if self.info.fault is None:
            what = "lost" if isinstance(exc, EnvironmentLost) else "failed"
            self.info = dataclasses.replace(
                self.info, fault=f"{self.settings.backend} environment {what}: {exc}"
            )
        if self.thread_scope is not None:
            self.thread_scope.cancel()

    # -- before the thread ---------------------------------------------------------------

    async def prepare(self, host_work: Path | None) -> None:
        """The image (built if need be) and a slot; EnvironmentFault is recorded, not
        raised. `host_work`: the prepared host workspace to copy in, if the task has one."""
        t, s = self.run, self.settings
        if t.skills:  # SkillError: the run's own error, before it holds anything
            self._skills_dir = tempfile.mkdtemp(prefix="runner-skills-")
            self.skills = await anyio.to_thread.run_sync(
                stage, t.skills, Path(self._skills_dir, "skills")
            )
        try:
            if host_work is not None:
                self._copy = await _tar_of(host_work)
            image = s.image
            if s.backend in CONTAINER_BACKENDS and t.build_dir is not None:
                began = time.monotonic()
                image, built = await self.envs.build(t)
                self.info = dataclasses.replace(
                    self.info,
                    image=image,
                    build_s=round(time.monotonic() - began, 3),
                    built=built,
                )
            assert image is not None  # validate: an image or a build folder
            workdir = s.workdir
            if s.backend in CONTAINER_BACKENDS:
                image_id, image_workdir = await _image_facts(self.envs.engine(t), image)
                self.info = dataclasses.replace(self.info, image_id=image_id)
                workdir = workdir or image_workdir
            if workdir is None:
                if host_work is None:
                    raise EnvironmentFault(
                        f"{image} names no WORKDIR: set environment.workdir to where the work is"
                    )
                workdir = DEFAULT_WORKDIR
            self.info = dataclasses.replace(self.info, image=image, workdir=workdir)
            await self.envs.slots.acquire()
            self._slot = True
            self.envs.live += 1
            self.inner = self._make(image, workdir)
        except (EnvironmentFault, UnsafeFileError, OSError) as exc:
            self.failed(exc if isinstance(exc, EnvironmentFault) else EnvironmentFault(str(exc)))

    def fresh(self) -> Environment:
        """A new, unstarted environment of the run's own image and settings, beside the
        agent's: SWE-bench grades a prediction by applying its patch to a container of the
        instance image, so nothing else the agent did (files outside the patch, a planted
        `usercustomize.py`, a process left running) can reach the grade. The caller starts
        and stops it, in the slot of the agent's (`retire`d first); a batch killed
        meanwhile leaves it labelled as the run's, and the next batch reaps it."""
        assert self.info.image is not None and self.info.workdir is not None
        return self._make(self.info.image, self.info.workdir, f"{self.run.name}.grade")

    def _make(self, image: str, workdir: str, name: str | None = None) -> Environment:
        t, s = self.run, self.settings
        name = name or t.name
        if s.backend in CONTAINER_BACKENDS:
            return ContainerEnvironment(
                engine=self.envs.engine(t),
                image=image,
                workdir=workdir,
                batch_id=self.envs.batch_id,
                run_name=name,
                network=s.network,
                cpus=s.cpus,
                memory_mb=s.memory_mb,
                user=s.user,
                run_args=s.run_args,
                start_timeout_s=s.timeout_s,
            )
        from runner.sandbox.kubernetes import PodEnvironment, owner_from_env

        return PodEnvironment(
            batch_id=self.envs.batch_id,
            run_name=name,
            image=image,
            workdir=workdir,
            namespace=s.namespace,
            service_account=s.service_account,
            cpus=s.cpus,
            memory_mb=s.memory_mb,
            user=s.user,
            network=s.network,
            start_timeout_s=s.timeout_s,
            owner_pod=owner_from_env(os.environ),
            kubectl=self.envs.kubectl(),
        )

    # -- beside the first request ----------------------------------------------------------

    async def start(self) -> None:
        """Start, copy the work in, record its start state; then `ready` is set, whatever
        happened (a fault is recorded and ends the thread)."""
        began = time.monotonic()
        try:
            if self.inner is not None and self.fault is None:
                await self.inner.start()
                if self._copy is not None:
                    await _copy_in(self.inner, self._copy)
                    self._copy = None
                for copy, at in self.skills.mounts if self.skills is not None else ():
                    await self.inner.put_dir(copy, str(at))
                self.snapshot = await changes.snapshot(self.inner)
                self.info = dataclasses.replace(
                    self.info, start_s=round(time.monotonic() - began, 3)
                )
        except (EnvironmentFault, UnsafeFileError) as exc:
            self.failed(exc if isinstance(exc, EnvironmentFault) else EnvironmentFault(str(exc)))
        finally:
            self.ready.set()

    def guarded(self) -> Environment:
        """What the tools get: waits for `start`, and ends the run when the environment
        is lost."""
        assert self.inner is not None
        return Guarded(self.inner, self)

    # -- the wind-up ------------------------------------------------------------------------

    async def shell(self) -> str:
        """`bash`, or `sh` in an image without bash (busybox, distroless-ish): asked of
        the environment once, since an exit of 127 from the check itself means nothing."""
        if self._shell is None:
            assert self.inner is not None
            probe = await self.inner.exec(["bash", "-c", ":"], env={}, timeout_s=30)
            self._shell = "sh" if probe.exit_code in (126, 127) else "bash"
        return self._shell

    async def check(self, command: str, timeout_s: float) -> ExecResult | None:
        """The task's check in the environment; None when it is not usable."""
        if self.inner is None or self.fault is not None or self.snapshot is None:
            return None
        try:
            return await self.inner.exec(
                [await self.shell(), "-c", command],
                env={},
                timeout_s=timeout_s,
                output_cap=1 << 20,
            )
        except EnvironmentFault as exc:
            self.failed(exc)
            return None

    async def finish(self, host_work: Path | None, redact: Redactor) -> list[str]:
        """The diff of workdir: its patch when there is no host workspace, else applied
        to it (whose own commit then makes the patch and branch). Notes for the report."""
        if self.inner is None or self.snapshot is None or self.fault is not None:
            return []
        notes: list[str] = []
        try:
            got = await changes.diff(self.inner, self.snapshot)
            patch = _redacted(got.patch, redact)
            if got.left_out and gold_patch(self.run) is None:
                notes.append(left_out_note(got.left_out, redact, "patch"))
            # What the patch lacks is named even when nothing else changed: a grade made
            # from the patch alone must know it is not the whole work.
            self.info = dataclasses.replace(self.info, left_out=got.left_out)
            if patch and host_work is None:
                path = self.out_dir / "patches" / f"{self.run.name}.patch"
                path.parent.mkdir(parents=True, exist_ok=True)
                await anyio.to_thread.run_sync(atomic_write_bytes, path, patch)
                self.info = dataclasses.replace(
                    self.info, patch=str(path.relative_to(self.out_dir))
                )
            elif host_work is not None and patch:
                # The host workspace's commit writes the patch.
                await _apply(host_work, patch)
        except (EnvironmentFault, UnsafeFileError, WorkspaceError) as exc:
            if isinstance(exc, EnvironmentLost):
                self.failed(exc)
            else:
                notes.append(f"could not keep the environment's changes: {exc}")
        return [redact(n) for n in notes]

    async def artifacts(self, redact: Redactor) -> list[str]:
        """The task's `artifacts:` copied out to `OUT/artifacts/<run>/`, bounded; notes
        for what could not be."""
        if not self.settings.artifacts or self.inner is None or self.snapshot is None:
            return []
        try:
            return [redact(n) for n in await self._artifacts()]
        except EnvironmentFault as exc:
            if isinstance(exc, EnvironmentLost):
                self.failed(exc)
            return [redact(f"artifacts not copied: {exc}")]

    async def _artifacts(self) -> list[str]:
        assert self.inner is not None
        folder, notes = await copy_artifacts(
            self.inner, self.settings.artifacts, self.out_dir, self.run.name
        )
        if folder is not None:
            self.info = dataclasses.replace(self.info, artifacts=folder)
        return notes

    async def retire(self) -> None:
        """The agent's container or Pod removed, its slot kept: SWE-bench grades in a
        fresh one (`fresh`), which takes that slot, so `max_environments` counts live
        containers, graders included. Called once its patch and artifacts are out."""
        with anyio.CancelScope(shield=True):
            try:
                if self.inner is not None and not self._retired:
                    self._retired = True
                    await self.inner.stop()
            except EnvironmentFault:
                pass  # the next batch reaps what could not be removed (`reap_orphans`)

    async def stop(self) -> None:
        with anyio.CancelScope(shield=True):
            try:
                await self.retire()
            finally:
                if self._slot:
                    self._slot = False
                    self.envs.live -= 1
                    self.envs.slots.release()
                if self._skills_dir is not None:
                    shutil.rmtree(self._skills_dir, ignore_errors=True)
                    self._skills_dir = None


class Guarded:
    """An environment that waits for its start and reports its loss. Only tool calls go
    through it; the wind-up uses the environment itself."""

    def __init__(self, inner: Environment, owner: RunEnvironment) -> None:
        self._inner = inner
        self._owner = owner
        self.backend = inner.backend
        self.workdir = inner.workdir
        self.limit_notes = inner.limit_notes

    async def _ready(self) -> Environment:
        await self._owner.ready.wait()
        if self._owner.fault is not None:
            raise EnvironmentFault(self._owner.fault)
        return self._inner

    async def start(self) -> None:
        await self._ready()

    async def stop(self) -> None:
        """The run stops it (`RunEnvironment.stop`), not a tool."""

    async def exec(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        timeout_s: float,
        output_cap: int = DEFAULT_OUTPUT_CAP,
    ) -> ExecResult:
        inner = await self._ready()
        try:
            return await inner.exec(
                argv, cwd=cwd, env=env, stdin=stdin, timeout_s=timeout_s, output_cap=output_cap
            )
        except EnvironmentLost as exc:
            self._owner.failed(exc)
            raise

    async def read_file(self, path: str, *, max_bytes: int) -> bytes | None:
        inner = await self._ready()
        try:
            return await inner.read_file(path, max_bytes=max_bytes)
        except EnvironmentLost as exc:
            self._owner.failed(exc)
            raise

    async def write_file(self, path: str, data: bytes) -> None:
        inner = await self._ready()
        try:
            await inner.write_file(path, data)
        except EnvironmentLost as exc:
            self._owner.failed(exc)
            raise

    async def remove_file(self, path: str) -> None:
        inner = await self._ready()
        try:
            await inner.remove_file(path)
        except EnvironmentLost as exc:
            self._owner.failed(exc)
            raise

    async def put_dir(self, src: Path, dest: str) -> None:
        inner = await self._ready()
        try:
            await inner.put_dir(src, dest)
        except EnvironmentLost as exc:
            self._owner.failed(exc)
            raise

    async def get_dir(self, src: str, dest: Path, *, max_bytes: int) -> None:
        inner = await self._ready()
        try:
            await inner.get_dir(src, dest, max_bytes=max_bytes)
        except EnvironmentLost as exc:
            self._owner.failed(exc)
            raise


# -- helpers ---------------------------------------------------------------------------------


async def _image_facts(engine: Engine, image: str) -> tuple[str | None, str | None]:
    """The image's id and WORKDIR (None for none, or `/`); EnvironmentFault when the
    engine has no such image."""
    done = await engine.call(["image", "inspect", image])
    if done.code != 0:
        raise EnvironmentFault(
            f"no image {image} on this machine ({engine.executable} said: {done.said()})"
        )
    try:
        first = json.loads(done.stdout)[0]
        workdir = str((first.get("Config") or {}).get("WorkingDir") or "") or None
        return str(first.get("Id") or "")[:19] or None, None if workdir == "/" else workdir
    except (ValueError, LookupError, AttributeError):
        return None, None


async def _tar_of(folder: Path) -> bytes:
    """The host workspace as a tar, `.git` left out (its objects live on the host) and
    links kept as links: they point somewhere inside the container, not the host."""
    return await anyio.to_thread.run_sync(_pack, folder)


def _pack(folder: Path) -> bytes:
    total = 0

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        nonlocal total
        if info.name == "./.git" or info.name.startswith("./.git/"):
            return None
        if not (info.isreg() or info.isdir() or info.issym()):
            return None  # FIFOs, devices: nothing a checkout holds
        total += info.size
        if total > COPY_IN_MAX_BYTES:
            raise EnvironmentFault(
                f"the workspace is over {COPY_IN_MAX_BYTES >> 20} MiB to copy in"
            )
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(folder, arcname=".", filter=keep)
    return buf.getvalue()


async def _copy_in(env: Environment, data: bytes) -> None:
    """Unpacked by the environment's own tar: every backend has `exec` with stdin, and a
    link in the work is made as a link there (`put_dir` refuses links)."""
    argv = ["tar", "-x", "-f", "-", "-C", env.workdir, "--no-same-owner"]
    got = await env.exec(argv, cwd="/", stdin=data, timeout_s=600, output_cap=1 << 16)
    if got.exit_code != 0:
        said = got.output.decode(errors="replace").strip()[-500:]
        raise EnvironmentFault(f"cannot unpack the workspace in {env.workdir}: {said}")


def _redacted(patch: bytes, redact: Redactor) -> bytes:
    if not patch:
        return patch
    return redact(patch.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")


async def _apply(host_work: Path, patch: bytes) -> None:
    """The environment's changes onto the host workspace, whose commit and branch are
    then made as for a host run."""
    args = ["apply", "--binary", "--whitespace=nowarn", "-"]
    done = await anyio.to_thread.run_sync(
        functools.partial(run_git, args, cwd=host_work, input=patch, check=False)
    )
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip()[-500:]
        raise WorkspaceError(f"the environment's patch does not apply to the workspace: {said}")


__all__ = [
    "Environments",
    "RunEnvironment",
    "uses_environment",
]
