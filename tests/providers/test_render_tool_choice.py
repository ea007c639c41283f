"""``tool_choice`` as each wire spells it (latch.providers.render): OpenAI chat, Responses and Anthropic Messages."""

from __future__ import annotations

import pytest

from latch.providers.render import WIRE_FORMATS, tool_choice_body


@pytest.mark.parametrize(
    "wire, choice, body",
    [
        ("openai-chat", "auto", "auto"),
        ("openai-chat", "required", "required"),
        ("openai-chat", "read_file", {"type": "function", "function": {"name": "read_file"}}),
        ("openai-responses", "none", "none"),
        ("openai-responses", "read_file", {"type": "function", "name": "read_file"}),
        ("anthropic-messages", "auto", {"type": "auto"}),
        ("anthropic-messages", "required", {"type": "any"}),
        ("anthropic-messages", "none", {"type": "none"}),
        ("anthropic-messages", "read_file", {"type": "tool", "name": "read_file"}),
    ],
)
def test_tool_choice_per_wire(wire, choice, body):
    assert wire in WIRE_FORMATS
    assert tool_choice_body(wire, choice) == body
