"""EventClassTable: the value of an event's class by the first of its bases the class is, in order, kept per class."""

from __future__ import annotations

from latch.events import AssistantMessage, EventClassTable, SystemNote, ToolResult, Usage, UserMessage


class _Note(SystemNote):
    pass


class _First:
    pass


class _Second:
    pass


class _Both(_Second, _First):
    pass


def test_a_class_takes_the_value_of_its_first_base_and_a_stranger_the_default():
    table = EventClassTable(
        ((AssistantMessage, "calls"), (ToolResult, "result"), ((UserMessage, Usage), "user")), "none"
    )
    assert table[AssistantMessage] == "calls" and table[ToolResult] == "result"
    assert table[UserMessage] == "user" and table[Usage] == "user"  # a tuple of classes
    assert table[_Note] == "none" and table[int] == "none"
    assert dict(table) == {
        AssistantMessage: "calls",
        ToolResult: "result",
        UserMessage: "user",
        Usage: "user",
        _Note: "none",
        int: "none",
    }  # each class worked out once, then kept


def test_the_order_of_the_bases_decides_for_a_class_of_two():
    assert EventClassTable(((_First, 1), (_Second, 2)), 0)[_Both] == 1
    assert EventClassTable(((_Second, 2), (_First, 1)), 0)[_Both] == 2
    table = EventClassTable(((_First, 1),), 0)
    assert table.get(_Second) is None and table[_Second] == 0 and table.get(_Second) == 0
