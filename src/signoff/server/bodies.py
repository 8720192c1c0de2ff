"""What request bodies share: unknown fields and unstorable text are refused."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, model_validator

from signoff.domain.text import refuse_unstorable

__all__ = ["StrictBody"]


class StrictBody(BaseModel):
    """A request body: no field beyond those named, no text a store cannot hold."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _encodable(cls, data: object) -> object:
        return refuse_unstorable(data)
