"""Records built from fields already valid, without validating them again.

A store's committed events and audit entries, a change's event drafts and a submit's new
request are made from records and values the domain has validated already. Validating them
again (or pydantic's ``model_construct``, which walks every field for defaults and aliases)
cost 2-4 us a record on every commit, and a new request's 8 us (about 40 us with cold
caches, as between an agent's other work); :func:`built` sets the fields as they are,
about 1 us.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

__all__ = ["built", "filled", "json_copy", "replaced"]

M = TypeVar("M", bound=BaseModel)

_set = object.__setattr__

_MISSING = object()


class _Fields:
    """A class's fields in order, with their defaults (:data:`_MISSING` where required)."""

    def __init__(self, cls: type[BaseModel]) -> None:
        self.template: dict[str, Any] = {}
        for name, field in cls.model_fields.items():
            if field.default_factory is not None:
                raise TypeError(f"{cls.__name__}.{name} has a default_factory: validate it instead")
            self.template[name] = _MISSING if field.is_required() else field.default
        self.required = frozenset(n for n, v in self.template.items() if v is _MISSING)


_FIELDS: dict[type[BaseModel], _Fields] = {}
"""Each class :func:`filled` has built: its fields' order and defaults."""


def built(cls: type[M], **fields: Any) -> M:
    """An instance of ``cls`` holding ``fields``, unvalidated: every field of ``cls`` must be
    given, each already a valid value (a model without private attributes, extras or a
    ``model_post_init``)."""
    return _made(cls, fields, set(fields))


def filled(cls: type[M], **fields: Any) -> M:
    """:func:`built` with the fields not given at their defaults, which must be immutable
    values (no ``default_factory``): the fields in the class's order, as validation puts
    them (and so as they are serialized), and the fields set those given.

    TypeError if a required field is missing or a field is not the class's.
    """
    known = _FIELDS.get(cls)
    if known is None:
        known = _FIELDS[cls] = _Fields(cls)
    values = known.template.copy()
    values.update(fields)  # a key already there keeps its place
    if len(values) != len(known.template) or not known.required <= fields.keys():
        unknown = sorted(fields.keys() - known.template.keys())
        missing = sorted(known.required - fields.keys())
        raise TypeError(f"{cls.__name__}: unknown fields {unknown}, missing fields {missing}")
    return _made(cls, values, set(fields))


def replaced(model: M, /, **changes: Any) -> M:
    """``model`` with ``changes``, unvalidated, as ``model.model_copy(update=changes)``
    makes it (the fields set grow by those changed), without its generic copy."""
    values = {**model.__dict__, **changes}
    return _made(type(model), values, model.__pydantic_fields_set__ | changes.keys())


def _made(cls: type[M], values: dict[str, Any], fields_set: set[str]) -> M:
    """An instance of ``cls`` holding ``values`` as they are, ``fields_set`` its fields set."""
    model = cls.__new__(cls)
    _set(model, "__dict__", values)
    _set(model, "__pydantic_fields_set__", fields_set)
    _set(model, "__pydantic_extra__", None)
    _set(model, "__pydantic_private__", None)
    return model


def json_copy(value: Any) -> Any:
    """A JSON value's own copy: new dicts and lists all the way down, so that a record
    built from it shares no container with whoever handed it in (validation makes new
    containers; :func:`built` does not)."""
    if isinstance(value, dict):
        return {key: json_copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [json_copy(item) for item in value]
    return value
