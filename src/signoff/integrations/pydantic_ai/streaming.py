"""A FunctionModel that cannot stream, made to stream: what a hosted task runs it with.

A task streams its agent's run (its AG-UI events go out as the model writes); every
provider's model streams, a pydantic-ai ``FunctionModel`` only with a ``stream_function``.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from typing import Any

try:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, TextPart, ToolCallPart
    from pydantic_ai.models.function import (
        AgentInfo,
        DeltaToolCall,
        DeltaToolCalls,
        FunctionModel,
    )
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "hosted agent runs need pydantic-ai: pip install 'signoff[pydantic-ai]'"
    ) from exc

__all__ = ["streaming_stand_in"]


def streaming_stand_in(agent: Agent[Any, Any]) -> FunctionModel | None:
    """A stand-in for a FunctionModel that cannot stream: its answers, streamed whole.

    A task streams its agent's run; every provider's model streams, a FunctionModel only
    with a ``stream_function``. None when the agent's model needs no stand-in.
    """
    model = agent.model
    if not isinstance(model, FunctionModel) or model.stream_function is not None:
        return None
    answer = model.function
    if answer is None:
        return None

    async def stream(
        messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        response = answer(messages, info)
        if inspect.isawaitable(response):
            response = await response
        calls: DeltaToolCalls = {}
        for index, part in enumerate(response.parts):
            if isinstance(part, TextPart):
                yield part.content
            elif isinstance(part, ToolCallPart):
                calls[index] = DeltaToolCall(
                    part.tool_name, part.args_as_json_str(), tool_call_id=part.tool_call_id
                )
        if calls:
            yield calls

    return FunctionModel(answer, stream_function=stream, model_name=model.model_name)
