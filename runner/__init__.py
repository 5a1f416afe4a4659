"""runner: a headless runner for coding agents over the OpenAI Responses API."""

__version__ = "0.1.0"
