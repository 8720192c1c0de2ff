"""The queue's executor: a worker that runs approved tool calls and reports their results.

An agent in queue mode submits a call and carries on; a person approves it later; an
:class:`Executor` then runs it. The executor finds approved approval requests for the
tools in its :class:`ToolRegistry`, claims each (approved -> executing) with exactly its
``approved_args``, calls the implementation with those arguments and reports ``complete``
or ``fail``. The claim is the lock: of any number of executors on one database or server,
exactly one wins each request and the others are refused with a 409 they skip, so every
approved operation runs once.

It needs only a :class:`signoff.backends.Backend` (the service in this process, or
``signoff.AsyncClient``) and no agent framework. The backend's principal must be able to
see and claim the requests: an agent sees and claims only requests it submitted itself,
an admin all of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping
from types import TracebackType
from typing import Any, Literal, Self, TypeGuard, TypeVar, get_type_hints, overload

from pydantic import ConfigDict, JsonValue, create_model
from pydantic_core import PydanticSerializationError, to_jsonable_python

from signoff.backends import Backend
from signoff.domain.events import Event
from signoff.domain.requests import ApprovalRequest, Request
from signoff.domain.schemas import (
    args_problem,
    check_args_schema,
    sendable_schema,
    without_regexes,
)
from signoff.domain.transitions import DEFAULT_LEASE
from signoff.errors import (
    InvalidDecision,
    InvalidRequest,
    InvalidTransition,
    RequestNotFound,
    SignoffError,
)
from signoff.leases import holding
from signoff.store.base import RequestQuery

__all__ = [
    "Executor",
    "ToolFunction",
    "ToolRegistry",
    "error_text",
    "jsonable",
    "signature_schema",
]

ToolFunction = Callable[..., Any]
"""A tool's implementation: sync or async, takes the tool's args as keyword arguments."""

F = TypeVar("F", bound=ToolFunction)

logger = logging.getLogger(__name__)

_PAGE = 100
_RECONNECT = 1.0
_STOPPED = "the worker stopped during the call; whether it finished is unknown"


class ToolRegistry:
    """Tool names mapped to the functions that run them, and their arguments' JSON Schemas.

    A tool's schema is the one given to ``add``/``tool`` (``schema=``), else the one its
    signature describes (pydantic's reading of the annotated parameters), else none. Calls
    whose arguments do not fit it are reported failed by the executor and never run.
    """

    def __init__(self) -> None:
        self._tools: dict[str, ToolFunction] = {}
        self._schemas: dict[str, dict[str, JsonValue] | None] = {}

    @overload
    def tool(self, fn: F, /) -> F: ...
    @overload
    def tool(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        schema: Mapping[str, JsonValue] | None = None,
    ) -> Callable[[F], F]: ...

    def tool(
        self,
        fn: ToolFunction | None = None,
        /,
        *,
        name: str | None = None,
        schema: Mapping[str, JsonValue] | None = None,
    ) -> Any:
        """Register a function under its own name, or ``name``: ``@registry.tool(name="x")``."""
        if fn is not None:
            self.add(fn.__name__, fn)
            return fn

        def register(func: F) -> F:
            self.add(name if name is not None else func.__name__, func, schema=schema)
            return func

        return register

    def add(
        self, name: str, fn: ToolFunction, *, schema: Mapping[str, JsonValue] | None = None
    ) -> None:
        """Register ``fn`` as the implementation of tool ``name``.

        ``schema`` is the JSON Schema its arguments must fit; by default, what the
        function's annotated signature says (none for a function taking ``**kwargs`` only).
        Regular expressions in it are not applied here (the tool checks them).
        """
        if not name or not name.strip():
            raise InvalidRequest("a tool needs a name")
        if not callable(fn):
            raise InvalidRequest(f"tool {name!r} must be a function, not {type(fn).__name__}")
        if name in self._tools:
            raise InvalidRequest(f"tool {name!r} is already registered")
        checked: dict[str, JsonValue] | None = None
        if schema is not None:
            plain = without_regexes(dict(schema))
            try:
                assert isinstance(plain, dict)
                check_args_schema(plain)
            except ValueError as exc:
                raise InvalidRequest(f"tool {name!r}: {exc}") from None
            checked = plain
        self._tools[name] = fn
        self._schemas[name] = checked if schema is not None else signature_schema(fn)

    def schema(self, name: str) -> dict[str, JsonValue] | None:
        """The JSON Schema tool ``name``'s arguments must fit, if known."""
        self.get(name)
        return self._schemas.get(name)

    def get(self, name: str) -> ToolFunction:
        """The implementation of tool ``name``; InvalidRequest naming the known tools if none."""
        try:
            return self._tools[name]
        except KeyError:
            known = ", ".join(sorted(self._tools)) or "none"
            raise InvalidRequest(f"no tool named {name!r} is registered (known: {known})") from None

    @property
    def names(self) -> frozenset[str]:
        """The registered tool names."""
        return frozenset(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)

    async def call(self, name: str, args: Mapping[str, JsonValue]) -> Any:
        """Run tool ``name`` with ``args`` as keyword arguments; a sync tool runs in a thread."""
        fn = self.get(name)
        if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            getattr(fn, "__call__", None)  # noqa: B004 - an object with an async __call__
        ):
            return await fn(**args)
        value = await asyncio.to_thread(fn, **args)
        if inspect.isawaitable(value):  # e.g. a partial of an async function
            value = await value
        return value


