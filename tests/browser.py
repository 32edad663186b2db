"""A headless Chromium driven through the Chrome DevTools Protocol, for testing HTML reports.

Only what the tests need: open a file, run JavaScript, click, take a screenshot, and
record every console message, uncaught exception and network request the page makes.
"""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import websocket

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

# Flags for a closed network: no background traffic, no first-run work (see the env notes).
_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--mute-audio", "--window-size=1280,900",
)


def find_chromium() -> str | None:
    return next((path for path in map(shutil.which, CHROMIUM_NAMES) if path), None)


class Browser:
    def __init__(self, executable: str) -> None:
        self._profile = tempfile.mkdtemp(prefix="dynscope-chromium-")
        self._process = subprocess.Popen(
            [executable, *_FLAGS, f"--user-data-dir={self._profile}", "--remote-debugging-port=0", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        port = self._wait_for_port()
        target = self._page_target(port)
        self._ws = websocket.create_connection(target, timeout=60, suppress_origin=True)
        self._ids = itertools.count(1)
        self.console: list[dict[str, Any]] = []  # console.* calls and log entries
        self.exceptions: list[dict[str, Any]] = []
        self.requests: list[str] = []  # URLs of every request the page made
        for domain in ("Page", "Runtime", "Network", "Log"):
            self.send(f"{domain}.enable")

    def _wait_for_port(self) -> int:
        marker = Path(self._profile) / "DevToolsActivePort"
        deadline = time.time() + 60
        while time.time() < deadline:
            if marker.exists() and marker.read_text().strip():
                return int(marker.read_text().split()[0])
            if self._process.poll() is not None:
                raise RuntimeError(f"chromium exited with {self._process.returncode} before it listened")
            time.sleep(0.1)
        raise RuntimeError("chromium did not open its debugging port")

    @staticmethod
    def _page_target(port: int) -> str:
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as response:
            targets = json.load(response)
        return next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        message_id = next(self._ids)
        self._ws.send(json.dumps({"id": message_id, "method": method, "params": params}))
        while True:
            message = json.loads(self._ws.recv())
            if message.get("id") == message_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self._record(message)

    def _record(self, message: dict[str, Any]) -> None:
        method, params = message.get("method"), message.get("params", {})
        if method == "Runtime.consoleAPICalled":
            self.console.append({"type": params["type"], "text": " ".join(str(a.get("value", a.get("description")))
                                                                         for a in params.get("args", []))})
        elif method == "Log.entryAdded":
            self.console.append({"type": params["entry"]["level"], "text": params["entry"]["text"]})
        elif method == "Runtime.exceptionThrown":
            self.exceptions.append(params["exceptionDetails"])
        elif method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])

    def open(self, path: Path) -> None:
        """Load a page; what was recorded for the previous one is forgotten."""
        self.console.clear()
        self.exceptions.clear()
        self.requests.clear()
        self.send("Page.navigate", url=path.resolve().as_uri())
        self.wait_for("document.readyState === 'complete'")

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, condition: str, timeout: float = 30) -> None:
        deadline = time.time() + timeout
        while not self.evaluate(f"Boolean({condition})"):
            if time.time() > deadline:
                raise TimeoutError(f"waited {timeout} s for {condition}")
            time.sleep(0.05)

    def click(self, selector: str) -> None:
        if not self.evaluate(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); "
                             f"if (!e) return false; e.scrollIntoView(); e.click(); return true; }})()"):
            raise AssertionError(f"nothing to click at {selector}")

    def press(self, key: str) -> None:
        self.send("Input.dispatchKeyEvent", type="keyDown", key=key, text=key if len(key) == 1 else "")
        self.send("Input.dispatchKeyEvent", type="keyUp", key=key)

    def visible(self, selector: str) -> bool:
        return bool(self.evaluate(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); "
                                  f"return !!e && e.checkVisibility(); }})()"))

    def screenshot(self, path: Path) -> None:
        data = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=False)["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self._ws.close()
        finally:
            self._process.terminate()
            try:
                self._process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._process.kill()
            shutil.rmtree(self._profile, ignore_errors=True)

    def errors(self) -> list[str]:
        """Console errors and uncaught exceptions, as text."""
        texts = [m["text"] for m in self.console if m["type"] in ("error", "assert")]
        texts += [json.dumps(e.get("exception", {}).get("description") or e.get("text")) for e in self.exceptions]
        return texts



def open_browser() -> Iterator[Browser]:
    """A module-scoped fixture's body: one Chromium for the module's tests, closed after them."""
    chromium = find_chromium()
    assert chromium, "no Chromium to open the report with"
    b = Browser(chromium)
    yield b
    b.close()
