"""The coding room in a real browser (issue 26): Debian's headless Chromium driven by Selenium
through Debian's chromedriver (``apt-get install chromium chromium-driver``, see
scripts/setup.sh; nothing is downloaded). The server is a real child process,
``quantformer code ... --no-browser --port 0``, whose address is read from its stdout.

Screenshots for the vignette are written where ``QUANTFORMER_SCREENSHOTS`` points, when set.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pandas as pd
import pytest
from toydata import toy_frame

from quantformer.room.loop import in_overlap

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
    pytest.skip("needs Debian's chromium and chromium-driver (scripts/setup.sh installs them)",
                allow_module_level=True)
webdriver = pytest.importorskip("selenium.webdriver")
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
KEYS = {"econ": "1", "other": "2"}
SHOTS = os.environ.get("QUANTFORMER_SCREENSHOTS")


@pytest.fixture(scope="module")
def browser():
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1200,800"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(options=opts,
                              service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("room")
    frame = toy_frame(80)
    truth = dict(zip(frame["doc_id"], frame["label"]))
    frame.drop(columns=["label"]).to_csv(folder / "corpus.csv", index=False)
    return folder, truth


class Server:
    """``quantformer code`` as a child process; ``url`` is the line it prints."""

    def __init__(self, corpus: Path, project: Path, model: Path, *extra: str):
        env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "quantformer", "code", "--input", str(corpus), "--labels",
             "econ,other", "--project", str(project), "--no-browser", "--port", "0",
             "--embed-model", str(model), "--quiet", *extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        names = extra[list(extra).index("--coders") + 1].split(",") if "--coders" in extra \
            else [None]
        self.links = {name: self.proc.stdout.readline().strip() for name in names}
        self.url = next(iter(self.links.values()))
        if not self.url.startswith("http://127.0.0.1:"):
            self.proc.kill()
            raise RuntimeError(f"no address printed: {self.url!r} {self.proc.stderr.read()}")
        self.base = self.url.split("/?")[0]
        self.token = self.url.split("token=")[1].split("&")[0]

    def link(self, coder: str) -> str:
        """The link of one of the --coders (one link is one person)."""
        return self.links[coder]

    def kill9(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)


@pytest.fixture(scope="module")
def server(corpus, tiny_bert_dir):
    folder, _ = corpus
    srv = Server(folder / "corpus.csv", folder / "p.sqlite", tiny_bert_dir, "--overlap", "0.5",
                 "--coders", "coder1,ann,bob,clicker,dan")
    yield srv
    srv.stop()


def wait(driver, condition, timeout: float = 20):
    """Wait until ``condition(driver)`` holds (the page redraws: stale elements retried)."""
    return WebDriverWait(driver, timeout, ignored_exceptions=(
        StaleElementReferenceException,)).until(condition)


def shown(driver) -> str:
    return driver.find_element(By.CSS_SELECTOR, "[data-doc-id]").get_attribute("data-doc-id")


def wait_doc(driver, previous: str | None = None) -> str:
    """The shown document's id, once one is shown (and differs from ``previous``)."""
    wait(driver, lambda d: shown(d) and shown(d) != previous)
    return shown(driver)


def press(driver, key: str) -> None:
    ActionChains(driver).send_keys(key).perform()


def code_docs(driver, truth: dict, n: int, flip: list | None = None,
              others: dict | None = None) -> dict:
    """Code ``n`` documents by keyboard with their true labels; {doc_id: label}. With
    ``flip`` (an empty list), the first overlap document another coder coded (``others``)
    gets the other label (its id is appended to ``flip``)."""
    pressed = {}
    doc = wait_doc(driver)
    for _ in range(n):
        label = truth[doc]
        why = driver.find_element(By.ID, "doc-strategy").text
        assert "overlap" not in why and "margin" not in why  # plain words, overlap blind
        if flip is not None and not flip and doc in (others or {}):
            label = "econ" if label == "other" else "other"
            flip.append(doc)
        press(driver, KEYS[label])
        pressed[doc] = label
        doc = wait_doc(driver, doc)
    return pressed


def export(project: Path, out: Path, final: bool = False) -> pd.DataFrame:
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    subprocess.run([sys.executable, "-m", "quantformer", "code", "--project", str(project),
                    "--export", str(out), "--quiet", "--overwrite", *(["--final"] if final else [])],
                   check=True, env=env)
    return pd.read_csv(out) if out.suffix == ".csv" else pd.read_parquet(out)