def signature_schema(fn: ToolFunction) -> dict[str, JsonValue] | None:
    """The JSON Schema of ``fn``'s keyword arguments, from its annotations; None if unclear.

    Parameters without annotations accept anything; ``**kwargs`` allows other names; a
    signature pydantic cannot describe (positional-only or ``*args`` parameters, types
    without a JSON Schema) gives None: the call is not checked beyond what the tool does.
    """
    try:
        signature = inspect.signature(fn)
        hints = get_type_hints(fn)
    except (TypeError, ValueError, NameError):
        return None
    fields: dict[str, Any] = {}
    extra: Literal["allow", "forbid"] = "forbid"
    for param in signature.parameters.values():
        if param.kind is param.VAR_KEYWORD:
            extra = "allow"
            continue
        if param.kind in (param.VAR_POSITIONAL, param.POSITIONAL_ONLY):
            return None
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (hints.get(param.name, Any), default)
    if not fields and extra == "allow":
        return None
    try:
        model = create_model(
            "ToolArgs",
            __config__=ConfigDict(extra=extra, arbitrary_types_allowed=True),
            **fields,
        )
        schema = sendable_schema(model.model_json_schema())
    except Exception:  # a signature pydantic cannot describe is not checked
        return None
    return schema


def jsonable(value: Any) -> JsonValue:
    """``value`` as JSON data: pydantic's conversion where it has one, else ``str(value)``."""
    try:
        converted: JsonValue = to_jsonable_python(value)
    except PydanticSerializationError:
        return str(value)
    return converted


def error_text(exc: BaseException) -> str:
    """How a failed call is reported: ``ExceptionType: message``."""
    message = str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


