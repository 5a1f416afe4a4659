"""A SafeLoader that stops at MAX_DEPTH levels of nesting while it scans.

PyYAML's pure-Python scanner revisits every open level at every token, so nesting costs
the square of its depth: 1,000 levels of `[` took 4 s and 20,000 over a minute, in a
task file or a suite's task.yaml or compose file of well under their 1 MiB limit. No real
one nests past a dozen levels, so deeper input is refused where it goes too deep, before
that cost, as a located syntax error."""

from __future__ import annotations

import yaml
from yaml.scanner import ScannerError

MAX_DEPTH = 100
"""Open block and flow collections at once, at most."""


class DepthBoundLoader(yaml.SafeLoader):
    def _deeper(self) -> None:
        if len(self.indents) + self.flow_level >= MAX_DEPTH:
            raise ScannerError(
                None,
                None,
                f"nested too deeply (more than {MAX_DEPTH} levels of lists and mappings)",
                self.get_mark(),
            )

    def fetch_flow_collection_start(self, TokenClass: type[yaml.Token]) -> None:  # noqa: N803
        self._deeper()
        super().fetch_flow_collection_start(TokenClass)

    def add_indent(self, column: int) -> bool:
        if column > self.indent:
            self._deeper()
        return bool(super().add_indent(column))