def test_code_20_by_keyboard_undo_reload_resume_export(browser, server, corpus):
    folder, truth = corpus
    browser.get(server.link("coder1"))
    pressed = code_docs(browser, truth, 20)
    last = list(pressed)[-1]
    current = shown(browser)
    press(browser, "b")  # back: the last code is undone and its document shown again
    assert wait_doc(browser, current) == last
    del pressed[last]
    if SHOTS:
        press(browser, "g")
        browser.save_screenshot(str(Path(SHOTS) / "coding-room.png"))
        press(browser, "g")
    browser.refresh()  # resume: the undone document is still the one to code
    assert wait_doc(browser) == last
    pressed.update(code_docs(browser, truth, 1))
    # a comment (c, text, Enter), then the model's guess shown (g) and accepted (a)
    commented = shown(browser)
    press(browser, "c")
    wait(browser, lambda d: d.find_element(By.ID, "comment").is_displayed())
    press(browser, "ironic, not about money\n")
    wait(browser, lambda d: "saved" in d.find_element(By.ID, "status").text)
    press(browser, "g")
    wait(browser, lambda d: d.find_element(By.ID, "guess").is_displayed())
    guess = browser.find_element(By.ID, "guess").text.split(": ")[1].split(" (")[0]
    assert guess in KEYS
    press(browser, "a")
    accepted = commented
    pressed[accepted] = guess
    wait_doc(browser, accepted)
    press(browser, "g")
    # the bars count the codes the model learns from: with several coders, an overlap
    # document coded by one of them waits for the second code (blind)
    learnt = {d: lab for d, lab in pressed.items() if not in_overlap(d, 0.5)}
    per_class = pd.Series(learnt, dtype=object).value_counts().reindex(["econ", "other"],
                                                                       fill_value=0)
    wait(browser, lambda d: {e.get_attribute("data-label"): int(e.get_attribute("data-count"))
                             for e in d.find_elements(By.CSS_SELECTOR, "#progress [data-label]")}
         == per_class.to_dict())  # progress per class, as shown
    codes = export(folder / "p.sqlite", folder / "codes.parquet")
    mine = codes[codes["coder"] == "coder1"]
    assert dict(zip(mine["doc_id"], mine["label"])) == pressed and len(mine) == 21
    assert mine["strategy"].iloc[0] == "cold" and mine["time"].is_monotonic_increasing
    row = mine.set_index("doc_id").loc[accepted]
    assert row["guess_accepted"] and row["comment"] == "ironic, not about money"
    assert mine["guess_accepted"].sum() == 1


def test_two_coders_in_two_sessions_lose_no_code(browser, server, corpus):
    folder, truth = corpus
    browser.get(server.link("ann"))
    ann_tab = browser.current_window_handle
    browser.switch_to.new_window("window")
    browser.get(server.link("bob"))
    bob_tab = browser.current_window_handle
    pressed = {"ann": {}, "bob": {}}
    flipped = []  # bob codes one overlap document against its true label
    for _ in range(6):  # alternate: each coder codes while the other's page is open
        for coder, tab in (("ann", ann_tab), ("bob", bob_tab)):
            browser.switch_to.window(tab)
            pressed[coder].update(code_docs(browser, truth, 2,
                                            flip=flipped if coder == "bob" else None,
                                            others=pressed["ann"]))
    browser.close()
    browser.switch_to.window(ann_tab)
    # reconciliation: r lists the disagreement, the label's key resolves it
    assert len(flipped) == 1
    press(browser, "r")
    wait(browser, lambda d: d.find_elements(
        By.CSS_SELECTOR, f"[data-reconcile-id='{flipped[0]}']"))
    # the list opens above the current document, not under it (issue 36)
    assert browser.find_element(By.ID, "reconcile").location["y"] < \
        browser.find_element(By.ID, "doc").location["y"]
    before = browser.find_element(By.ID, "progress").text
    wait(browser, lambda d: "Krippendorff" in d.find_element(
        By.ID, "agreement").text and "updating" not in d.find_element(By.ID, "agreement").text)
    # a figure on a handful of documents says so
    assert "too few to report" in browser.find_element(By.ID, "agreement").text
    assert browser.find_element(By.ID, "agreement").get_attribute("data-few") == "true"
    if SHOTS:
        browser.save_screenshot(str(Path(SHOTS) / "coding-room-reconcile.png"))
    press(browser, KEYS[truth[flipped[0]]])
    wait(browser, lambda d: "resolved: " + truth[flipped[0]] in d.find_element(
        By.CSS_SELECTOR, f"[data-reconcile-id='{flipped[0]}']").text)
    # the side panel counts the resolved code at once (issue 36)
    wait(browser, lambda d: d.find_element(By.ID, "progress").text != before)
    press(browser, "r")
    final = export(folder / "p.sqlite", folder / "final.csv", final=True)
    codes = export(folder / "p.sqlite", folder / "codes2.csv")
    assert final.set_index("doc_id").loc[flipped[0]].tolist() == [
        truth[flipped[0]], (codes["doc_id"] == flipped[0]).sum(), "resolved", "ann"]
    for coder in ("ann", "bob"):
        got = codes[codes["coder"] == coder]
        assert dict(zip(got["doc_id"], got["label"])) == pressed[coder]
    # only overlap documents are shown to both, the second time as "overlap"
    both = set(pressed["ann"]) & set(pressed["bob"])
    assert all(in_overlap(d, 0.5) for d in both)
    pair = codes[codes["doc_id"].isin(both) & codes["coder"].isin(["ann", "bob"])]
    assert all("overlap" in set(g) for _, g in pair.groupby("doc_id")["strategy"])


