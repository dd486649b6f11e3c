"""Headless Chromium (Debian's `chromium`, installed by `make chromium`) driven over the DevTools protocol: open a
local page, wait for its load event, keep every console message, uncaught exception and browser log entry, and
evaluate an expression in the page.

    with Browser() as browser:
        page = browser.open(path, "document.title")
        page.value, page.messages          # the expression's value; console, exception and log entries
"""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from websockets.sync.client import connect

CHROMIUM = "/usr/bin/chromium"
# As root Chromium needs --no-sandbox; the machine has no network, so nothing may reach out (updates, sync, ...).
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
         "--remote-debugging-port=0", "--window-size=1200,900")
START_TIMEOUT_S = 60.0


@dataclass
class Loaded:
    value: Any
    messages: list[dict[str, Any]] = field(default_factory=list)   # {"kind", "level", "text"}


class Browser:
    """One Chromium process with a fresh profile directory; `open` loads pages in its first tab."""

    def __init__(self) -> None:
        if not Path(CHROMIUM).exists():
            raise RuntimeError(f"{CHROMIUM} is missing: `make chromium` installs Debian's chromium")
        self.profile = tempfile.mkdtemp(prefix="blockheat-chromium-")
        self.proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.port = self._port()
        self._id = 0

    def _port(self) -> int:
        """The DevTools port, from the DevToolsActivePort file Chromium writes into its profile directory."""
        deadline = time.monotonic() + START_TIMEOUT_S
        active = Path(self.profile) / "DevToolsActivePort"
        while time.monotonic() < deadline and self.proc.poll() is None:
            lines = active.read_text().splitlines() if active.exists() else []
            if lines and lines[0].isdigit():
                return int(lines[0])
            time.sleep(0.05)
        raise RuntimeError(f"chromium did not start (exit code {self.proc.poll()})")

    def _page_socket(self) -> str:
        from urllib.request import urlopen

        with urlopen(f"http://127.0.0.1:{self.port}/json/list", timeout=10) as answer:
            targets = json.load(answer)
        return next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")

    def open(self, path: Path, expression: str, *, timeout_s: float = 60.0) -> Loaded:
        """Loads file `path`, waits for its load event, evaluates `expression` (its JSON value is returned)."""
        messages: list[dict[str, Any]] = []
        with connect(self._page_socket(), max_size=None, open_timeout=10) as ws:
            def call(method: str, **params: Any) -> dict[str, Any]:
                self._id += 1
                ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
                while True:
                    msg = json.loads(ws.recv(timeout=timeout_s))
                    if msg.get("id") == self._id:
                        if "error" in msg:
                            raise RuntimeError(f"{method}: {msg['error']}")
                        return msg["result"]
                    keep(msg)

            def keep(msg: dict[str, Any]) -> None:
                method, params = msg.get("method"), msg.get("params", {})
                if method == "Runtime.consoleAPICalled":
                    text = " ".join(str(a.get("value", a.get("description"))) for a in params["args"])
                    messages.append({"kind": "console", "level": params["type"], "text": text})
                elif method == "Runtime.exceptionThrown":
                    messages.append({"kind": "exception", "level": "error",
                                     "text": params["exceptionDetails"].get("text", "")})
                elif method == "Log.entryAdded":
                    entry = params["entry"]
                    messages.append({"kind": f"log:{entry['source']}", "level": entry["level"], "text": entry["text"]})

            for domain in ("Page", "Runtime", "Log"):
                call(f"{domain}.enable")
            call("Page.navigate", url=path.resolve().as_uri())
            deadline = time.monotonic() + timeout_s
            while True:
                msg = json.loads(ws.recv(timeout=max(deadline - time.monotonic(), 0.1)))
                if msg.get("method") == "Page.loadEventFired":
                    break
                keep(msg)
            result = call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
            if "exceptionDetails" in result:
                raise RuntimeError(f"evaluate: {result['exceptionDetails']}")
            return Loaded(result["result"].get("value"), messages)

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
