"""The public front: ``import signoff`` gives exactly what ``__all__`` promises."""

from __future__ import annotations

import subprocess
import sys

import signoff

EXPECTED = {
    "AsyncClient",
    "Client",
    "Anchor",
    "Answer",
    "ApprovalRequest",
    "Approve",
    "ArgsMismatch",
    "AuditChainBroken",
    "AuditEntry",
    "BatchOutcome",
    "CallerError",
    "ChainReport",
    "ChoiceRequest",
    "Choose",
    "Decision",
    "DecisionRecord",
    "Event",
    "EventBus",
    "Executor",
    "FilePreview",
    "Grant",
    "GrantNotFound",
    "InvalidDecision",
    "InvalidRequest",
    "InvalidTransition",
    "LocalBus",
    "MemoryStore",
    "NewRequest",
    "NotAllowed",
    "Page",
    "Policy",
    "PolicyDecision",
    "PolicyError",
    "Principal",
    "Question",
    "QuestionsRequest",
    "Reject",
    "Request",
    "RequestNotFound",
    "RequestQuery",
    "Respond",
    "RuntimeFailure",
    "SQLiteStore",
    "Service",
    "SignoffError",
    "Status",
    "Store",
    "StoreUnavailable",
    "Submitted",
    "Subscription",
    "TaskNotFound",
    "TokenNotFound",
    "ToolRegistry",
    "Unauthenticated",
    "__version__",
    "args_digest",
}


def test_all_is_exactly_the_public_front() -> None:
    """__all__ lists exactly the expected names, and each one resolves."""
    assert set(signoff.__all__) == EXPECTED
    assert len(signoff.__all__) == len(EXPECTED)
    for name in signoff.__all__:
        assert getattr(signoff, name) is not None


def test_import_signoff_imports_no_agent_framework() -> None:
    """A bare ``import signoff`` loads none of the optional agent frameworks or servers."""
    code = (
        "import sys, signoff\n"
        "heavy = {'pydantic_ai', 'langgraph', 'langchain_core', 'agents', 'mcp', 'fastapi',"
        " 'httpx', 'uvicorn'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
