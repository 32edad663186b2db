"""Driving the terminal UI in tests: Textual's Pilot on a real capture."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

from rich.console import Console
from textual.widgets import Static

from dynscope.model import Capture
from dynscope.tui.app import DynscopeApp


def drive(path: Path, script, *, size: tuple[int, int] = (80, 24), **options) -> None:
    """Run the app on a capture and hand ``script(app, pilot)`` the controls."""

    async def main() -> None:
        with Capture.open(str(path)) as capture:
            app = DynscopeApp(capture, **options)
            async with app.run_test(size=size) as pilot:
                await settle(app, pilot)
                await script(app, pilot)

    asyncio.run(main())


async def settle(app: DynscopeApp, pilot) -> None:
    """Until every worker has finished and what it posted has been handled."""
    while True:
        await app.workers.wait_for_complete()
        await pilot.pause()
        if not any(w.is_running for w in app.workers):
            return


def text_of(static: Static) -> str:
    """What a Static shows, as plain text (tables included)."""
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(static.content, soft_wrap=True)
    return console.export_text()
