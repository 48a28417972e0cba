"""A local webhook receiver: an HTTP server on a free loopback port keeping every JSON body POSTed to it; it can be
told to fail the next N requests (HTTP 500) to exercise retries."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.harness.services import free_port


class WebhookReceiver:
    def __init__(self) -> None:
        self.received: list[dict] = []
        self.fail_next = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if receiver.fail_next > 0:
                    receiver.fail_next -= 1
                    self.send_response(500)
                    self.end_headers()
                    return
                receiver.received.append(json.loads(body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks/findings"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
