"""The OpenAPI document names a real schema for each answer, the models of signoff.wire."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from pydantic import BaseModel, TypeAdapter

from signoff.domain.audit import ChainReport
from signoff.domain.principals import Principal
from signoff.domain.requests import RequestAdapter
from signoff.server.app import API, create_app
from signoff.testing import memory_service
from signoff.wire import (
    AgentList,
    AnchorView,
    AuditLog,
    BatchResults,
    DeliveryList,
    GrantList,
    RequestPage,
    TaskList,
    TaskView,
    TokenCreated,
    TokenList,
    TokenView,
    WebhookList,
)
from tests.integrations.test_pydantic_ai_tasks import Hosted, hosted

__all__ = ["hosted"]  # the fixture of a server hosting agents, for the task answers

SPEC: dict[str, Any] = create_app(memory_service(), sweep=False).openapi()

ONE_REQUEST = {"ApprovalRequest", "ChoiceRequest", "QuestionsRequest"}
"""What an answer that is one request can be."""

NAMED: dict[tuple[str, str, str], str] = {
    ("get", "/requests", "200"): "RequestPage",
    ("post", "/decisions", "200"): "BatchResults",
    ("get", "/grants", "200"): "GrantList",
    ("post", "/grants/{grant_id}/revoke", "200"): "Grant",
    ("get", "/audit", "200"): "AuditLog",
    ("get", "/audit/verify", "200"): "ChainReport",
    ("get", "/audit/anchor", "200"): "AnchorView",
    ("post", "/tokens", "201"): "TokenCreated",
    ("get", "/tokens", "200"): "TokenList",
    ("post", "/tokens/{token_id}/revoke", "200"): "TokenView",
    ("get", "/me", "200"): "Principal",
    ("post", "/webhooks", "201"): "Webhook",
    ("get", "/webhooks", "200"): "WebhookList",
    ("post", "/webhooks/{webhook_id}/remove", "200"): "WebhookView",
    ("get", "/webhooks/deliveries", "200"): "DeliveryList",
    ("post", "/webhooks/deliveries/{delivery_id}/redeliver", "200"): "Delivery",
    ("get", "/agents", "200"): "AgentList",
    ("post", "/agents/{name}/runs", "201"): "TaskView",
    ("get", "/tasks", "200"): "TaskList",
    ("get", "/tasks/{task_id}", "200"): "TaskView",
    ("post", "/resume/{request_id}", "200"): "TaskView",
}
"""Each answer whose schema is one named model: (method, path, status) to the model."""

REQUEST_ANSWERS = [
    ("post", "/requests", "201"),
    ("post", "/requests", "200"),
    ("get", "/requests/{request_id}", "200"),
    ("get", "/requests/{request_id}/wait", "200"),
    ("post", "/requests/{request_id}/decision", "200"),
    ("post", "/requests/{request_id}/claim", "200"),
    ("post", "/requests/{request_id}/lease", "200"),
    ("post", "/requests/{request_id}/result", "200"),
    ("post", "/requests/{request_id}/cancel", "200"),
]
"""Answers that are one request, of any kind."""


def _schema(method: str, path: str, status: str) -> dict[str, Any]:
    """The JSON schema of one answer."""
    answer = SPEC["paths"][f"{API}{path}"][method]["responses"][status]
    schema: dict[str, Any] = answer["content"]["application/json"]["schema"]
    return schema


def _name(ref: str) -> str:
    return ref.removeprefix("#/components/schemas/")


def _properties(model: str) -> set[str]:
    return set(SPEC["components"]["schemas"][model]["properties"])


@pytest.mark.parametrize(("method", "path", "status"), sorted(NAMED))
def test_an_answer_names_its_model(method: str, path: str, status: str) -> None:
    """The answer's schema is a reference to its model in the components."""
    schema = _schema(method, path, status)
    assert _name(schema.get("$ref", "")) == NAMED[method, path, status], schema


@pytest.mark.parametrize(("method", "path", "status"), REQUEST_ANSWERS)
def test_an_answer_that_is_one_request_is_any_kind(method: str, path: str, status: str) -> None:
    """One request is one of the three kinds, told apart by ``kind``."""
    schema = _schema(method, path, status)
    assert {_name(s["$ref"]) for s in schema.get("oneOf", [])} == ONE_REQUEST, schema
    assert schema["discriminator"]["propertyName"] == "kind"


def test_a_page_holds_requests_of_any_kind() -> None:
    """``RequestPage.items`` are requests, and a batch's results are decided or refused."""
    page = SPEC["components"]["schemas"]["RequestPage"]["properties"]
    assert {_name(s["$ref"]) for s in page["items"]["items"]["oneOf"]} == ONE_REQUEST
    batch = SPEC["components"]["schemas"]["BatchResults"]["properties"]["results"]
    assert {_name(s["$ref"]) for s in batch["items"]["anyOf"]} == {"BatchDecided", "BatchRefused"}


