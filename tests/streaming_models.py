"""FunctionModels that stream: a hosted task streams its agent's run (AG-UI), so its model must."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

Respond = Callable[[list[ModelMessage], AgentInfo], ModelResponse]


def streamed(
    respond: Respond,
) -> Callable[[list[ModelMessage], AgentInfo], AsyncIterator[str | DeltaToolCalls]]:
    """``respond``'s answer as a stream: text in word-sized deltas, then each tool call whole."""

    async def stream(
        messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        response = respond(messages, info)
        calls: DeltaToolCalls = {}
        for index, part in enumerate(response.parts):
            if isinstance(part, TextPart):
                words = part.content.split(" ")
                for at, word in enumerate(words):
                    yield word if at == len(words) - 1 else word + " "
            elif isinstance(part, ToolCallPart):
                calls[index] = DeltaToolCall(
                    name=part.tool_name,
                    json_args=part.args_as_json_str(),
                    tool_call_id=part.tool_call_id,
                )
        if calls:
            yield calls

    return stream


def streaming(respond: Respond) -> FunctionModel:
    """A FunctionModel answering with ``respond``, run or streamed."""
    return FunctionModel(respond, stream_function=streamed(respond))
