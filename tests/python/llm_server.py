"""A small OpenAI-compatible chat-completions server over a local causal LM, for tests.

``python llm_server.py MODEL_DIR PORT_FILE [--fail-429 N] [--die-after K] [--slow S] [--garbage]``
serves ``GET /v1/models`` and ``POST /v1/chat/completions`` on 127.0.0.1 (a free port,
written to PORT_FILE). The answer is ``{"label": L}``, L the enum label the model scores
highest (quantformer's own scoring), or with ``--garbage`` the plain text ``maybe``.
Faults: the first N completions answer 429; the process exits after K completions; the first
completion sleeps S seconds (a client timeout).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

from quantformer.models.llm import LocalLM  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("port_file")
    ap.add_argument("--fail-429", type=int, default=0)
    ap.add_argument("--die-after", type=int, default=0)
    ap.add_argument("--slow", type=float, default=0.0)
    ap.add_argument("--garbage", action="store_true")
    a = ap.parse_args()
    llm = LocalLM(a.model)
    state = {"calls": 0, "done": 0}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, code, obj):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            self._send(200, {"object": "list", "data": [{"id": a.model, "object": "model"}]})

        def do_POST(self):
            req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state["calls"] += 1
            if state["calls"] <= a.fail_429:
                return self._send(429, {"error": "rate limited"})
            if a.slow and state["calls"] == a.fail_429 + 1:
                time.sleep(a.slow)
            schema = req.get("response_format", {}).get("json_schema", {}).get("schema", {})
            labels = schema.get("properties", {}).get("label", {}).get("enum")
            msgs = req["messages"]
            if labels and not a.garbage:
                text = msgs[-1]["content"]
                head, tail = llm.split_prompt(msgs[:-1] + [{"role": "user",
                                                            "content": "\0DOCUMENT\0"}])
                p, d = llm.sequences(head, text.split("\n", 1)[1], tail)
                lp = llm.score(p, d, llm.label_ids(labels))
                content = json.dumps({"label": labels[lp.index(max(lp))]})
            else:
                content = "maybe"
            self._send(200, {"choices": [{"index": 0, "message": {"role": "assistant",
                                                                  "content": content}}]})
            state["done"] += 1
            if a.die_after and state["done"] >= a.die_after:
                self.wfile.flush()
                os._exit(0)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(a.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(a.port_file + ".tmp", a.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
