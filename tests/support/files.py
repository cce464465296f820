"""A local HTTP server for remote attachments' encrypted payloads, in a thread."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Files:
    """What the server answers, by path, and how often each path was asked."""

    def __init__(self) -> None:
        self.bodies: dict[str, bytes] = {}
        self.hits: dict[str, int] = {}
        self.release = threading.Event()  # ends the slow path's wait


@contextmanager
def serve(files: Files) -> Iterator[str]:
    """Serve `files` on 127.0.0.1 (`/slow` answers nothing until released); yields the
    base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            files.hits[self.path] = files.hits.get(self.path, 0) + 1
            if self.path == "/slow":
                files.release.wait(30)
                return
            body = files.bodies.get(self.path)
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        files.release.set()
        server.shutdown()
        server.server_close()
