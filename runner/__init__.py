"""runner: a headless runner for coding agents over the OpenAI Responses API."""

import sys

__version__ = "0.1.0"

# httpx loads its own command-line tool (`httpx._main`, which imports rich and click) as
# soon as those are installed, and rich is (for our progress display): about 80 ms of every
# start, for a module the runner never uses. A None entry makes that import fail the way
# httpx expects when they are missing. Only if httpx is not loaded yet, so nobody else's
# httpx changes under them.
if "httpx" not in sys.modules:
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
