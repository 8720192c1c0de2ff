"""LangGraph: ask a person from inside a graph, and answer a paused graph through signoff.

Two halves, usable apart (:mod:`~signoff.integrations.langgraph.interrupts` and
:mod:`~signoff.integrations.langgraph.bridge`):

- Inside a graph: :func:`ask_human` pauses a node with ``interrupt()`` for structured
  feedback (S4: approve / edit with feedback and answers / reject) or a choice among options
  (S2), with a ``response_schema`` so a bad resume value is refused before it is saved.
  :class:`HumanFeedback` is a ready ``human_feedback`` node with its routing: approve and
  reject end the run, edit goes back to the agent node. It can review every agent turn
  (``always_require_feedback``) and offer the model a ``request_human_input`` tool
  (``enable_feedback_tool``).
- Outside it: :class:`LangGraphBridge` files one signoff request per interrupt of a paused
  thread (one per tool call for LangChain's ``HumanInTheLoopMiddleware``, in either
  interrupt mode) and, once people decided them, resumes the thread with
  ``Command(resume={interrupt_id: value})``. Every id is checked against the checkpoint's
  live interrupts first: LangGraph takes a map with a stale id as the resume *value* when
  one interrupt is pending. A batched interrupt always gets exactly one decision per action
  request, in order; an edit can never switch tools.

The bridge keeps a durable index in signoff's store: one :class:`~signoff.domain.tasks.Task`
per waiting thread (``agent="langgraph"``, the thread id in ``session_id``, one
:class:`~signoff.domain.tasks.PendingCall` per request), so a restarted process finds the
threads waiting on people with :meth:`LangGraphBridge.waiting`. LangGraph has no query for
that across threads.
"""

from signoff.integrations.langgraph.bridge import (
    AGENT_NAME,
    AskKind,
    GraphAsk,
    LangGraphBridge,
    MiddlewareDecisionType,
    Resumed,
    batch_response,
    check_middleware_decision,
    graph_tool_schemas,
    middleware_decision,
)
from signoff.integrations.langgraph.interrupts import (
    FEEDBACK_TOOL,
    FeedbackState,
    HumanChoice,
    HumanDecisionType,
    HumanFeedback,
    HumanResponse,
    QuestionLike,
    ask_human,
)

__all__ = [
    "AGENT_NAME",
    "FEEDBACK_TOOL",
    "AskKind",
    "FeedbackState",
    "GraphAsk",
    "HumanChoice",
    "HumanDecisionType",
    "HumanFeedback",
    "HumanResponse",
    "LangGraphBridge",
    "MiddlewareDecisionType",
    "QuestionLike",
    "Resumed",
    "ask_human",
    "batch_response",
    "check_middleware_decision",
    "graph_tool_schemas",
    "middleware_decision",
]
