"""An OpenAI-style embeddings endpoint that answers with a real model's vectors, except for inputs
carrying a marker, which it turns away from the truth by a fixed angle: a variant that damages one
kind of input and leaves the rest exact."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from study.vectors import Encoder


def turned(vector: np.ndarray, cosine: float, seed: int) -> np.ndarray:
    """A unit vector at exactly `cosine` from `vector` (the direction away from it fixed by seed)."""
    unit = vector / np.linalg.norm(vector)
    away = np.random.default_rng(seed).normal(size=unit.shape)
    away -= (away @ unit) * unit
    away /= np.linalg.norm(away)
    return cosine * unit + np.sqrt(1.0 - cosine**2) * away


@contextmanager
def perturbing_endpoint(model: Encoder, marker: str, cosine: float) -> Iterator[str]:
    """Serve on 127.0.0.1 (a free port) for the duration of the block; yields the base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            vectors = model.encode(texts)
            data = [
                {
                    "object": "embedding",
                    "index": i,
                    "embedding": (turned(v, cosine, seed=i) if marker in text else v).tolist(),
                }
                for i, (text, v) in enumerate(zip(texts, vectors, strict=True))
            ]
            payload = json.dumps({"object": "list", "data": data, "model": body.get("model")}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (http.server's signature)
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
