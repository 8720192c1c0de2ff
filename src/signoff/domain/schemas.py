"""A tool's JSON Schema for its arguments: checked when it arrives, applied to args that run.

An integration that knows the tool's schema sends it with the request (``args_schema``);
arguments a person edits must fit it when they approve, and a claim checks them again,
so an edit that breaks the tool's schema never runs. The agent's own proposal is not
checked here: its framework validates it as it always did.

The schema comes from the agent, so it can only make things stricter: without one nothing
is checked (as before), with one a person's edit must also fit it. It is capped in
size and depth, and it never makes signoff reach the network: only references inside the
schema itself (``#...``) resolve; any other ``$ref`` is refused when the request arrives
and, should one get through, fails validation (fail closed) instead of being fetched.

Applying it must not let the agent stall the server either: regular expressions
(``pattern``, ``patternProperties``) are refused, since Python's ``re`` cannot be
interrupted (integrations leave them out with :func:`sendable_schema`; the tool still
checks them), and each validation has a budget of keyword checks (``MAX_SCHEMA_STEPS``),
so ``anyOf`` branching through shared ``$ref`` s or ``uniqueItems`` on a long array ends
as a misfit instead of running on.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from itertools import islice
from typing import Any

import jsonschema
import referencing
from pydantic import BaseModel, ConfigDict, JsonValue

__all__ = [
    "MAX_SCHEMA_BYTES",
    "MAX_SCHEMA_DEPTH",
    "MAX_SCHEMA_STEPS",
    "ArgsMisfit",
    "args_misfits",
    "args_problem",
    "check_args_schema",
    "sendable_schema",
    "without_regexes",
]

MAX_SCHEMA_BYTES = 64 * 1024
"""The largest ``args_schema`` accepted, as compact JSON."""

MAX_SCHEMA_DEPTH = 32
"""The deepest nesting of objects and arrays accepted in an ``args_schema``."""

MAX_SCHEMA_STEPS = 50_000
"""The most keyword checks one validation may make; past it the args count as a misfit."""

MAX_UNIQUE_ITEMS = 1_000
"""The longest array ``uniqueItems`` is checked on (the check compares every pair)."""

_REGEX_KEYWORDS = {"pattern": str, "patternProperties": dict}

_REF_KEYWORDS = frozenset({"$ref", "$dynamicRef", "$recursiveRef"})

# jsonschema ships no type hints: its validator classes are Any here
_DIALECTS: tuple[tuple[str, Any], ...] = (
    ("draft-04", jsonschema.Draft4Validator),
    ("draft-06", jsonschema.Draft6Validator),
    ("draft-07", jsonschema.Draft7Validator),
    ("2019-09", jsonschema.Draft201909Validator),
)


def _validator_class(schema: Mapping[str, JsonValue]) -> Any:
    dialect = schema.get("$schema")
    if isinstance(dialect, str):
        for marker, cls in _DIALECTS:
            if marker in dialect:
                return cls
    return jsonschema.Draft202012Validator


def _depth(value: JsonValue, limit: int) -> int:
    """How deep ``value`` nests, counting no further than ``limit + 1``."""
    stack: list[tuple[JsonValue, int]] = [(value, 1)]
    deepest = 0
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if deepest > limit:
            return deepest
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
    return deepest


def _regexes(value: JsonValue) -> list[str]:
    """The regular-expression keywords in ``value`` (a string ``pattern``, an object
    ``patternProperties``)."""
    found: list[str] = []
    stack: list[JsonValue] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, sub in item.items():
                kind = _REGEX_KEYWORDS.get(key)
                if kind is not None and isinstance(sub, kind):
                    found.append(key)
                stack.append(sub)
        elif isinstance(item, list):
            stack.extend(item)
    return found


def without_regexes(value: JsonValue) -> JsonValue:
    """``value`` without its regular-expression keywords (the tool still checks them)."""
    if isinstance(value, dict):
        return {
            key: without_regexes(sub)
            for key, sub in value.items()
            if key not in _REGEX_KEYWORDS or not isinstance(sub, _REGEX_KEYWORDS[key])
        }
    if isinstance(value, list):
        return [without_regexes(sub) for sub in value]
    return value


def _outside_refs(value: JsonValue) -> list[str]:
    found: list[str] = []
    stack: list[JsonValue] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, sub in item.items():
                if key in _REF_KEYWORDS and isinstance(sub, str) and not sub.startswith("#"):
                    found.append(sub)
                stack.append(sub)
        elif isinstance(item, list):
            stack.extend(item)
    return found


def check_args_schema(schema: Mapping[str, JsonValue]) -> None:
    """Refuse (ValueError, one line) a schema too big, too deep, invalid, pointing outside,
    or holding regular expressions."""
    if _depth(dict(schema), MAX_SCHEMA_DEPTH) > MAX_SCHEMA_DEPTH:
        raise ValueError(f"args_schema nests deeper than {MAX_SCHEMA_DEPTH} levels")
    size = len(json.dumps(schema, separators=(",", ":"), ensure_ascii=False).encode())
    if size > MAX_SCHEMA_BYTES:
        raise ValueError(f"args_schema is {size} bytes; the limit is {MAX_SCHEMA_BYTES}")
    regexes = _regexes(dict(schema))
    if regexes:
        raise ValueError(
            f"args_schema may not hold regular expressions ({regexes[0]}): signoff cannot "
            "bound their cost; leave them to the tool"
        )
    outside = _outside_refs(dict(schema))
    if outside:
        raise ValueError(
            f"args_schema may only refer inside itself (#...), not to {outside[0][:200]!r}"
        )
    try:
        _validator_class(schema).check_schema(dict(schema))
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.path)
        raise ValueError(
            f"args_schema is not a valid JSON Schema{f' at {where}' if where else ''}: "
            f"{_line(exc.message)}"
        ) from None
    except Exception as exc:  # whatever else the check meets, the schema is not taken
        raise ValueError(f"args_schema cannot be checked: {_line(str(exc))}") from None


def sendable_schema(schema: object) -> dict[str, JsonValue] | None:
    """``schema`` as an integration sends it, or None when signoff would refuse it.

    Regular expressions are taken out (the tool still checks them); a tool schema too big
    or pointing outside itself is left out rather than failing the request: the person's
    edit then goes unchecked, as without a schema.
    """
    if not isinstance(schema, dict) or not schema:
        return None
    try:
        plain = without_regexes(json.loads(json.dumps(schema, allow_nan=False)))
        if not isinstance(plain, dict):
            return None
        check_args_schema(plain)
    except (TypeError, ValueError, RecursionError):
        return None
    return plain if isinstance(plain, dict) else None


def args_problem(
    schema: Mapping[str, JsonValue] | None, args: Mapping[str, JsonValue]
) -> str | None:
    """Why ``args`` do not fit the tool's ``schema`` (one line), or None when they do.

    No schema means nothing to check. A schema that cannot be applied (a reference that
    does not resolve inside it, a loop) counts as a misfit: the call must not run.
    """
    errors, failure = _validated(schema, args, _best)
    if failure is not None:
        return failure
    if not errors:
        return None
    where = "/".join(str(p) for p in errors[0].absolute_path)
    return f"{f'args/{where}' if where else 'args'}: {_line(errors[0].message)}"


class ArgsMisfit(BaseModel):
    """One way edited arguments do not fit the tool's schema, placed on the argument."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    field: str | None
    """The top-level argument it is about; None when it is about the args as a whole."""
    path: str
    """Where, as ``args/name/0``."""
    message: str
    """What is wrong, one line."""


