"""``signoff serve``'s settings from the environment, ``--version`` and ``pending`` piped.

One real server for the module, started with ``SIGNOFF_HOST`` and ``SIGNOFF_PUBLIC_URL`` in
its environment and a ``SIGNOFF_PORT`` its ``--port`` flag overrides. Every link it hands
out (a notification's, a Slack-format webhook's, the sign-in link it prints) points at the
public URL, whatever Host header the agent sent.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import typer

from signoff.__version__ import __version__
from signoff.cli.settings import Listen, listen_settings
from signoff.server.app import API
from signoff.terminal.tsv import COLUMNS
from tests.serving import Server, agent_token, bearer, free_port, run_receiver, start_server

PUBLIC = "https://signoff.example.test/team"
LONG = "echo " + "x" * 300 + "\tand\na\x1b[2Jline"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server whose host and public URL come from the environment; its port from --port
    although ``SIGNOFF_PORT`` names another."""
    home = tmp_path_factory.mktemp("settings")
    env = {
        **os.environ,
        "XDG_CONFIG_HOME": str(home),
        "SIGNOFF_HOST": "127.0.0.1",
        "SIGNOFF_PORT": str(free_port()),
        "SIGNOFF_PUBLIC_URL": f"{PUBLIC}/",
    }
    running = start_server(
        f"sqlite:///{home / 'serve.db'}", free_port(), env, "--allow-private-webhooks"
    )
    yield running
    if running.process.poll() is None:
        running.stop()