def test_without_the_token_403(browser, server):
    for path in ("/", "/api/state", "/static/app.js"):
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(server.base + path, timeout=10)
        assert err.value.code == 403
    browser.get(server.base + "/")
    assert "forbidden" in browser.page_source and not browser.find_elements(
        By.CSS_SELECTOR, "[data-doc-id]")


def test_kill_9_and_restart_loses_no_code(browser, corpus, tiny_bert_dir):
    folder, truth = corpus
    project = folder / "killed.sqlite"
    srv = Server(folder / "corpus.csv", project, tiny_bert_dir)
    try:
        browser.get(srv.url)
        pressed = code_docs(browser, truth, 12)
        srv.kill9()
    finally:
        srv.stop()
    again = Server(folder / "corpus.csv", project, tiny_bert_dir)
    try:
        browser.get(again.url)
        resumed = wait_doc(browser)
        assert resumed not in pressed
        codes = export(project, folder / "killed.csv")
        assert dict(zip(codes["doc_id"], codes["label"])) == pressed
    finally:
        again.stop()


def finetune_state(driver) -> str:
    return driver.find_element(By.ID, "finetune-state").get_attribute("data-state")


def per_label(driver) -> dict:
    return {e.get_attribute("data-label"): int(e.get_attribute("data-count"))
            for e in driver.find_elements(By.CSS_SELECTOR, "#progress [data-label]")}


def test_finetune_now_in_the_background_and_stopped_with_the_server(browser, corpus,
                                                                    tiny_bert_dir):
    folder, truth = corpus
    project, models = folder / "ft.sqlite", folder / "models"
    flags = ("--finetune-model", str(tiny_bert_dir), "--finetune-epochs", "1",
             "--finetune-min-codes", "3", "--models", str(models), "--device", "cpu")
    srv = Server(folder / "corpus.csv", project, tiny_bert_dir, *flags)
    try:
        browser.get(srv.url)
        wait(browser, lambda d: finetune_state(d) == "none")
        press(browser, "f")  # nothing coded yet: refused, the page says which labels
        wait(browser, lambda d: "at least 3 codes" in d.find_element(By.ID, "status").text)
        assert "econ (0), other (0)" in browser.find_element(By.ID, "status").text
        for _ in range(40):  # code until every label has 3 codes
            code_docs(browser, truth, 1)
            counts = per_label(browser)
            if min(counts.values()) >= 3:
                break
        press(browser, "f")
        wait(browser, lambda d: finetune_state(d) == "running")
        code_docs(browser, truth, 2)  # coding goes on while it runs
        wait(browser, lambda d: finetune_state(d) in ("done", "failed"), timeout=300)
        text = browser.find_element(By.ID, "finetune-state").text
        assert finetune_state(browser) == "done", text
        assert "validation macro-F1" in text
        assert "fine-tune done" in browser.find_element(By.ID, "status").text
        if SHOTS:
            browser.save_screenshot(str(Path(SHOTS) / "coding-room-finetune.png"))
        done = [p for p in models.iterdir() if p.name.startswith("finetune-")]
        assert len(done) == 1 and (done[0] / "quantformer.json").is_file()
        browser.find_element(By.ID, "finetune").click()  # the button starts a second run
        wait(browser, lambda d: finetune_state(d) == "running")
        state = json.loads(urllib.request.urlopen(urllib.request.Request(
            srv.base + "/api/finetune", headers={"X-Token": srv.token}), timeout=10).read())
        srv.stop()  # SIGTERM: the server stops its fine-tune child
        with pytest.raises(ProcessLookupError):
            os.kill(state["pid"], 0)
    finally:
        srv.stop()
    again = Server(folder / "corpus.csv", project, tiny_bert_dir, *flags)
    try:  # a restart shows the last run
        browser.get(again.url)
        wait(browser, lambda d: finetune_state(d) == "stopped")
    finally:
        again.stop()