MAX_MISFITS = 20
"""The most misfits listed for one set of arguments."""


def args_misfits(
    schema: Mapping[str, JsonValue] | None, args: Mapping[str, JsonValue]
) -> list[ArgsMisfit]:
    """Every way ``args`` do not fit ``schema`` (up to MAX_MISFITS), most relevant first.

    The same check as :func:`args_problem`, listed per argument for a form to show beside
    each field; a schema that cannot be applied is one misfit of the whole args.
    """
    errors, failure = _validated(schema, args, _first_many)
    if failure is not None:
        return [ArgsMisfit(field=None, path="args", message=failure)]
    return [_misfit(error) for error in errors]


def _misfit(error: Any) -> ArgsMisfit:
    parts = [str(p) for p in error.absolute_path]
    if not parts and error.validator == "required" and isinstance(error.instance, dict):
        # a missing argument belongs beside its own (empty) field
        parts = [str(n) for n in error.validator_value if n not in error.instance][:1]
    return ArgsMisfit(
        field=parts[0] if parts else None,
        path="/".join(["args", *parts]),
        message=_line(error.message),
    )


def _best(errors: Iterator[Any]) -> list[Any]:
    best = jsonschema.exceptions.best_match(errors)
    return [] if best is None else [best]


def _first_many(errors: Iterator[Any]) -> list[Any]:
    return sorted(islice(errors, MAX_MISFITS), key=jsonschema.exceptions.relevance)


def _validated(
    schema: Mapping[str, JsonValue] | None,
    args: Mapping[str, JsonValue],
    collect: Callable[[Iterator[Any]], list[Any]],
) -> tuple[list[Any], str | None]:
    """``collect`` over the validation errors of ``args``, within the step budget; or why
    the schema cannot be applied (one line). No schema: no errors."""
    if schema is None:
        return [], None
    if _regexes(dict(schema)):
        return [], "the tool's schema cannot be applied: it holds regular expressions"
    cls = _budgeted(_validator_class(schema))
    # an empty registry: a reference outside the schema fails instead of being fetched
    validator = cls(dict(schema), registry=referencing.Registry())
    try:
        return collect(validator.iter_errors(dict(args))), None
    except RecursionError:
        return [], "the tool's schema cannot be applied: it refers to itself without end"
    except _OverBudget:
        return [], (
            f"the tool's schema cannot be applied: checking these arguments takes more than "
            f"{MAX_SCHEMA_STEPS} steps"
        )
    except Exception as exc:  # any failure to apply the schema fails closed
        return [], f"the tool's schema cannot be applied: {_line(str(exc))}"


class _OverBudget(Exception):
    """A validation past ``MAX_SCHEMA_STEPS`` keyword checks."""


def _budgeted(cls: Any) -> Any:
    """``cls`` with every keyword check counted, raising _OverBudget past the budget."""
    steps = [0]

    def counted(check: Any) -> Any:
        def run(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
            steps[0] += 1
            if steps[0] > MAX_SCHEMA_STEPS:
                raise _OverBudget
            return check(validator, value, instance, schema)

        return run

    def unique(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        if isinstance(instance, list) and len(instance) > MAX_UNIQUE_ITEMS:
            raise _OverBudget
        return original_unique(validator, value, instance, schema)

    original_unique = cls.VALIDATORS.get("uniqueItems")
    checks = dict(cls.VALIDATORS)
    if original_unique is not None:
        checks["uniqueItems"] = unique
    return jsonschema.validators.extend(
        cls, validators={name: counted(check) for name, check in checks.items()}
    )


def _line(text: str) -> str:
    first = text.strip().splitlines()[0] if text.strip() else "invalid"
    return first if len(first) <= 300 else first[:297] + "..."