def test_no_schema_shows_a_token_hash_or_a_listed_secret() -> None:
    """Token answers have no hash; only the webhook an admin just added shows its secret."""
    for model in ("TokenView", "TokenCreated"):
        assert "token_hash" not in _properties(model)
    assert "token" in _properties("TokenCreated")
    assert "secret" not in _properties("WebhookView")
    assert "secret" in _properties("Webhook")


def _read_as(model: type[BaseModel] | TypeAdapter[Any], response: httpx.Response) -> None:
    """The answer reads as ``model`` and writes back as the same JSON, keys in order."""
    assert response.is_success, response.text
    adapter = model if isinstance(model, TypeAdapter) else TypeAdapter(model)
    again = adapter.dump_python(adapter.validate_json(response.content), mode="json")
    sent = response.json()
    assert again == sent
    assert list(again) == list(sent)


async def test_each_answer_is_exactly_its_model(
    agent: httpx.AsyncClient, admin: httpx.AsyncClient
) -> None:
    """Real answers read as their models with nothing lost, added or reordered."""
    call = {"session_id": "s", "tool_name": "t", "tool_args": {"a": 1}}
    submitted = await agent.post(f"{API}/requests", json=call)
    _read_as(RequestAdapter, submitted)
    _read_as(RequestPage, await admin.get(f"{API}/requests"))
    ids = [submitted.json()["id"], "req_nobody"]
    _read_as(
        BatchResults, await admin.post(f"{API}/decisions", json={"ids": ids, "type": "approve"})
    )
    _read_as(AuditLog, await admin.get(f"{API}/audit"))
    _read_as(ChainReport, await admin.get(f"{API}/audit/verify"))
    anchor = await admin.get(f"{API}/audit/anchor")
    _read_as(AnchorView, anchor)
    assert anchor.json()["at"].endswith("+00:00")
    created = await admin.post(f"{API}/tokens", json={"name": "ci", "role": "agent"})
    _read_as(TokenCreated, created)
    _read_as(TokenList, await admin.get(f"{API}/tokens"))
    _read_as(TokenView, await admin.post(f"{API}/tokens/{created.json()['id']}/revoke"))
    _read_as(Principal, await agent.get(f"{API}/me"))
    _read_as(GrantList, await admin.get(f"{API}/grants"))
    _read_as(WebhookList, await admin.get(f"{API}/webhooks"))
    _read_as(DeliveryList, await admin.get(f"{API}/webhooks/deliveries"))


PAUSED_ORDER = ["request_id", "message", "approval_url", "rejection_url", "tool_calls"]
"""What a task's answer holds only while it is paused, last and in this order."""
PAUSED_ONLY = set(PAUSED_ORDER)


def _read_as_sent(model: type[BaseModel], response: httpx.Response) -> dict[str, Any]:
    """The answer reads as ``model`` and writes back (its unset fields left out, as the
    server sends it) as the same JSON, keys in order; the JSON."""
    assert response.is_success, response.text
    again = model.model_validate_json(response.content).model_dump(mode="json", exclude_unset=True)
    sent: dict[str, Any] = response.json()
    assert again == sent
    assert list(again) == list(sent)
    return sent


async def test_each_task_answer_is_exactly_its_model(hosted: Hosted) -> None:
    """Runs, tasks and resumes read as TaskView, a paused one with its links and only it."""
    alice = hosted.alice
    _read_as_sent(AgentList, await alice.get(f"{API}/agents"))
    done = _read_as_sent(
        TaskView, await alice.post(f"{API}/agents/quiet/runs", json={"prompt": "go"})
    )
    assert done["status"] == "Completed" and not PAUSED_ONLY & set(done)
    paused = _read_as_sent(
        TaskView, await alice.post(f"{API}/agents/one/runs", json={"prompt": "go"})
    )
    assert paused["status"] == "Paused"
    assert list(paused)[-6:] == ["task_id", *PAUSED_ORDER]
    assert "messages" not in paused
    listed = _read_as_sent(TaskList, await alice.get(f"{API}/tasks"))
    assert {t["task_id"] for t in listed["items"]} == {done["task_id"], paused["task_id"]}
    _read_as_sent(TaskView, await alice.get(f"{API}/tasks/{paused['task_id']}"))
    resumed = _read_as_sent(
        TaskView,
        await alice.post(
            f"{API}/resume/{paused['request_id']}?action=reject", json={"reason": "not now"}
        ),
    )
    assert resumed["status"] != "Paused" and not PAUSED_ONLY & set(resumed)
