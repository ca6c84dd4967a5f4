"""A loopback OpenAI-compatible HTTP server for tests and benchmarks of the API backend.

Several tests and bench/bench_llm_parallel.py need a real server on 127.0.0.1 that answers
chat-completions requests the way each of them chooses (well, slowly, wrongly, in a trickle).
The plumbing they share lives here; each keeps its answer logic in a `respond` method.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Loopback(ThreadingHTTPServer):
    """A server on a free port (or `port`) of 127.0.0.1 that answers each POST with `respond` and each GET
    with `respond_get`; as a context manager it serves from a daemon thread and is shut down on exit."""

    daemon_threads = True
    request_queue_size = 1024  # many connections at once

    def __init__(self, port: int = 0, host: str = "127.0.0.1"):
        super().__init__((host, port), _Handler)
        self.lock = threading.Lock()  # guards the state a subclass keeps across requests

    @property
    def url(self) -> str:
        """The base_url of the API."""
        return f"http://127.0.0.1:{self.server_port}/v1"

    def respond(self, payload: dict, headers) -> tuple:
        """(status, body) or (status, body, extra headers) for a request's JSON payload; the body is
        bytes, a dict (sent as JSON) or an iterable of byte chunks, each sent as it comes (then give
        Content-Length in the extra headers)."""
        raise NotImplementedError

    def respond_get(self, path: str, headers) -> tuple:
        """(status, body[, extra headers]) for a GET of `path`, as `respond`; a body iterable that
        stops before its Content-Length drops the connection there. Default: 404."""
        return 404, {"error": f"no {path}"}

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.server_port}"

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client hung up on a slow answer: fine
            super().handle_error(request, client_address)

    def __enter__(self):
        threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self._send(*self.server.respond(payload, self.headers))

    def do_GET(self):
        self._send(*self.server.respond_get(self.path, self.headers))

    def _send(self, status, body, *extra):
        body = json.dumps(body).encode() if isinstance(body, dict) else body
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        for key, value in (extra[0] if extra else {}).items():
            self.send_header(key, value)
        if isinstance(body, bytes):
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        for chunk in [body] if isinstance(body, bytes) else body:
            self.wfile.write(chunk)
            self.wfile.flush()


def chat_completion(content: str, steps=(), prompt_tokens: int | None = None) -> dict:
    """A chat-completions body answering `content`; with `steps`, one (token, logprob, top) per generated
    token, top a list of (token, logprob) alternatives, as `logprobs.content`."""
    choice = {"message": {"role": "assistant", "content": content}}
    if steps:
        choice["logprobs"] = {"content": [
            {"token": token, "logprob": logprob, "top_logprobs": [{"token": t, "logprob": lp} for t, lp in top]}
            for token, logprob, top in steps]}
    body = {"choices": [choice]}
    if prompt_tokens is not None:
        body["usage"] = {"prompt_tokens": prompt_tokens}
    return body
