"""The worker verb `serve` (issue 11): requests in, replies out, verbs as the CLI, model cache,
and a child that dies with its parent (issue 17)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
from toydata import toy_frame

from quantformer.train.finetune import finetune
from quantformer.cli.serve import _argv
from quantformer.infer.cache import ModelCache

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _env(**extra):
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"), OMP_NUM_THREADS="1",
               HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    env.pop("QUANTFORMER_PARENT_PID", None)
    env.update(extra)
    return env


class Worker:
    """``python -m quantformer serve`` with replies on a pipe of their own, as R runs it."""

    def __init__(self, tmp_path):
        read_end, write_end = os.pipe()
        self.err = open(tmp_path / "worker-stderr.txt", "w+")
        self.out = open(tmp_path / "worker-stdout.txt", "w+")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "quantformer", "serve", "--reply-fd", str(write_end)],
            stdin=subprocess.PIPE, stdout=self.out, stderr=self.err, text=True,
            pass_fds=(write_end,), env=_env(), cwd=tmp_path)
        os.close(write_end)
        self.replies = os.fdopen(read_end, "r")
        self.ready = json.loads(self.replies.readline())

    def ask(self, rid, verb, *args, **extra):
        req = {"id": rid, "verb": verb, "args": [str(a) for a in args], **extra}
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.replies.readline())

    def close(self):
        self.proc.stdin.close()
        code = self.proc.wait(60)
        self.replies.close()
        return code


@pytest.fixture(scope="module")
def model_dir(tiny_bert_dir, tmp_path_factory):
    clf = finetune(toy_frame(24), model=str(tiny_bert_dir), epochs=1, lr=1e-3, quiet=True,
                   device="cpu", max_length=32)
    return clf.save(tmp_path_factory.mktemp("serve") / "model")


def test_worker_runs_verbs_as_the_cli_and_reuses_a_loaded_model(model_dir, tmp_path):
    docs = toy_frame(10).drop(columns="label")
    docs.to_csv(tmp_path / "docs.csv", index=False)
    w = Worker(tmp_path)
    try:
        assert w.ready["ready"] is True and w.ready["pid"] == w.proc.pid
        # relative paths resolve against the request's cwd, as for a one-off process
        r1 = w.ask(1, "predict", "--model", model_dir, "--input", "docs.csv", "--out", "p1.csv",
                   "--quiet", cwd=str(tmp_path))
        r2 = w.ask(2, "predict", "--model", model_dir, "--input", "docs.csv", "--out", "p2.csv",
                   "--quiet", cwd=str(tmp_path))
        assert (r1["id"], r1["status"], r1["error"], r1["models_loaded"]) == (1, 0, None, 1)
        assert (r2["status"], r2["models_loaded"], r2["cache_hits"]) == (0, 1, 1)
        # a bad flag and an input error: the CLI's status and its one-line message
        bad = w.ask(3, "predict", "--model", model_dir, "--input", "nope.csv", "--out", "x.csv")
        assert bad["status"] == 2
        assert bad["error"].startswith("quantformer predict: error:") and "nope.csv" in bad["error"]
        flag = w.ask(4, "tokenize", "--input", "docs.csv", "--out", "t.csv", "--no-such-flag")
        assert flag["status"] == 2 and "--no-such-flag" in flag["error"]
        assert w.ask(5, "info", "--json")["status"] == 0
        w.proc.stdin.write("{not json\n")
        w.proc.stdin.flush()
        assert json.loads(w.replies.readline())["status"] == 2
        assert w.ask(6, "serve")["status"] == 2  # no worker inside the worker
    finally:
        assert w.close() == 0  # end of file on stdin ends the worker
    one_off = subprocess.run([sys.executable, "-m", "quantformer", "predict", "--model",
                              str(model_dir), "--input", "docs.csv", "--out", "p0.csv",
                              "--quiet"], cwd=tmp_path, env=_env(), capture_output=True)
    assert one_off.returncode == 0, one_off.stderr
    p0, p1, p2 = (pd.read_csv(tmp_path / f"p{i}.csv") for i in range(3))
    pd.testing.assert_frame_equal(p1, p0)
    pd.testing.assert_frame_equal(p2, p0)
    assert p0["doc_id"].tolist() == docs["doc_id"].tolist()
    # the verbs' stdout streams as from the CLI; the error lines went to stderr
    w.out.seek(0), w.err.seek(0)
    out, err = w.out.read(), w.err.read()
    assert "wrote predictions for 10 documents to p1.csv" in out
    assert json.loads(out[out.index("{"):])["quantformer"]  # info --json
    assert "nope.csv" in err and "not JSON" in err


def test_replies_on_stdout_move_the_verbs_output_to_stderr(tmp_path):
    reqs = [{"id": "a", "verb": "info", "args": ["--json"]}, {"id": "b", "verb": "info",
                                                              "args": ["--bad"]}]
    res = subprocess.run([sys.executable, "-m", "quantformer", "serve"], cwd=tmp_path,
                         input="".join(json.dumps(r) + "\n" for r in reqs), text=True,
                         env=_env(), capture_output=True, timeout=120)
    assert res.returncode == 0, res.stderr
    replies = [json.loads(x) for x in res.stdout.splitlines()]
    assert [r["id"] for r in replies] == [None, "a", "b"]
    assert [r["status"] for r in replies] == [0, 0, 2]
    assert '"default_model"' in res.stderr


def test_model_cache_keeps_the_last_two_and_reloads_a_rewritten_folder(tmp_path):
    loaded = []
    dirs = []
    for name in "abc":
        (tmp_path / name).mkdir()
        (tmp_path / name / "quantformer.json").write_text("{}")
        dirs.append(tmp_path / name)
    cache = ModelCache(2)

    def get(path, device="auto"):
        return cache.get("classifier", path, device,
                         lambda: loaded.append(os.path.basename(path)) or object())

    first = get(dirs[0])
    assert get(dirs[0]) is first
    get(dirs[1]), get(dirs[2])  # "a" is dropped: only 2 kept
    get(dirs[0])
    assert loaded == ["a", "b", "c", "a"]
    assert (cache.loads, cache.hits, len(cache.models)) == (4, 1, 2)
    get(dirs[0], device="cpu")  # another device: another entry
    assert loaded[-1] == "a"
    stat = os.stat(dirs[2] / "quantformer.json")
    os.utime(dirs[2] / "quantformer.json", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    get(dirs[2])  # the folder was written again: reloaded
    assert loaded == ["a", "b", "c", "a", "a", "c"]
    none = ModelCache(0)
    assert none.get("classifier", dirs[1], "auto", object) is not none.get(
        "classifier", dirs[1], "auto", object)
    assert len(none.models) == 0 and none.loads == 2


@pytest.mark.parametrize("request_, message", [
    ({"args": []}, "needs \"verb\""),
    ({"verb": "predict", "args": "--model m"}, "list of strings"),
    ({"verb": "serve"}, "cannot be run inside"),
])
def test_bad_requests_are_refused(request_, message):
    with pytest.raises(ValueError, match=message):
        _argv(request_)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux only")
@pytest.mark.parametrize("parent_pid_set", [True, False])
def test_the_worker_dies_with_its_parent(tmp_path, parent_pid_set):
    """A parent killed by SIGKILL (no cleanup) takes the worker with it (issue 17).

    The worker's stdin is a FIFO it holds open itself, so end of file never comes: only the
    parent-death signal can end it. Without QUANTFORMER_PARENT_PID it outlives its parent.
    """
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    pidfile = tmp_path / "worker.pid"
    parent_code = (
        "import os, subprocess, sys, time\n"
        f"env = dict(os.environ, QUANTFORMER_PARENT_PID=str(os.getpid())) if {parent_pid_set} "
        "else dict(os.environ)\n"
        f"fd = os.open({str(fifo)!r}, os.O_RDWR)\n"
        "p = subprocess.Popen([sys.executable, '-m', 'quantformer', 'serve'], stdin=fd, "
        "stdout=subprocess.PIPE, env=env)\n"
        "p.stdout.readline()\n"  # ready: die_with_parent() has run
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", parent_code], env=_env())
    deadline = time.time() + 120
    while not (pidfile.exists() and pidfile.read_text()) and time.time() < deadline:
        time.sleep(0.1)
    worker = int(pidfile.read_text())
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait()
    # with the variable: poll until it is gone (a deadline, not a fixed wait); without it, it
    # must still run 2 s later (the parent-death signal comes within milliseconds)
    deadline = time.time() + (30 if parent_pid_set else 2)
    while _alive(worker) and time.time() < deadline:
        time.sleep(0.05)
    alive = _alive(worker)
    if alive:
        os.kill(worker, signal.SIGKILL)
    assert alive is (not parent_pid_set)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl is Linux only")
def test_die_with_parent_when_r_is_already_gone_or_is_not_the_parent():
    code = "from quantformer.cli.serve import die_with_parent; print(die_with_parent())"
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid that no longer exists: R died before the child got going
    gone = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=_env(QUANTFORMER_PARENT_PID=str(dead.pid)), timeout=60)
    assert gone.returncode == 143 and gone.stdout == ""
    # R alive but not the parent (a grandchild that inherited the variable): left alone
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=_env(QUANTFORMER_PARENT_PID="1"), timeout=60)
    assert (other.returncode, other.stdout.strip()) == (0, "False")
    mine = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=_env(QUANTFORMER_PARENT_PID=str(os.getpid())), timeout=60)
    assert (mine.returncode, mine.stdout.strip()) == (0, "True")


def test_worker_passes_precision_to_each_verb_issue_37(tiny_bert_dir, tmp_path):
    toy_frame(5).drop(columns="label").to_csv(tmp_path / "docs.csv", index=False)
    w = Worker(tmp_path)
    try:
        r1 = w.ask(1, "embed", "--input", "docs.csv", "--out", "e.parquet", "--model",
                   tiny_bert_dir, "--device", "cpu", "--quiet", "--precision", "bf16",
                   cwd=str(tmp_path))
        r2 = w.ask(2, "zeroshot", "--input", "docs.csv", "--out", "z.parquet", "--labels",
                   "a,b", "--model", tiny_bert_dir, "--device", "cpu", "--quiet",
                   "--precision", "fp32", cwd=str(tmp_path))
        r3 = w.ask(3, "embed", "--input", "docs.csv", "--out", "x.parquet", "--model",
                   tiny_bert_dir, "--backend", "onnx", "--precision", "bf16",
                   cwd=str(tmp_path))
    finally:
        assert w.close() == 0
    assert (r1["status"], r2["status"]) == (0, 0)
    assert r2["models_loaded"] == 1  # one encoder in memory, whatever the precision
    assert r3["status"] == 2 and "--precision bf16 applies to the torch backend" in r3["error"]
    assert set(pd.read_parquet(tmp_path / "e.parquet")["backend"]) == {"torch bf16"}
    assert set(pd.read_parquet(tmp_path / "z.parquet")["backend"]) == {"torch"}
    w.out.seek(0)
    out = w.out.read()
    assert "precision: bf16 (bf16 asked for; " in out and "precision: fp32 (fp32 asked for)" in out