def test_coders_get_links_of_their_own(browser, corpus, tiny_bert_dir):
    folder, truth = corpus
    srv = Server(folder / "corpus.csv", folder / "shared.sqlite", tiny_bert_dir,
                 "--coders", "alice,bob")
    try:
        bob = srv.link("bob")
        assert srv.url.endswith("&coder=alice") and bob.endswith("&coder=bob")
        assert srv.url.split("token=")[1] != bob.split("token=")[1]
        browser.get(bob)
        wait(browser, lambda d: d.find_element(By.ID, "coder").text == "bob")
        code_docs(browser, truth, 1)
        browser.get(bob.replace("coder=bob", "coder=alice"))  # bob's link acting as alice
        assert "this link is bob's" in browser.page_source
        assert not browser.find_elements(By.CSS_SELECTOR, "[data-doc-id]")
        codes = export(folder / "shared.sqlite", folder / "shared.csv")
        assert codes["coder"].tolist() == ["bob"]
    finally:
        srv.stop()


def test_only_the_owner_stops_the_room_after_a_confirmation(browser, corpus, tiny_bert_dir):
    """Issue 36: one coder's q stopped the room for everyone, without confirmation."""
    folder, _ = corpus
    srv = Server(folder / "corpus.csv", folder / "owner.sqlite", tiny_bert_dir,
                 "--coders", "ann,bob")
    try:
        bob = srv.link("bob")
        browser.get(bob)
        wait_doc(browser)
        assert not browser.find_element(By.ID, "finetune").is_displayed()
        assert browser.find_element(By.ID, "done").text == "done (q)"
        # the owner's controls are the owner's only: no strategy, no "press f", no f key
        assert not browser.find_element(By.ID, "strategy").is_displayed()
        assert "fine-tune" not in browser.find_element(By.TAG_NAME, "body").text.lower()
        press(browser, "f")
        assert browser.find_element(By.ID, "status").text == ""  # no request, no refusal
        assert "alone" in browser.find_element(By.CSS_SELECTOR, "aside").text
        press(browser, "q")
        wait(browser, lambda d: "your codes are in the project file" in d.page_source)
        assert srv.proc.poll() is None  # bob's session ended, the room runs on
        browser.get(srv.url)  # ann started the room
        wait_doc(browser)
        assert browser.find_element(By.ID, "finetune").is_displayed()
        assert browser.find_element(By.ID, "strategy").is_displayed()
        assert "f fine-tune now" in browser.find_element(By.ID, "keys").text
        press(browser, "q")
        wait(browser, lambda d: d.switch_to.alert)
        assert "every coder" in browser.switch_to.alert.text
        browser.switch_to.alert.dismiss()
        assert srv.proc.poll() is None and shown(browser)
        press(browser, "q")
        wait(browser, lambda d: d.switch_to.alert)
        browser.switch_to.alert.accept()
        wait(browser, lambda d: "coding room is stopped" in d.page_source)
        assert srv.proc.wait(timeout=20) == 0
    finally:
        srv.stop()


def test_labels_are_clicked_and_why_is_in_plain_words(browser, server, corpus):
    """Issue 36: labels could not be clicked (mouse and touch coding); "margin" on the page."""
    folder, truth = corpus
    browser.get(server.link("clicker"))
    doc = wait_doc(browser)
    assert browser.find_element(By.ID, "doc-strategy").text.startswith("· why shown: ")
    assert "the model is unsure" in browser.find_element(By.CSS_SELECTOR, ".why").text
    browser.find_element(By.CSS_SELECTOR, f"button[data-label='{truth[doc]}']").click()
    wait_doc(browser, doc)
    codes = export(folder / "p.sqlite", folder / "clicked.csv")
    assert codes.query("coder == 'clicker'")[["doc_id", "label"]].values.tolist() == [
        [doc, truth[doc]]]


