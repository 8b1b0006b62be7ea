"""``GET /metrics`` (Prometheus text) and ``GET /metrics.json`` for a ``MetricsRegistry``, on a daemon
thread of the process (the standard library's HTTP server: scrapes are rare and small)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafka_controller.controller.metrics import MetricsRegistry


class MetricsServer:
    """The HTTP endpoint of ``serve_metrics``: ``.port`` is the bound port; ``close()`` stops it."""

    def __init__(self, registry: MetricsRegistry, host: str, port: int) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        import orjson

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path in ("/metrics", "/metrics/"):
                    body = registry.render_prometheus().encode()
                    ctype = "text/plain; version=0.0.4; charset=utf-8"
                elif self.path == "/metrics.json":
                    body = orjson.dumps(registry.snapshot())
                    ctype = "application/json"
                else:
                    self.send_error(404, "only /metrics and /metrics.json are served")
                    return
                self.send_response(200)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # scrapes are not news
                return None

        self._httpd = ThreadingHTTPServer((host, port), Handler)
        self._httpd.daemon_threads = True
        self.host = host
        self.port: int = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name=f"metrics-http-{self.port}", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()


def serve_metrics(registry: MetricsRegistry, host: str = "127.0.0.1", port: int = 0) -> MetricsServer:
    """Serve ``GET /metrics`` (Prometheus text) and ``GET /metrics.json`` on a daemon thread."""
    return MetricsServer(registry, host, port)
