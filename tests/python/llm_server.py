"""A small OpenAI-compatible chat-completions server over a local causal LM, for what
``transformers serve`` cannot do in a test.

The endpoint tests run against ``transformers serve`` itself (tests/python/infer/
test_annotate.py). This server is kept only for what that server cannot produce: failures on
demand (a 429, a slow answer past the client's timeout, the process dying mid-run), token
log-probabilities (``transformers serve`` ignores ``logprobs``/``top_logprobs``), and a count
of the requests in flight at once (the bound on concurrency across Dask workers).

``python llm_server.py MODEL_DIR PORT_FILE [--fail-429 N] [--die-after K] [--slow S]
[--inflight FILE] [--retry-after V] [--reject TEXT] [--non-json TEXT] [--no-choices TEXT]
[--log FILE] [--port P]`` serves ``GET /v1/models`` and ``POST /v1/chat/completions`` on 127.0.0.1
(port P, default a free one, written to PORT_FILE). The answer is the model's own greedy generation from the
chat template (at most ``max_tokens`` tokens, default 16), as any server would give it; with
``logprobs: true`` each generated token comes with its log-probability and the
``top_logprobs`` most likely tokens at its place, the end-of-sequence token included (as
vLLM reports it). Faults: the first N completions answer 429; the process exits after K
completions; the first completion sleeps S seconds. ``--inflight FILE``: the most requests
seen in flight at once, rewritten as it grows. A flaky server, by document (a request whose
last message contains TEXT; each option may be repeated): ``--reject`` answers 429 every time,
``--non-json`` answers 200 with an HTML page, ``--no-choices`` answers 200 with JSON that has no
``choices``; ``--retry-after V`` sends the header ``Retry-After: V`` with every 429. ``--log
FILE``: one JSON line per completion request (``t``, the server's time.time(), and ``status``),
so a test counts the requests the server saw.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def generate(model, tok, messages, max_tokens: int, top: int, lock) -> tuple[str, list]:
    """Greedy generation; the answer's text and its logprobs content (OpenAI's shape)."""
    import torch

    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    ids = tok(text, add_special_tokens=False)["input_ids"]
    out, content = [], []
    with lock, torch.no_grad():
        for _ in range(max_tokens):
            logp = torch.log_softmax(model(torch.tensor([ids + out])).logits[0, -1].double(), -1)
            nxt = int(logp.argmax())
            vals, idx = torch.topk(logp, top)
            content.append({"token": tok.decode([nxt]), "logprob": float(logp[nxt]),
                            "top_logprobs": [{"token": tok.decode([int(i)]),
                                              "logprob": float(v)} for v, i in zip(vals, idx)]})
            if nxt == tok.eos_token_id:
                break
            out.append(nxt)
    return tok.decode(out, skip_special_tokens=True), content


def main() -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("port_file")
    ap.add_argument("--fail-429", type=int, default=0)
    ap.add_argument("--die-after", type=int, default=0)
    ap.add_argument("--slow", type=float, default=0.0)
    ap.add_argument("--inflight", default=None)
    ap.add_argument("--retry-after", default=None)
    ap.add_argument("--reject", action="append", default=[])
    ap.add_argument("--non-json", action="append", default=[])
    ap.add_argument("--no-choices", action="append", default=[])
    ap.add_argument("--log", default=None)
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args()
    tok = AutoTokenizer.from_pretrained(a.model)
    model = AutoModelForCausalLM.from_pretrained(a.model).eval()
    lock, count = threading.Lock(), threading.Lock()
    state = {"calls": 0, "done": 0, "now": 0, "most": 0}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, code, obj, kind="application/json"):
            body = obj.encode() if isinstance(obj, str) else json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            if code == 429 and a.retry_after is not None:
                self.send_header("Retry-After", a.retry_after)
            self.end_headers()
            self.wfile.write(body)
            if a.log and self.command == "POST":
                with count, open(a.log, "a") as f:
                    f.write(json.dumps({"t": time.time(), "status": code}) + "\n")

        def do_GET(self):
            self._send(200, {"object": "list", "data": [{"id": a.model, "object": "model"}]})

        def do_POST(self):
            req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with count:
                state["calls"] += 1
                calls = state["calls"]
                state["now"] += 1
                if state["now"] > state["most"]:
                    state["most"] = state["now"]
                    if a.inflight:
                        with open(a.inflight, "w") as f:
                            f.write(str(state["most"]))
            try:
                self._answer(req, calls)
            finally:
                with count:
                    state["now"] -= 1

        def _answer(self, req, calls):
            last = str(req["messages"][-1].get("content", ""))
            if calls <= a.fail_429 or any(t in last for t in a.reject):
                return self._send(429, {"error": "rate limited"})
            if any(t in last for t in a.non_json):
                return self._send(200, "<html><body>502 Bad Gateway</body></html>", "text/html")
            if any(t in last for t in a.no_choices):
                return self._send(200, {"object": "error", "message": "overloaded"})
            if a.slow and calls == a.fail_429 + 1:
                time.sleep(a.slow)
            text, content = generate(model, tok, req["messages"], req.get("max_tokens") or 16,
                                     req.get("top_logprobs") or 1, lock)
            choice = {"index": 0, "message": {"role": "assistant", "content": text},
                      "finish_reason": "stop"}
            if req.get("logprobs"):
                choice["logprobs"] = {"content": content}
            self._send(200, {"choices": [choice]})
            with count:
                state["done"] += 1
                done = state["done"]
            if a.die_after and done >= a.die_after:
                self.wfile.flush()
                os._exit(0)

    server = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    with open(a.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(a.port_file + ".tmp", a.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
