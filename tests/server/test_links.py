"""The OpenAPI links from an answer carrying a request to the calls that take its id."""

from __future__ import annotations

from typing import Any

import schemathesis

from signoff.server.app import API, create_app
from signoff.server.links import REQUEST_LINKS
from signoff.testing import memory_service

SPEC: dict[str, Any] = create_app(memory_service(), sweep=False).openapi()


def _target(ref: str) -> dict[str, Any]:
    """The operation a local ``operationRef`` (``#/paths/<escaped path>/<method>``) names."""
    prefix, _, rest = ref.partition("#/paths/")
    assert prefix == "", ref
    escaped, _, method = rest.rpartition("/")
    path = escaped.replace("~1", "/").replace("~0", "~")
    operation: dict[str, Any] = SPEC["paths"][path][method]
    return operation


def test_every_link_names_an_operation_that_takes_the_id() -> None:
    """Each link resolves to an operation of the schema with the parameter it fills."""
    for name, link in REQUEST_LINKS.items():
        operation = _target(link["operationRef"])
        names = {f"{p['in']}.{p['name']}" for p in operation.get("parameters", [])}
        for parameter in link.get("parameters", {}):
            assert parameter in names, (name, parameter, names)
        if "requestBody" in link:
            assert "requestBody" in operation, name


def test_a_submit_and_each_step_of_a_request_link_onwards() -> None:
    """Submit (201 and 200), read, decide, wait, claim, report and cancel all carry the links."""
    steps = [
        ("/requests", "post", "201"),
        ("/requests", "post", "200"),
        ("/requests/{request_id}", "get", "200"),
        ("/requests/{request_id}/decision", "post", "200"),
        ("/requests/{request_id}/wait", "get", "200"),
        ("/requests/{request_id}/claim", "post", "200"),
        ("/requests/{request_id}/result", "post", "200"),
        ("/requests/{request_id}/cancel", "post", "200"),
    ]
    for path, method, status in steps:
        response = SPEC["paths"][f"{API}{path}"][method]["responses"][status]
        assert response["links"] == REQUEST_LINKS, (path, method, status)


def test_schemathesis_follows_them_from_a_submit() -> None:
    """schemathesis' state machine has a transition from a submit to each linked call."""
    machine = schemathesis.openapi.from_dict(SPEC).as_state_machine()
    prefix = "POST_api_v1_requests___201_"
    # with response schemas, schemathesis also infers links of its own (a request's grant_id
    # to the grant's revoke): ours must all be there
    from_submit = {
        name.removeprefix(prefix).partition("__")[0]
        for name in dir(machine)
        if name.startswith(prefix)
    }
    assert set(REQUEST_LINKS) <= from_submit, sorted(from_submit)