def test_one_coder_in_two_tabs_is_told_and_chooses(browser, server, corpus):
    """Issue 36: one coder in two tabs: the later code won silently, and undo then restored
    the other tab's code."""
    folder, truth = corpus
    browser.get(server.link("dan"))
    first = browser.current_window_handle
    doc = wait_doc(browser)
    browser.switch_to.new_window("tab")
    browser.get(server.link("dan"))
    second = browser.current_window_handle
    assert wait_doc(browser) == doc  # both tabs show the same document
    label, other = truth[doc], "econ" if truth[doc] == "other" else "other"
    browser.switch_to.window(first)
    press(browser, KEYS[label])
    wait_doc(browser, doc)
    dan = lambda: export(folder / "p.sqlite", folder / "dan.csv").query("coder == 'dan'")
    # the second tab still shows the document: its code is not written, the page says why
    browser.switch_to.window(second)
    press(browser, KEYS[other])
    box = wait(browser, lambda d: d.find_element(By.ID, "conflict").is_displayed() and
               d.find_element(By.ID, "conflict"))
    assert f"Document {doc} was coded as “{label}” in another tab or window" in box.text
    assert browser.find_element(By.ID, "conflict-keep").text.startswith(f"Keep “{label}”")
    assert dan()[["doc_id", "label"]].values.tolist() == [[doc, label]]
    if SHOTS:
        browser.save_screenshot(str(Path(SHOTS) / "coding-room-two-tabs.png"))
    browser.find_element(By.ID, "conflict-replace").click()  # "Replace it with ..."
    wait(browser, lambda d: not d.find_element(By.ID, "conflict").is_displayed())
    wait_doc(browser, doc)
    assert dan()[["doc_id", "label"]].values.tolist() == [[doc, other]]
    # back in the first tab, "back" would take back the code the second tab wrote: asked
    browser.switch_to.window(first)
    press(browser, "b")
    box = wait(browser, lambda d: d.find_element(By.ID, "conflict").is_displayed() and
               d.find_element(By.ID, "conflict"))
    assert f"Document {doc} was coded as “{other}” in another tab or window" in box.text
    press(browser, "\ue00c")  # Esc: keep it
    wait(browser, lambda d: not d.find_element(By.ID, "conflict").is_displayed())
    assert dan()[["doc_id", "label"]].values.tolist() == [[doc, other]]
    browser.switch_to.window(second)
    browser.close()
    browser.switch_to.window(first)


def test_a_machine_coder_shows_in_the_panel_and_reconciliation(browser, corpus, tiny_bert_dir):
    """Issue 35: a language model's codes, imported with --add-coder, beside one human coder."""
    folder, truth = corpus
    project = folder / "machine.sqlite"
    machine = pd.DataFrame({"doc_id": list(truth), "label": "econ", "coder": "tiny-llm"})
    machine.to_csv(folder / "llm.csv", index=False)
    env = {**os.environ, "PYTHONPATH": str(REPO / "python")}
    subprocess.run([sys.executable, "-m", "quantformer", "code", "--project", str(project),
                    "--input", str(folder / "corpus.csv"), "--labels", "econ,other",
                    "--add-coder", str(folder / "llm.csv"), "--quiet"], check=True, env=env)
    srv = Server(folder / "corpus.csv", project, tiny_bert_dir)
    try:
        browser.get(srv.url)
        pressed = code_docs(browser, truth, 8)
        wait(browser, lambda d: "tiny-llm (machine coder) on 8 documents" in d.find_element(
            By.ID, "agreement").text)
        press(browser, "r")
        other = [d for d, lab in pressed.items() if lab == "other"]
        assert other  # the toy corpus' first codes hold both labels
        item = wait(browser, lambda d: d.find_elements(
            By.CSS_SELECTOR, f"[data-reconcile-id='{other[0]}']"))[0]
        assert "tiny-llm (machine): econ" in item.text
        assert "disagreement with the machine coder" in item.text
        press(browser, "r")
    finally:
        srv.stop()


def test_an_outage_says_the_server_is_unreachable_and_the_code_not_saved(browser, corpus,
                                                                         tiny_bert_dir):
    """Before, the page said only "Failed to fetch"; and "n" (not applicable) stood beside a
    label on key 3 without a word that it is not a label."""
    folder, _ = corpus
    srv = Server(folder / "corpus.csv", folder / "outage.sqlite", tiny_bert_dir)
    try:
        browser.get(srv.url)
        wait_doc(browser)
        note = browser.find_element(By.ID, "not-labels").text
        assert "Not labels" in note and "not applicable" in note
        assert browser.find_element(By.ID, "not-labels").find_element(
            By.XPATH, "preceding-sibling::ol[@id='codebook']")
        bars = browser.find_element(By.ID, "progress-why").text
        assert "codes the model learns from" in bars and "header counts" in bars
        srv.kill9()
        press(browser, "1")
        wait(browser, lambda d: "unreachable" in d.find_element(By.ID, "status").text)
        status = browser.find_element(By.ID, "status").text
        assert "this code was NOT saved" in status and "Failed to fetch" not in status
    finally:
        srv.stop()
