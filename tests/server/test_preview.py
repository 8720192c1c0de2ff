"""POST /requests/{id}/preview against a real server: a person's edit previewed, nothing changed.

The preview of edited arguments must be the request's own preview made again (same reader,
same preview root), with the tool's schema checked per argument, for deciders only.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from signoff.client import Client
from signoff.server.app import API
from tests.serving import Server, agent_token, bearer, free_port, new_token, start_server

SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "content": {"type": "string"},
        "mode": {"type": "integer", "minimum": 0},
        "backup": {"type": "boolean"},
    },
    "required": ["path", "content"],
    "additionalProperties": False,
}


@dataclass
class Setup:
    """A server with a preview root, an agent's and a person's tokens."""

    server: Server
    agent: str
    person: str
    root: Path


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    """``signoff serve --preview-root ROOT`` with two text files in ROOT."""
    base = tmp_path_factory.mktemp("preview")
    root = base / "root"
    root.mkdir()
    (root / "notes.md").write_text("line one\nline two\n")
    (root / "other.md").write_text("other text\n")
    env = {**os.environ, "XDG_CONFIG_HOME": str(base)}
    server = start_server(
        f"sqlite:///{base / 'serve.db'}", free_port(), env, "--preview-root", str(root)
    )
    try:
        yield Setup(server, agent_token(server), new_token(server, "alice", "approver")[0], root)
    finally:
        server.stop()


def _http(setup: Setup, token: str) -> httpx.Client:
    return httpx.Client(base_url=setup.server.base, headers=bearer(token), timeout=30)


def _submit(setup: Setup, args: dict[str, Any], **extra: Any) -> dict[str, Any]:
    with _http(setup, setup.agent) as http:
        body = {"session_id": "s", "kind": "approval", "tool_name": "write_file", "tool_args": args}
        made = http.post(f"{API}/requests", json={**body, **extra})
    assert made.status_code == 201, made.text
    answer: dict[str, Any] = made.json()
    return answer


def _preview(setup: Setup, request_id: str, body: Any, token: str | None = None) -> httpx.Response:
    with _http(setup, token or setup.person) as http:
        return http.post(f"{API}/requests/{request_id}/preview", json=body)


def test_the_diff_is_made_again_for_edited_content_and_nothing_changes(setup: Setup) -> None:
    """Edited content: the diff of the file in the root against it; the request stays as is."""
    request = _submit(setup, {"path": "notes.md", "content": "line one\nagent line\n"})
    assert "+agent line" in request["preview"]["diff"]
    with _http(setup, setup.person) as http:
        audit_before = http.get(f"{API}/audit", params={"request_id": request["id"]}).json()
    edited = {"path": "notes.md", "content": "line one\nperson line\n"}
    answer = _preview(setup, request["id"], {"args": edited})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["args"] == edited and body["errors"] == []
    preview = body["preview"]
    assert set(preview) == set(request["preview"])  # the same shape as the request's own
    assert preview["old"] == "line one\nline two\n" and preview["old_source"] == "file"
    assert "-line two" in preview["diff"] and "+person line" in preview["diff"]
    assert "agent line" not in preview["diff"]
    # another file in the root, by the same reader: its own old content
    moved = _preview(setup, request["id"], {"args": {"path": "other.md", "content": "x\n"}})
    assert "-other text" in moved.json()["preview"]["diff"]
    # an edit that writes no file: no preview, as a request for it would have none
    plain = _preview(setup, request["id"], {"args": {"command": "ls"}})
    assert plain.status_code == 200 and plain.json()["preview"] is None
    with _http(setup, setup.person) as http:
        after = http.get(f"{API}/requests/{request['id']}").json()
        audit_after = http.get(f"{API}/audit", params={"request_id": request["id"]}).json()
    assert after["status"] == "pending" and after["version"] == request["version"]
    assert after["preview"] == request["preview"] and audit_after == audit_before
    assert (setup.root / "notes.md").read_text() == "line one\nline two\n"


def test_schema_misfits_are_listed_per_argument_with_a_200(setup: Setup) -> None:
    """With a schema: each misfit names its argument; the proposal itself is not checked."""
    args = {"path": "notes.md", "content": "new\n"}
    request = _submit(setup, args, args_schema=SCHEMA)
    same = _preview(setup, request["id"], {"args": args})
    assert same.status_code == 200 and same.json()["errors"] == []
    bad = _preview(
        setup, request["id"], {"args": {"path": "notes.md", "mode": -1, "backup": "yes"}}
    )
    assert bad.status_code == 200, bad.text
    errors = {e["field"]: e for e in bad.json()["errors"]}
    assert set(errors) == {"content", "mode", "backup"}, errors
    assert errors["mode"]["path"] == "args/mode" and "minimum" in errors["mode"]["message"]
    assert "'content' is a required property" in errors["content"]["message"]
    assert "boolean" in errors["backup"]["message"]
    extra = _preview(setup, request["id"], {"args": {**args, "surprise": 1}})
    assert [e["field"] for e in extra.json()["errors"]] == [None]
    assert "surprise" in extra.json()["errors"][0]["message"]
    fits = _preview(setup, request["id"], {"args": {**args, "mode": 420, "backup": True}})
    assert fits.json()["errors"] == [] and "+new" in fits.json()["preview"]["diff"]


def test_who_and_when_403_404_409_422(setup: Setup) -> None:
    """Agents 403 whatever the id, unknown 404, decided 409, bad bodies and uneditable 422."""
    request = _submit(setup, {"path": "notes.md", "content": "x\n"})
    body = {"args": {"path": "notes.md", "content": "y\n"}}
    for request_id in (request["id"], "req_unknown"):
        refused = _preview(setup, request_id, body, token=setup.agent)
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"] == "NotAllowed"
    assert _preview(setup, "req_unknown", body).status_code == 404
    for bad in ({"args": "text"}, {"args": [1]}, {}, {"args": {}, "more": 1}):
        answer = _preview(setup, request["id"], bad)
        assert answer.status_code == 422, answer.text
        assert set(answer.json()) == {"error", "detail"}
    fixed = _submit(setup, {"path": "notes.md", "content": "x\n"}, editable=False)
    same = _preview(setup, fixed["id"], {"args": fixed["tool_args"]})
    assert same.status_code == 200
    edited = _preview(setup, fixed["id"], body)
    assert edited.status_code == 422 and "may not be edited" in edited.json()["detail"]
    with _http(setup, setup.agent) as http:
        choice = http.post(
            f"{API}/requests",
            json={"session_id": "s", "kind": "choice", "prompt": "which?", "options": ["a", "b"]},
        ).json()
    assert _preview(setup, choice["id"], body).status_code == 422
    with _http(setup, setup.person) as http:
        done = http.post(f"{API}/requests/{request['id']}/decision", json={"type": "approve"})
        assert done.status_code == 200, done.text
    late = _preview(setup, request["id"], body)
    assert late.status_code == 409 and late.json()["error"] == "InvalidTransition"


def test_the_python_client_previews_an_edit(setup: Setup) -> None:
    """Client.preview_edit returns the typed preview the endpoint sends."""
    request = _submit(setup, {"path": "notes.md", "content": "x\n"})
    with Client(setup.server.base, setup.person) as client:
        seen = client.preview_edit(request["id"], {"path": "notes.md", "content": "z\n"})
    assert seen.preview is not None and "+z" in seen.preview.diff and seen.errors == []
