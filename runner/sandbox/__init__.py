"""Where commands run. Only unsandboxed execution exists so far (`danger-full-access`);
bubblewrap comes behind the same `Executor` protocol (see runner/tools/__init__.py)."""
