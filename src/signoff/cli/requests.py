"""Commands on requests: list, show, decide, submit, cancel and watch."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer

from signoff.cli.backend import ServerOption, TokenOption, call_backend, open_backend
from signoff.cli.context import (
    DbOption,
    console,
    fail,
    local_principal,
    parse_json_object,
    run,
)
from signoff.cli.links import page_base
from signoff.cli.prompting import ask_decision, terminal_asker
from signoff.cli.waiting import OUTCOME_CODES, Waiting, wait_for_decision
from signoff.domain.decisions import Scope
from signoff.domain.principals import Principal
from signoff.domain.requests import RequestAdapter, RequestKind, Status
from signoff.errors import StoreUnavailable
from signoff.store.base import RequestQuery
from signoff.terminal.render import (
    decision_json,
    event_line,
    json_text,
    request_panel,
    requests_table,
)
from signoff.terminal.safe_text import visible_json
from signoff.terminal.tsv import requests_tsv

__all__ = ["register"]

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def pending(
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
    session: Annotated[str | None, typer.Option(help="Only this session.")] = None,
    kind: Annotated[RequestKind | None, typer.Option(help="Only this kind.")] = None,
    status: Annotated[Status, typer.Option(help="List this status instead.")] = "pending",
    limit: Annotated[int, typer.Option(min=1, max=500, help="At most this many.")] = 50,
    as_json: JsonFlag = False,
) -> None:
    """List requests awaiting a decision, newest first.

    On a terminal, a table (long args shortened); piped or redirected, tab-separated lines
    with every value whole, after a header line; --json for JSON.
    """

    async def go() -> None:
        async with open_backend(db, server, token, principal=local_principal()) as backend:
            query = RequestQuery(status=status, session_id=session, kind=kind, limit=limit)
            page = await backend.list_requests(query)
        if as_json:
            dumped = [RequestAdapter.dump_python(r, mode="json") for r in page.items]
            console.print(json_text(dumped), soft_wrap=True)
        elif not console.is_terminal:
            typer.echo(requests_tsv(page.items), nl=False)
        elif not page.items:
            console.print(f"no {status} requests")
        else:
            console.print(requests_table(page.items))

    run(go)


def show(
    request_id: Annotated[str, typer.Argument(help="The request id.")],
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
    as_json: JsonFlag = False,
) -> None:
    """Show one request: the call with its args, the diff, grant, votes and audit trail."""

    async def go() -> None:
        async with open_backend(db, server, token, principal=local_principal()) as backend:
            request = await backend.get(request_id)
            audit = await backend.audit(request_id)
        if as_json:
            console.print(
                json_text(RequestAdapter.dump_python(request, mode="json")), soft_wrap=True
            )
        else:
            console.print(request_panel(request, audit))

    run(go)


def _decide(
    target: tuple[str | None, str | None, str | None], request_id: str, decision: dict[str, Any]
) -> None:
    async def go() -> None:
        async with open_backend(*target, principal=local_principal()) as backend:
            request = await backend.decide(request_id, decision)
        if request.status == "pending":
            console.print(
                f"{request.id}: approval recorded, {len(request.votes)} of {request.quorum}"
            )
        else:
            console.print(f"{request.id}: {request.status}")

    run(go)


def approve(
    request_id: Annotated[str, typer.Argument(help="The request id.")],
    args: Annotated[
        str | None, typer.Option("--args", help="Run these edited args (a JSON object).")
    ] = None,
    scope: Annotated[
        Scope, typer.Option(help="once; session or always also approve later matching calls.")
    ] = "once",
    pattern: Annotated[
        str | None,
        typer.Option(
            help='For a standing grant: arg globs later calls must match, e.g. {"path": "src/*"}.'
        ),
    ] = None,
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
) -> None:
    """Approve a request (optionally with edited args, or as a standing grant)."""
    decision: dict[str, Any] = {"type": "approve", "scope": scope}
    if args is not None:
        decision["args"] = parse_json_object(args)
    if pattern is not None:
        decision["args_pattern"] = parse_json_object(pattern, "--pattern")
    _decide((db, server, token), request_id, decision)


def reject(
    request_id: Annotated[str, typer.Argument(help="The request id.")],
    reason: Annotated[str, typer.Option(help="Why; the agent is told.")],
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
) -> None:
    """Reject a request; the reason goes back to the agent."""
    _decide((db, server, token), request_id, {"type": "reject", "reason": reason})


def respond(
    request_id: Annotated[str, typer.Argument(help="The request id.")],
    feedback: Annotated[str, typer.Option(help="What the model is told instead.")],
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
) -> None:
    """Do not run the call; give the model this text instead."""
    _decide((db, server, token), request_id, {"type": "respond", "feedback": feedback})


def choose(
    request_id: Annotated[str, typer.Argument(help="The request id.")],
    options: Annotated[list[str], typer.Argument(help="The option(s) chosen, or free text.")],
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
) -> None:
    """Answer a choice request with one option (several for multi-select)."""
    decision: dict[str, Any] = {"type": "choose"}
    if len(options) == 1:
        decision["choice"] = options[0]
    else:
        decision["choices"] = options
    _decide((db, server, token), request_id, decision)


def answer(
    request_id: Annotated[str, typer.Argument(help="The request id.")],
    answers: Annotated[
        list[str] | None, typer.Option("--answer", "-a", help="QUESTION_ID=TEXT, repeatable.")
    ] = None,
    feedback: Annotated[str | None, typer.Option(help="Overall feedback.")] = None,
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
) -> None:
    """Answer a request: with --answer/--feedback (questions), or by prompts for any kind.

    Without options it asks, one plain line at a time: y/n and a reason for a tool call, a
    numbered menu for a choice, one prompt per question. It reads standard input when that
    is not a terminal, so scripts and ssh work too.
    """
    if answers is None and feedback is None:
        _ask_and_decide((db, server, token), request_id)
        return
    parsed: dict[str, str] = {}
    for item in answers or []:
        key, sep, text = item.partition("=")
        if not sep or not key:
            fail(f"--answer takes QUESTION_ID=TEXT, not {item!r}")
        parsed[key] = text
    _decide(
        (db, server, token), request_id, {"type": "answer", "answers": parsed, "feedback": feedback}
    )


def _ask_and_decide(target: tuple[str | None, str | None, str | None], request_id: str) -> None:
    ask, interactive = terminal_asker()

    async def go() -> None:
        async with open_backend(*target, principal=local_principal()) as backend:
            request = await backend.get(request_id)
            if request.status != "pending":
                fail(f"{request.id} is {request.status}; there is nothing to answer")
            if interactive:
                console.print(request_panel(request))
            try:
                decision = ask_decision(
                    request,
                    ask,
                    interactive=interactive,
                    say=lambda text: console.print(text, markup=False, highlight=False),
                )
            except EOFError:
                fail("no answer on standard input")
            decided = await backend.decide(request_id, decision)
        console.print(f"{decided.id}: {decided.status}")

    run(go)


def cancel(
    request_id: Annotated[str, typer.Argument(help="The request id.")],
    reason: Annotated[str, typer.Option(help="Why it is withdrawn.")] = "",
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
) -> None:
    """Withdraw a pending request."""

    request = call_backend(db, server, token, lambda backend: backend.cancel(request_id, reason))
    console.print(f"{request.id}: {request.status}")


def submit(
    tool: Annotated[str, typer.Option(help="The tool the agent wants to call.")],
    args: Annotated[str, typer.Option("--args", help="Its arguments, a JSON object.")] = "{}",
    session: Annotated[str, typer.Option(help="The agent session asking.")] = "cli",
    tool_call_id: Annotated[
        str | None,
        typer.Option(help="The call's id; submitting it again returns the same request."),
    ] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Wait for the decision.")] = False,
    timeout: Annotated[
        float,
        typer.Option(
            min=0, help="With --wait: give up after this many seconds (and cancel the request)."
        ),
    ] = 300.0,
    keep: Annotated[
        bool,
        typer.Option(
            "--keep",
            help="With --wait: leave the request pending when the wait times out or is "
            "interrupted, instead of canceling it.",
        ),
    ] = False,
    public_url: Annotated[
        str | None,
        typer.Option(
            "--public-url",
            envvar="SIGNOFF_PUBLIC_URL",
            help="With --wait: the web inbox's address as your browser reaches it, for the "
            "request's link (default: --server's URL).",
            show_default=False,
        ),
    ] = None,
    expires_in: Annotated[
        float | None, typer.Option(min=1, help="Expire (and reject) after this many seconds.")
    ] = None,
    requester: Annotated[
        str, typer.Option(envvar="SIGNOFF_AGENT", help="The agent name the request is made as.")
    ] = "cli-agent",
    args_schema: Annotated[
        str | None,
        typer.Option("--args-schema", help="The tool's JSON Schema; a person's edit must fit it."),
    ] = None,
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
) -> None:
    """Ask for approval of a tool call and print the decision as JSON.

    With --wait it says at once on stderr which request waits and its link, shows a
    spinner while waiting (on a terminal), and cancels the request when the wait times out
    or Ctrl+C ends it (--keep leaves it pending). The exit code tells a shell hook what to
    do: 0 approved, 1 rejected or canceled, 2 expired or timed out, 130 interrupted.
    """
    tool_args = parse_json_object(args)
    waiting = Waiting(timeout=timeout, keep=keep, page_base=page_base(public_url, server))
    schema = parse_json_object(args_schema, "--args-schema") if args_schema is not None else None

    async def go() -> int:
        principal = Principal(name=requester, role="agent")
        async with open_backend(db, server, token, principal=principal, follow=wait) as backend:
            body: dict[str, Any] = {
                "session_id": session,
                "kind": "approval",
                "tool_name": tool,
                "tool_args": tool_args,
                "tool_call_id": tool_call_id,
                "expires_in": expires_in,
            }
            if schema is not None:
                body["args_schema"] = schema
            request = (await backend.submit(body)).request
            code = OUTCOME_CODES[request.status] if wait else 0
            if wait and request.status == "pending":
                request, code = await wait_for_decision(backend, request, waiting)
        console.print(decision_json(request), markup=False, soft_wrap=True)
        return code

    run(go)


def watch(
    db: DbOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
    session: Annotated[str | None, typer.Option(help="Only this session.")] = None,
    count: Annotated[int | None, typer.Option(min=1, help="Stop after this many events.")] = None,
    since: Annotated[
        int | None, typer.Option(min=0, help="First replay the events after this seq (0: all).")
    ] = None,
    as_json: JsonFlag = False,
) -> None:
    """Print requests' events as they happen, including those from other processes."""

    async def go() -> None:
        seen = 0
        last = since
        answered = False  # a server that answered once and went away is waited for
        async with open_backend(db, server, token, principal=local_principal()) as backend:
            while True:
                try:
                    async for event in backend.events(since=last, session_id=session):
                        answered = True
                        last = event.seq
                        if as_json:
                            line = visible_json(event.model_dump_json())
                            console.print(line, markup=False, soft_wrap=True)
                        else:
                            console.print(event_line(event))
                        seen += 1
                        if count is not None and seen >= count:
                            return
                    answered = True  # the server ended the stream (it is stopping): resume
                except StoreUnavailable:
                    if not answered:
                        raise
                await asyncio.sleep(1.0)

    try:
        run(go)
    except KeyboardInterrupt:
        raise typer.Exit(0) from None


def register(app: typer.Typer) -> None:
    """Add the request commands to ``app``."""
    for command in (pending, show, approve, reject, respond, choose, answer, cancel, submit, watch):
        app.command()(command)