class Executor:
    """Runs approved calls of its registry's tools, each exactly once, and reports results.

    ``run_once`` processes what is approved now; ``run`` (or ``async with``) keeps going,
    woken by events and polling every ``poll`` seconds, until ``stop``. ``session_id``
    limits it to one agent session; ``on_finished`` is called with each request it ran,
    as completed or failed. Each claim holds ``lease`` seconds, renewed every third of
    that while the call runs, so a worker that dies leaves no call executing for long: the
    server fails it, and nobody runs it again.
    """

    def __init__(
        self,
        backend: Backend,
        registry: ToolRegistry,
        *,
        session_id: str | None = None,
        poll: float = 1.0,
        on_finished: Callable[[Request], object] | None = None,
        lease: float = DEFAULT_LEASE,
    ) -> None:
        self.backend = backend
        self.registry = registry
        self.session_id = session_id
        self.poll = poll
        self.on_finished = on_finished
        self.lease = lease
        self._queue: asyncio.Queue[ApprovalRequest | None] = asyncio.Queue()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None

    def wants(self, request: Request) -> TypeGuard[ApprovalRequest]:
        """Whether this executor runs ``request`` when it is approved."""
        return (
            isinstance(request, ApprovalRequest)
            and request.tool_name in self.registry
            and (self.session_id is None or request.session_id == self.session_id)
        )

    async def approved(self) -> list[ApprovalRequest]:
        """Approved requests for this executor's tools, oldest first."""
        found: list[ApprovalRequest] = []
        cursor: str | None = None
        while True:
            query = RequestQuery(
                status="approved",
                kind="approval",
                session_id=self.session_id,
                limit=_PAGE,
                cursor=cursor,
            )
            page = await self.backend.list_requests(query)
            found += [r for r in page.items if self.wants(r)]
            cursor = page.next_cursor
            if cursor is None or not page.items:
                found.reverse()
                return found

    async def execute(self, request: ApprovalRequest) -> Request | None:
        """Claim, run and report one approved call; None if another executor claimed it first.

        The call runs with the request's ``approved_args``, and only after the claim
        succeeded. An exception in the tool is reported as the call's failure.
        """
        self.registry.get(request.tool_name)  # refuse before claiming what cannot run
        args = request.approved_args if request.approved_args is not None else request.tool_args
        problem = args_problem(self.registry.schema(request.tool_name), args)
        try:
            await self.backend.claim(request.id, args, lease=self.lease)
        except (InvalidTransition, RequestNotFound):
            return None  # claimed (or finished) by someone else: theirs to run
        except InvalidDecision:
            # the args break the schema the request carries: signoff failed it, unrun
            refused = await self.backend.get(request.id)
            if self.on_finished is not None:
                self.on_finished(refused)
            return refused
        if problem is not None:
            finished = await self._report(
                request.id,
                ok=False,
                detail=f"not run: the arguments do not fit the tool's schema ({problem})",
            )
            if self.on_finished is not None:
                self.on_finished(finished)
            return finished
        try:
            value = await self._call_leased(request, args)
        except asyncio.CancelledError:
            with contextlib.suppress(SignoffError):
                await self._report(request.id, ok=False, detail=_STOPPED)
            raise
        except Exception as exc:
            finished = await self._report(request.id, ok=False, detail=error_text(exc))
        else:
            finished = await self._report(request.id, ok=True, detail=jsonable(value))
        if self.on_finished is not None:
            self.on_finished(finished)
        return finished

    async def _call_leased(self, request: ApprovalRequest, args: Mapping[str, JsonValue]) -> Any:
        """Run the claimed call, renewing its lease while it runs."""
        async with holding(self.backend, [request.id], lease=self.lease):
            return await self.registry.call(request.tool_name, args)

    async def _report(self, request_id: str, *, ok: bool, detail: JsonValue) -> Request:
        if ok:
            try:
                return await self.backend.complete(request_id, detail)
            except InvalidRequest as exc:  # e.g. a result too large to store
                detail = f"the result could not be recorded: {exc.message}"
        return await self.backend.fail(request_id, str(detail))

    async def run_once(self) -> int:
        """Run every call approved now; how many this executor ran (others may run some)."""
        return await self._run_approved(stoppable=False)

    async def _run_approved(self, *, stoppable: bool) -> int:
        ran = 0
        for request in await self.approved():
            if stoppable and self._stopping:
                break
            if await self.execute(request) is not None:
                ran += 1
        return ran

    async def run(self) -> None:
        """Run approved calls as they are approved, until :meth:`stop`.

        Decided events wake it at once; a sweep every ``poll`` seconds catches what was
        approved before it started or while the event stream was down. Errors reaching
        signoff are logged and retried; they never end the loop.
        """
        watcher = asyncio.create_task(self._watch(), name="signoff-executor-events")
        try:
            await self._sweep()
            while not self._stopping:
                try:
                    async with asyncio.timeout(self.poll):
                        item = await self._queue.get()
                except TimeoutError:
                    await self._sweep()
                    continue
                if item is not None and not self._stopping:
                    await self._guarded(self.execute(item))
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)
            self._stopping = False  # ready to run again
            while not self._queue.empty():
                self._queue.get_nowait()

    def stop(self) -> None:
        """Ask :meth:`run` to return once the call it is running (if any) is reported.

        A stop before ``run`` has started makes that run return at once.
        """
        self._stopping = True
        self._queue.put_nowait(None)

    async def __aenter__(self) -> Self:
        self._task = asyncio.create_task(self.run(), name="signoff-executor")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        if self._task is not None:
            task, self._task = self._task, None
            await task

    async def _sweep(self) -> None:
        if not self._stopping:
            await self._guarded(self._run_approved(stoppable=True))

    async def _guarded(self, work: Awaitable[object]) -> None:
        try:
            await work
        except SignoffError as exc:
            logger.warning("signoff executor: %s", exc.message)

    async def _watch(self) -> None:
        """Queue each approved request the event stream reports; reconnect when it drops."""
        since: int | None = None
        while True:
            try:
                async for event in self.backend.events(since=since, session_id=self.session_id):
                    since = event.seq
                    if _runnable(event) and self.wants(event.request):
                        self._queue.put_nowait(event.request)
            except SignoffError as exc:
                logger.warning("signoff executor: event stream: %s", exc.message)
            except Exception:  # polling still finds everything; keep trying to reconnect
                logger.exception("signoff executor: event stream failed")
            await asyncio.sleep(_RECONNECT)


def _runnable(event: Event) -> bool:
    # An approval at submit (policy, a standing grant) is announced as "decided" too.
    return event.type == "decided" and event.request.status == "approved"
