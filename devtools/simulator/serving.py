"""HTTP plumbing shared by the simulated Kubernetes API (``k8s_api``) and Prometheus (``prometheus_api``)."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive, quiet, and without Nagle's algorithm: headers and body leave in separate writes,
    and a client that delays its ACK (40 ms on Linux) would otherwise stall every response."""

    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, fmt, *args) -> None:  # quiet
        pass

    def send(self, code: int, body, ctype: str = "application/json") -> None:
        if isinstance(body, bytes):
            data = body
        elif isinstance(body, str):
            data = body.encode()
        else:
            data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class Server:
    """A threaded HTTP server on ``host:port`` (0: a free port) serving ``handler`` from a daemon thread."""

    def __init__(self, handler: type[Handler], host: str, port: int, name: str):
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self.host, self.port = self.httpd.server_address[:2]
        self.url = f"http://{self.host}:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, name=name, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
