"""The package's version, in one place: pyproject.toml reads it here for the distribution,
`runner --version` and every report name it."""

VERSION = "0.1.0"
