"""Attack: an agent managing notification routes or people links, and a route aimed at the
server's own network."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from signoff.server.app import API
from tests.serving import Server, agent_token, bearer, serve_for_module


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One default server (private webhook targets refused) for the module."""
    yield from serve_for_module(tmp_path_factory.mktemp("notify-attacks"))


ROUTE = {"name": "leak", "channel": {"type": "webhook", "url": "https://hooks.example.com/x"}}
PRIVATE = ["http://127.0.0.1:9/x", "http://169.254.169.254/latest/meta-data/", "http://[::1]/"]


def test_an_agent_cannot_add_list_or_remove_routes_or_link_people(served: Server) -> None:
    """Every route and link operation refuses an agent's token with 403 and changes nothing."""
    assert served.admin_token is not None
    agent = agent_token(served, "sneaky")
    with httpx.Client(base_url=served.base, headers=bearer(agent)) as http:
        calls = [
            http.post(f"{API}/notify/routes", json=ROUTE),
            http.get(f"{API}/notify/routes"),
            http.post(f"{API}/notify/routes/leak/remove"),
            http.get(f"{API}/notify/failing"),
            http.post(
                f"{API}/people/links",
                json={"kind": "slack", "external_id": "U0SNEAKY", "name": "admin"},
            ),
            http.get(f"{API}/people/links"),
            http.post(
                f"{API}/people/links/remove", json={"kind": "slack", "external_id": "U0SNEAKY"}
            ),
        ]
    assert [c.status_code for c in calls] == [403] * len(calls), [c.text for c in calls]
    assert all(c.json()["error"] == "NotAllowed" for c in calls)
    with httpx.Client(base_url=served.base, headers=bearer(served.admin_token)) as http:
        assert http.get(f"{API}/notify/routes").json()["items"] == []
        assert http.get(f"{API}/people/links").json()["items"] == []


def test_a_route_to_a_private_address_is_refused(served: Server) -> None:
    """A webhook route obeys the webhooks' rule: private targets are 422 and nothing is
    stored, unless the server allows private webhooks."""
    assert served.admin_token is not None
    with httpx.Client(base_url=served.base, headers=bearer(served.admin_token)) as http:
        for url in PRIVATE:
            spec = {"name": "inside", "channel": {"type": "webhook", "url": url}}
            answer = http.post(f"{API}/notify/routes", json=spec)
            assert answer.status_code == 422, (url, answer.text)
            assert "--allow-private-webhooks" in answer.json()["detail"]
        assert http.get(f"{API}/notify/routes").json()["items"] == []


def test_a_slack_or_email_decision_cannot_be_claimed_over_the_api(served: Server) -> None:
    """A person's HTTP decision cannot pose as one made in Slack or by an email link."""
    assert served.admin_token is not None
    agent = agent_token(served, "asker")
    with httpx.Client(base_url=served.base, headers=bearer(agent)) as http:
        made = http.post(
            f"{API}/requests", json={"session_id": "s", "tool_name": "t", "tool_args": {}}
        ).json()
    with httpx.Client(base_url=served.base, headers=bearer(served.admin_token)) as http:
        for via in ("slack", "email-link"):
            answer = http.post(
                f"{API}/requests/{made['id']}/decision",
                params={"via": via},
                json={"type": "approve"},
            )
            assert answer.status_code == 422, answer.text
        assert http.get(f"{API}/requests/{made['id']}").json()["status"] == "pending"


def test_bad_route_and_link_input_is_a_specific_422(served: Server) -> None:
    """Malformed routes and links are refused with a message naming the field."""
    assert served.admin_token is not None
    bad = [
        ({"name": "Bad Name", "channel": ROUTE["channel"]}, "name"),
        ({"name": "x", "channel": {"type": "slack", "channel": "not a channel"}}, "channel"),
        ({"name": "x", "channel": {"type": "email", "to": ["nobody"]}}, "email"),
        ({"name": "x", "channel": ROUTE["channel"], "escalate_after": 60}, "escalate_to"),
    ]
    with httpx.Client(base_url=served.base, headers=bearer(served.admin_token)) as http:
        for body, word in bad:
            answer = http.post(f"{API}/notify/routes", json=body)
            assert answer.status_code == 422 and word in answer.json()["detail"], answer.text
        answer = http.post(
            f"{API}/people/links", json={"kind": "slack", "external_id": "U0X", "name": "ghost"}
        )
        assert answer.status_code == 422 and "ghost" in answer.json()["detail"]
