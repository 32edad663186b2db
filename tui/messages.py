"""Requests to show something elsewhere in the app. Panes post them; the app routes them,
so no pane needs to know where another one lives."""

from __future__ import annotations

from textual.message import Message


class ShowBreak(Message):
    def __init__(self, event_id: int) -> None:
        super().__init__()
        self.event_id = event_id  # any occurrence of the break


class ShowStage(Message):
    def __init__(self, compile_id: str, stage_key: str | None = None, node: str | None = None) -> None:
        super().__init__()
        self.compile_id = compile_id
        self.stage_key = stage_key  # None: the compile's first stage
        self.node = node  # an FX node to mark in the stage


class ShowGuards(Message):
    def __init__(self, compile_id: str) -> None:
        super().__init__()
        self.compile_id = compile_id


class ShowKernel(Message):
    def __init__(self, compile_id: str, kernel_key: str) -> None:
        super().__init__()
        self.compile_id = compile_id
        self.kernel_key = kernel_key


class ShowSource(Message):
    def __init__(self, file: str | None, line: int | None, code: str | None = None) -> None:
        super().__init__()
        self.file = file
        self.line = line
        self.code = code  # the line's text as torch recorded it, shown if the file can't be read
