"""One list of operations: what mypy's protocol check cannot see.

``signoff.backends`` has mypy prove that ``LocalBackend`` and ``AsyncClient`` satisfy
``Backend``; mypy does not compare default values or the names of positional parameters,
and the blocking ``Client`` is no ``Backend`` at all. These tests hold every operation of
each to the protocol's signature, parameter by parameter.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

from signoff.backends import Backend, LocalBackend
from signoff.client import AsyncClient, Client

OPERATIONS = sorted(
    name
    for name, value in vars(Backend).items()
    if not name.startswith("_") and inspect.isfunction(value)
)
"""Every operation the protocol names."""

CLIENT_EXTRAS = {"me", "aclose"}
"""AsyncClient's methods that are no operation of Backend: who am I, and closing."""

NOT_BLOCKING = {"events"}
"""Operations the blocking Client leaves to AsyncClient (a stream needs an event loop)."""


def public_methods(cls: type) -> set[str]:
    """The public callables a class defines itself."""
    return {
        name for name, value in vars(cls).items() if not name.startswith("_") and callable(value)
    }


def signature(function: Callable[..., Any]) -> str:
    """Parameters (names, kinds, defaults, annotations as written) and the result."""
    return str(inspect.signature(function))


def test_the_protocol_lists_the_operations() -> None:
    assert {"submit", "decide", "claim", "audit", "events", "list_webhooks"} <= set(OPERATIONS)


def test_local_backend_offers_exactly_the_operations() -> None:
    assert public_methods(LocalBackend) == set(OPERATIONS)


def test_async_client_offers_the_operations_and_only_its_extras() -> None:
    assert public_methods(AsyncClient) - CLIENT_EXTRAS == set(OPERATIONS)


def test_blocking_client_offers_every_operation_but_the_stream() -> None:
    blocking = public_methods(Client) - {"me", "close", "to_async"}
    assert blocking == set(OPERATIONS) - NOT_BLOCKING


@pytest.mark.parametrize("name", OPERATIONS)
@pytest.mark.parametrize("implementation", [LocalBackend, AsyncClient], ids=lambda c: c.__name__)
def test_each_operation_has_the_protocols_signature(implementation: type, name: str) -> None:
    assert signature(getattr(implementation, name)) == signature(getattr(Backend, name))


@pytest.mark.parametrize("name", sorted(set(OPERATIONS) - NOT_BLOCKING))
def test_the_blocking_client_has_the_same_signatures(name: str) -> None:
    method = getattr(Client, name)
    assert not inspect.iscoroutinefunction(method)
    assert signature(method) == signature(getattr(Backend, name))


def test_async_operations_are_coroutines_or_streams() -> None:
    for name in OPERATIONS:
        for implementation in (LocalBackend, AsyncClient):
            method = getattr(implementation, name)
            wanted = inspect.isasyncgenfunction if name == "events" else inspect.iscoroutinefunction
            assert wanted(method), f"{implementation.__name__}.{name}"
