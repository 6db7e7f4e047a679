"""A stand-in for the model server: replays recorded responses, byte for byte.

deploy/docker-compose.standin.yml runs it in place of llama-server, so the compose topology can
be tried (and is tested) without a model or a GPU. ``POST /v1/chat/completions`` answers with
the recording named by the request's ``model`` (``<model>.sse`` in the recordings folder, one
SSE event per write); ``GET /v1/models`` lists the recordings, ``GET /health`` answers as
llama-server's does. The standard library only, so the image needs nothing installed.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType


class ReplayHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    recordings: Path
    delay: float

    def do_GET(self) -> None:
        if self.path == "/health":
            self.send_json(HTTPStatus.OK, {"status": "ok"})
        elif self.path == "/v1/models":
            names = sorted(p.stem for p in self.recordings.glob("*.sse"))
            self.send_json(
                HTTPStatus.OK,
                {"object": "list", "data": [{"id": n, "object": "model"} for n in names]},
            )
        else:
            self.send_error_json(HTTPStatus.NOT_FOUND, f"no route {self.path}")

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path != "/v1/chat/completions":
            self.send_error_json(HTTPStatus.NOT_FOUND, f"no route {self.path}")
            return
        try:
            model = str(json.loads(body).get("model", ""))
        except (ValueError, AttributeError):
            self.send_error_json(HTTPStatus.BAD_REQUEST, "the body is not a JSON object")
            return
        recording = self.recordings / f"{model}.sse"
        # The name comes from a client: only a plain file name directly in the folder.
        if "/" in model or not recording.is_file():
            self.send_error_json(HTTPStatus.NOT_FOUND, f"no recording named {model!r}")
            return
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for event in recording.read_bytes().split(b"\n\n"):
            if event.strip():
                self.write_chunk(event + b"\n\n")
                time.sleep(self.delay)
        self.write_chunk(b"")

    def write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def send_json(self, status: HTTPStatus, value: object) -> None:
        body = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def send_error_json(self, status: HTTPStatus, message: str) -> None:
        self.send_json(status, {"error": {"message": message, "type": "not_found_error"}})

    def log_message(self, format: str, *args: object) -> None:
        sys.stderr.write(f"replay-upstream: {format % args}\n")


def main() -> int:
    parser = argparse.ArgumentParser(prog="replay-upstream", description=__doc__)
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--recordings", type=Path, default=Path("/recordings"))
    parser.add_argument("--delay", type=float, default=0.01, help="seconds between events")
    args = parser.parse_args()
    ReplayHandler.recordings = args.recordings
    ReplayHandler.delay = args.delay
    server = ThreadingHTTPServer((args.host, args.port), ReplayHandler)
    server.daemon_threads = True

    # As PID 1 in a container, a signal without a handler is ignored: stop on SIGTERM.
    def stop(signum: int, frame: FrameType | None) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    print(f"replay-upstream: serving {args.recordings} on {args.host}:{args.port}", flush=True)
    server.serve_forever()
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