def signoff(
    *args: str, env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``signoff ARGS``, its output piped."""
    return subprocess.run(
        [sys.executable, "-m", "signoff", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
        check=False,
    )


def test_version() -> None:
    done = signoff("--version", env=dict(os.environ))
    assert (done.returncode, done.stdout, done.stderr) == (0, f"signoff {__version__}\n", "")


def test_the_port_flag_wins_and_the_environment_gives_the_rest(served: Server) -> None:
    assert httpx.get(f"{served.base}/healthz").status_code == 200
    # without --port, SIGNOFF_PORT is the port: this one is taken by the running server
    taken = {**served.env, "SIGNOFF_PORT": str(served.port)}
    again = signoff("serve", "--db", served.db, env=taken)
    assert again.returncode == 3
    assert again.stderr.startswith(f"error: cannot listen on 127.0.0.1:{taken['SIGNOFF_PORT']}")


async def test_every_link_the_server_hands_out_is_on_the_public_url(served: Server) -> None:
    assert served.admin_token is not None
    admin = bearer(served.admin_token)
    agent = agent_token(served, "linker")
    async with run_receiver() as notified, run_receiver() as hooked:
        async with httpx.AsyncClient(base_url=served.base, headers=admin) as http:
            route = {"name": "links", "channel": {"type": "webhook", "url": notified.url}}
            added = await http.post(f"{API}/notify/routes", json=route)
            assert added.status_code in (200, 201), added.text
            hook = {"url": hooked.url, "format": "slack"}
            added = await http.post(f"{API}/webhooks", json=hook)
            assert added.status_code in (200, 201), added.text
        # the agent reaches the server under another name: links must not follow it
        spoofed = {**bearer(agent), "Host": "evil.example", "X-Forwarded-Host": "evil.example"}
        async with httpx.AsyncClient(base_url=served.base, headers=spoofed) as http:
            call = {"session_id": "s", "tool_name": "deploy", "tool_args": {"to": "prod"}}
            made = await http.post(f"{API}/requests", json=call)
        assert made.status_code == 201, made.text
        request_id = made.json()["id"]
        await asyncio.wait_for(notified.arrived.wait(), 20)
        await asyncio.wait_for(hooked.arrived.wait(), 20)
    notice = json.loads(notified.received[0][1])
    assert notice["url"] == f"{PUBLIC}/requests/{request_id}"
    slack_text = json.loads(hooked.received[0][1])["text"]
    assert f"<{PUBLIC}/requests/{request_id}|" in slack_text
    assert "evil.example" not in notified.received[0][1].decode() + slack_text


def test_the_first_start_prints_its_sign_in_link_on_the_public_url(served: Server) -> None:
    assert served.process.stdout is not None  # start_server read up to the admin token
    printed = [served.process.stdout.readline().strip() for _ in range(3)]
    assert f"{PUBLIC}/login?token={served.admin_token}" in printed
    assert f"{PUBLIC}/api/v1/requests" in printed[2]


def test_a_bad_setting_is_one_error_line_and_nothing_is_made(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path), "SIGNOFF_PORT": "80a"}
    db = tmp_path / "never.db"
    done = signoff("serve", "--db", f"sqlite:///{db}", env=env, cwd=tmp_path)
    assert (done.returncode, done.stdout) == (3, "")
    said = "error: SIGNOFF_PORT must be a port number from 1 to 65535, not '80a'\n"
    assert done.stderr == said
    assert not db.exists()


@pytest.mark.parametrize(
    ("flags", "environment", "says"),
    [
        ((None, None, None), {"SIGNOFF_PORT": "70000"}, "SIGNOFF_PORT must be a port number"),
        ((None, None, None), {"SIGNOFF_HOST": "local host"}, "SIGNOFF_HOST must be an interface"),
        ((None, None, None), {"SIGNOFF_PUBLIC_URL": "javascript:alert(1)"}, "SIGNOFF_PUBLIC_URL"),
        ((None, None, None), {"SIGNOFF_PUBLIC_URL": "https://me:pw@x.test"}, "credentials"),
        ((None, None, None), {"SIGNOFF_PUBLIC_URL": "https://x.test/?a=1"}, "query"),
        ((None, None, "ftp://x"), {"SIGNOFF_PUBLIC_URL": PUBLIC}, "--public-url must be"),
        (("", None, None), {"SIGNOFF_HOST": "10.1.2.3"}, "--host must be an interface"),
    ],
)
def test_each_bad_value_is_named_where_it_came_from(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    flags: tuple[str | None, int | None, str | None],
    environment: dict[str, str],
    says: str,
) -> None:
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(typer.Exit) as stopped:
        listen_settings(*flags)
    assert stopped.value.exit_code == 3
    said = capsys.readouterr().err
    assert said.startswith("error: ") and says in said and said.count("\n") == 1


def test_flags_then_environment_then_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SIGNOFF_HOST", "SIGNOFF_PORT", "SIGNOFF_PUBLIC_URL"):
        monkeypatch.setenv(name, "")  # empty: unset
    assert listen_settings(None, None, None) == Listen("127.0.0.1", 8000, "http://127.0.0.1:8000")
    monkeypatch.setenv("SIGNOFF_HOST", "::1")
    monkeypatch.setenv("SIGNOFF_PORT", " 9000 ")
    assert listen_settings(None, None, None).page_base == "http://[::1]:9000"
    monkeypatch.setenv("SIGNOFF_PUBLIC_URL", "https://env.test/x/")
    flagged = listen_settings("10.1.2.3", 7000, "https://flag.test")
    assert flagged == Listen("10.1.2.3", 7000, "https://flag.test")
    assert listen_settings(None, None, None) == Listen("::1", 9000, "https://env.test/x")


def test_pending_piped_is_tab_separated_and_whole(served: Server) -> None:
    agent = agent_token(served, "piper")
    call = {"session_id": "pipe", "tool_name": "shell", "tool_args": {"command": LONG}}
    made = httpx.post(f"{served.base}{API}/requests", json=call, headers=bearer(agent))
    assert made.status_code == 201, made.text
    request_id = made.json()["id"]
    assert served.admin_token is not None
    remote = ("--server", served.base, "--token", served.admin_token)
    listed = signoff("pending", "--session", "pipe", *remote, env=served.env)
    assert listed.returncode == 0, listed.stderr
    header, row, *rest = listed.stdout.split("\n")
    assert rest == [""]
    assert header.split("\t") == list(COLUMNS)
    fields = row.split("\t")
    assert len(fields) == len(COLUMNS)
    assert fields[:5] == [request_id, "approval", "pending", "pipe", "piper"]
    # the whole command, its tab, newline and ESC shown as escapes, not cut
    assert fields[5] == 'shell {"command": "echo ' + "x" * 300 + '\\tand\\na\\u001b[2Jline"}'
    assert "\x1b" not in listed.stdout and "…" not in listed.stdout
    as_json = signoff("pending", "--session", "pipe", "--json", *remote, env=served.env)
    assert [r["tool_args"]["command"] for r in json.loads(as_json.stdout)] == [LONG]


def test_mcp_proxy_reads_the_public_url_from_the_environment(served: Server) -> None:
    env = {**served.env, "SIGNOFF_PUBLIC_URL": "javascript:alert(1)"}
    done = signoff("mcp-proxy", "--db", served.db, "--", "true", env=env)
    assert done.returncode == 3 and "must be an http(s) URL" in done.stderr
