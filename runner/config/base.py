"""The base of every task-file model and the strict scalar types they share, apart from
schema.py so that a section with its own module (environment.py) can use them too."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, Strict

# YAML 1.1 reads yes/no/on/off as booleans and 1.0 as a float; strict fields keep those
# from passing as integers (true == 1) or flags. Floats still take integers (60 -> 60.0).
StrictInt = Annotated[int, Strict()]
StrictFloat = Annotated[float, Strict(), Field(allow_inf_nan=False)]
StrictBool = Annotated[bool, Strict()]


def _path_text(v: str) -> str:
    if not v:
        raise ValueError("must not be empty; leave the field out to use the default")
    return v


PathText = Annotated[str, AfterValidator(_path_text)]


class Frozen(BaseModel):
    # The attribute docstrings below are for readers. Pydantic would read them into field
    # descriptions by re-parsing this file's source at import (~100 ms of every start), and
    # nothing uses those descriptions: no schema is generated from the task-file models.
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)
