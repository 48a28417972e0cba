"""Headless Chromium driven over the DevTools protocol (Debian `chromium`, no extra driver).

    browser = Browser.start()              # or the `browser` fixture
    browser.set_cookie("sessionid", key, url)
    browser.goto(url); browser.wait_for("document.querySelectorAll('.js-plotly-plot').length >= 2")
    browser.screenshot(path); browser.close()
"""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import websocket

from tests.harness.services import free_port

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


def chromium_path() -> str | None:
    return next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)


class Browser:
    def __init__(self, process: subprocess.Popen[bytes], ws: websocket.WebSocket, profile: str) -> None:
        self.process, self.ws, self.profile = process, ws, profile
        self._ids = itertools.count(1)

    @classmethod
    def start(cls, binary: str, *, width: int = 1400, height: int = 1000, timeout: float = 30.0) -> Browser:
        port, profile = free_port(), tempfile.mkdtemp(prefix="chromium-")
        process = subprocess.Popen(
            [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             f"--remote-debugging-port={port}", "--remote-allow-origins=*", f"--user-data-dir={profile}",
             f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=2) as r:
                    pages = [t for t in json.load(r) if t.get("type") == "page"]
                if pages:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise RuntimeError("chromium did not start its DevTools endpoint")
            time.sleep(0.2)
        browser = cls(process, websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=timeout), profile)
        browser.send("Page.enable")
        return browser

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        msg_id = next(self._ids)
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def set_cookie(self, name: str, value: str, url: str) -> None:
        self.send("Network.setCookie", name=name, value=value, url=url)

    def goto(self, url: str) -> None:
        self.send("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'")

    def eval(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.eval(expression):
            if time.monotonic() > deadline:
                raise TimeoutError(f"still false after {timeout}s: {expression}")
            time.sleep(0.1)

    def screenshot(self, path: Path) -> Path:
        data = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
            shutil.rmtree(self.profile, ignore_errors=True)
