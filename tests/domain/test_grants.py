"""Standing grants: a grant's args_pattern covers later calls only under the strict matcher."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from signoff.domain.grants import Grant

NOW = datetime(2025, 1, 1, tzinfo=UTC)


def grant(pattern: dict[str, str] | None) -> Grant:
    """A live session grant of write_file for agent bot in session s."""
    return Grant(
        id="grt_x",
        scope="session",
        tool_name="write_file",
        session_id="s",
        requested_by="bot",
        args_pattern=pattern,
        created_by="alice",
        created_at=NOW,
        expires_at=NOW + timedelta(hours=1),
        source_request_id="req_x",
    )


def covers(g: Grant, args: dict[str, object]) -> bool:
    """Whether ``g`` covers a write_file call by bot in session s with ``args`` now."""
    return g.covers(tool_name="write_file", session_id="s", requested_by="bot", args=args, now=NOW)


def test_a_path_grant_does_not_cover_an_escape_a_deeper_file_or_an_extra_argument() -> None:
    """/tmp/* covers /tmp/a but not /tmp/../root/..., /tmp/a/b, or /tmp/a with more args."""
    g = grant({"path": "/tmp/*"})
    assert covers(g, {"path": "/tmp/a"})
    assert not covers(g, {"path": "/tmp/../root/.ssh/authorized_keys"})
    assert not covers(g, {"path": "/tmp/a/b"})
    assert not covers(g, {"path": "/tmp/a", "mode": "append"})
    assert covers(grant({"path": "/tmp/**", "mode": "*"}), {"path": "/tmp/a/b", "mode": "w"})


def test_a_grant_without_a_pattern_covers_any_arguments() -> None:
    """args_pattern None is the approver's explicit "any arguments"."""
    assert covers(grant(None), {"path": "/anything", "x": 1})
