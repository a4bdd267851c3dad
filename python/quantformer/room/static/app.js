// The coding room's page: plain JavaScript, no build step, no network beyond this server.
// Every code is POSTed and committed by the server before the next document is shown; keys
// pressed while a request runs wait their turn (a promise chain), so none is lost.
"use strict";
(function () {
  const params = new URLSearchParams(location.search);
  const TOKEN = params.get("token") || "";
  const CODER = params.get("coder") || "";
  let state = null;
  let showGuess = false;
  let reconciling = null;  // the disagreements list while the reconciliation view is open
  let conflict = null;  // what to do with a code another tab or window changed (see below)
  let chain = Promise.resolve();
  const $ = (id) => document.getElementById(id);

  function api(path, body) {
    const opts = { headers: { "X-Token": TOKEN } };
    if (body !== undefined) {
      opts.method = "POST";
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(Object.assign({ coder: CODER, guess: showGuess }, body));
    }
    const sep = path.includes("?") ? "&" : "?";
    const url = body === undefined ?
      path + sep + "coder=" + encodeURIComponent(CODER) + "&guess=" + (showGuess ? 1 : 0) : path;
    // no answer at all (the server stopped, the network is down): say what it means
    const unreachable = () => {
      throw new Error("The coding room's server is unreachable" + (path === "api/code" ?
        ": this code was NOT saved." : path === "api/comment" ? ": this comment was NOT saved." :
        body !== undefined ? ": nothing was saved." : ".") +
        " Check that the room still runs (its owner restarts it), then press the key again.");
    };
    return fetch(url, opts).catch(unreachable).then((r) => r.json().then((j) => {
      if (r.status === 409 && j.conflict) {  // changed in another tab or window
        const e = new Error(j.error);
        e.conflict = j.conflict; e.state = j.state;
        throw e;
      }
      if (!r.ok) { throw new Error(j.error || r.statusText); }
      return j;
    }));
  }

  function setStatus(text, error) {
    $("status").textContent = text;
    $("status").className = error ? "error" : "";
  }

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined) { e.textContent = text; }
    if (cls) { e.className = cls; }
    return e;
  }

  function renderDoc(s) {
    const doc = s.doc;
    const art = $("doc");
    art.setAttribute("data-doc-id", doc ? doc.doc_id : "");
    $("doc-id").textContent = doc ? doc.doc_id : "";
    $("doc-strategy").textContent = doc ? "· why shown: " + doc.strategy : "";
    $("text").textContent = doc ? doc.text : "Every document is coded. Press q when done.";
    const vars = $("docvars");
    vars.replaceChildren();
    if (doc) {
      for (const [k, v] of Object.entries(doc.docvars)) {
        const tr = el("tr");
        tr.append(el("td", k), el("td", v === null ? "NA" : String(v)));
        vars.append(tr);
      }
    }
    const g = $("guess");
    g.hidden = !(showGuess && s.guess);
    if (s.guess) {
      g.textContent = "model's guess: " + s.guess.label + " (" +
        Math.round(100 * s.guess.prob) + " %), press a to accept";
    }
    art.classList.remove("flash"); void art.offsetWidth; art.classList.add("flash");
  }

  function renderCodebook(s) {
    const ol = $("codebook");
    if (ol.childElementCount === s.codebook.length) { return; }
    ol.replaceChildren();
    for (const e of s.codebook) {
      const li = el("li");
      // a label is a button too (mouse and touch): the same as pressing its key
      const b = el("button", "", "code-label");
      b.type = "button";
      b.dataset.label = e.label;
      b.append(el("kbd", e.key), " ", el("b", e.label));
      b.addEventListener("click", () => {
        b.blur();
        chain = chain.then(() => reconciling !== null ? resolveKey(e.label) : code(e.label))
          .catch((err) => setStatus(err.message, true));
      });
      li.append(b);
      if (e.description) { li.append(el("div", e.description, "desc")); }
      for (const x of e.examples) { li.append(el("div", "e.g. " + x, "ex")); }
      ol.append(li);
    }
  }

  function renderProgress(s) {
    const p = s.progress;
    $("coder").textContent = s.coder;
    $("total").textContent = p.handled + " / " + p.total + " documents handled (" +
      p.mine + " by you)";
    const box = $("progress");
    box.replaceChildren();
    const most = Math.max(1, ...Object.values(p.per_label));
    for (const [lab, n] of Object.entries(p.per_label)) {
      const row = el("div");
      const bar = el("span", "", "bar");
      bar.style.width = (120 * n / most) + "px";
      row.append(el("span", lab + " " + n + " "), bar);
      row.setAttribute("data-label", lab);
      row.setAttribute("data-count", n);
      box.append(row);
    }
  }

  function renderModel(s) {
    const m = s.model;
    $("strategy").value = m.strategy;
    const pts = m.rounds.filter((r) => r.macro_f1 !== null);
    const svg = $("curve");
    svg.replaceChildren();
    const W = 260, H = 110, pad = 18;
    const ns = "http://www.w3.org/2000/svg";
    const axis = document.createElementNS(ns, "polyline");
    axis.setAttribute("points", pad + ",4 " + pad + "," + (H - pad) + " " + W + "," + (H - pad));
    axis.setAttribute("fill", "none"); axis.setAttribute("stroke", "#999");
    svg.append(axis);
    if (pts.length) {
      const maxN = Math.max(...pts.map((r) => r.n_codes), 1);
      const xy = pts.map((r) => [pad + (W - pad - 4) * r.n_codes / maxN,
        (H - pad) - (H - pad - 4) * r.macro_f1]);
      const line = document.createElementNS(ns, "polyline");
      line.setAttribute("points", xy.map((p) => p.join(",")).join(" "));
      line.setAttribute("fill", "none"); line.setAttribute("stroke", "#36c");
      line.setAttribute("stroke-width", "2");
      svg.append(line);
      for (const [x, y] of xy) {
        const dot = document.createElementNS(ns, "circle");
        dot.setAttribute("cx", x); dot.setAttribute("cy", y); dot.setAttribute("r", 3);
        dot.setAttribute("fill", "#36c");
        svg.append(dot);
      }
      const label = (x, y, text, anchor) => {
        const t = document.createElementNS(ns, "text");
        t.setAttribute("x", x); t.setAttribute("y", y); t.setAttribute("font-size", "10");
        t.setAttribute("fill", "#666"); t.setAttribute("text-anchor", anchor);
        t.textContent = text;
        svg.append(t);
      };
      label(pad - 3, 10, "1", "end");
      label(pad - 3, H - pad, "0", "end");
      label(W, H - 4, maxN + " codes", "end");
      label(pad + 4, 10, "macro-F1", "start");
    }
    const last = m.rounds[m.rounds.length - 1];
    $("model").textContent = last ?
      "cross-validated macro-F1 " + (last.macro_f1 === null ? "(too few codes per class)" :
        last.macro_f1.toFixed(2)) + " at " + last.n_codes + " codes; " + m.rounds.length +
        " round(s)" : "the model starts once two classes are coded";
    if (m.error) { setStatus("model: " + m.error, true); }
    const hint = $("stop-hint");
    hint.hidden = !m.stop_hint;
    hint.textContent = "The model's predictions have stopped changing (kappa >= 0.99 over " +
      "three rounds): more codes are unlikely to change it.";
  }

  function render(s) {
    state = s;
    renderDoc(s); renderCodebook(s); renderProgress(s); renderModel(s);
    // only the owner stops the room and starts a fine-tune
    $("done").textContent = s.owner ? "stop the room (q)" : "done (q)";
    for (const id of ["finetune", "finetune-head", "finetune-state", "strategy-box"]) {
      $(id).hidden = !s.owner;
    }
    $("keys").textContent = "Keys: 1-9 code with the k-th label · s skip · n not applicable " +
      "(neither is a label) · b or Backspace back (undo) · c comment · g show/hide the " +
      "model's guess · a accept it · r reconcile" +
      (s.owner ? " · f fine-tune now (in the background) · q stop the room" : " · q done");
    if (s.progress.coders.length > 1 || s.progress.machine_coders.length) { refreshAgreement(); }
  }

  // Krippendorff (2004, Content Analysis, 2nd ed., ch. 11) sizes a reliability sample in the
  // hundreds of units; on fewer than this many documents the page warns that the figure and
  // its bootstrap interval are not to be reported (four agreeing documents give [1.00, 1.00])
  const FEW_DOCS = 50;
  let agreementPoll = null;
  function refreshAgreement() {
    api("api/agreement").then((a) => {
      // a changed overlap is computed in the background: ask again shortly
      if (a.updating && agreementPoll === null) {
        agreementPoll = setTimeout(() => { agreementPoll = null; refreshAgreement(); }, 1000);
      }
      const f = (x) => x.estimate === null ? "undefined" :
        x.estimate.toFixed(2) + " [" + x.ci_low.toFixed(2) + ", " + x.ci_high.toFixed(2) + "]";
      const line = (who, p) => who + " on " + p.n + " documents: Krippendorff's alpha " +
        f(p.krippendorff_alpha) + ", Cohen's kappa " + f(p.cohen_kappa);
      // human-human first, then each human against each machine coder (a language model)
      const few = (p) => p.n < FEW_DOCS ? " (only " + p.n + " documents: too few to " +
        "report; the interval is not reliable on so few, keep coding the overlap)" : "";
      const lines = [a.n ? line(a.coders.join(" & "), a) + " (95 % bootstrap intervals)" +
        few(a) : "no document coded by two coders yet"];
      for (const m of a.machine || []) {
        if (m.n) { lines.push(line(m.coder + " & " + m.machine + " (machine coder)", m) + few(m)); }
      }
      if (a.updating) { lines.push("updating: these figures are from before the latest codes"); }
      const box = $("agreement");
      box.textContent = lines.join("\n");
      box.setAttribute("data-updating", a.updating ? "true" : "false");
      box.setAttribute("data-few", a.n && a.n < FEW_DOCS ? "true" : "false");
    }).catch((e) => setStatus(e.message, true));
  }

  function post(path, body) {
    return api(path, body).then((s) => { render(s); setStatus(""); return s; });
  }

  // every code carries the version of the document this page saw, and "back" the last code
  // this page saw: when the coder changed it in another tab or window since, the server
  // writes nothing (409) and the page asks whether to keep that code or replace it
  function code(label, status, accepted) {
    if (!state || !state.doc || conflict) { return Promise.resolve(); }
    const body = { doc_id: state.doc.doc_id, label: label, status: status || "code",
      guess_accepted: !!accepted, version: state.doc.version };
    return post("api/code", body).catch((e) => askConflict(e, body));
  }

  function undo() {
    if (conflict) { return Promise.resolve(); }
    return post("api/undo", { last: state ? state.last : null })
      .catch((e) => askConflict(e, null));
  }

  function askConflict(e, body) {
    if (!e.conflict) { throw e; }
    const c = e.conflict;
    const theirs = c.status === "code" ? "Keep “" + c.label + "”" :
      c.status === null ? "Leave it uncoded" : "Keep it " +
        (c.status === "skip" ? "skipped" : "not applicable");
    const mine = body === null ? "Undo that too" : body.status === "code" ?
      "Replace it with “" + body.label + "”" : body.status === "skip" ? "Skip it instead" :
        "Mark it not applicable instead";
    conflict = {
      keep: () => render(e.state),
      replace: () => (body === null ? post("api/undo", { last: e.state.last }) :
        post("api/code", Object.assign({}, body, { version: c.version })))
        .catch((again) => askConflict(again, body)),
    };
    $("conflict-text").textContent = e.message;
    $("conflict-keep").textContent = theirs + " (Esc)";
    $("conflict-replace").textContent = mine;
    $("conflict").hidden = false;
    $("conflict-keep").focus();
  }

  function settleConflict(choice) {
    const act = conflict[choice];
    conflict = null;
    $("conflict").hidden = true;
    return Promise.resolve(act()).then(() => setStatus(""));
  }

  // -- fine-tune now: a background child process; its state is polled while it runs -------
  let finetunePoll = null;
  let finetuneSeen = null;  // the state last shown, to report a run that has just ended

  function renderFinetune(f) {
    const box = $("finetune-state");
    box.setAttribute("data-state", f.state);
    $("finetune").disabled = f.state === "running";
    const at = f.model ? " (" + f.model + ")" : "";
    const texts = {
      none: state && state.owner ?
        "no fine-tune yet: press f to fine-tune the model on the codes so far" : "",
      running: "running on " + f.n_codes + " codes since " + String(f.started).slice(11, 19) +
        " UTC; coding goes on",
      done: "done on " + f.n_codes + " codes: model" + at + (f.macro_f1 === null ||
        f.macro_f1 === undefined ? "" : ", validation macro-F1 " + f.macro_f1.toFixed(2)),
      failed: "failed: " + (f.error || "").split("\n").slice(-3).join(" "),
      stopped: "stopped: " + (f.error || "the coding room stopped before it ended"),
    };
    box.textContent = texts[f.state] || f.state;
    if (finetuneSeen === "running" && f.state !== "running") {
      setStatus("fine-tune " + f.state, f.state !== "done");
    }
    finetuneSeen = f.state;
    if (f.state === "running" && finetunePoll === null) {
      finetunePoll = setInterval(refreshFinetune, 3000);
    } else if (f.state !== "running" && finetunePoll !== null) {
      clearInterval(finetunePoll); finetunePoll = null;
    }
  }

  function refreshFinetune() {
    return api("api/finetune").then(renderFinetune).catch((e) => setStatus(e.message, true));
  }

  function finetune() {
    return api("api/finetune", {}).then((f) => {
      renderFinetune(f); setStatus("fine-tune started");
    });
  }

  // -- reconciliation view --------------------------------------------------------------
  function openReconcile() {
    return api("api/reconcile").then((r) => { reconciling = r.disagreements; drawReconcile(); });
  }

  function drawReconcile() {
    const box = $("reconcile");
    box.hidden = reconciling === null;
    if (reconciling === null) { return; }
    box.replaceChildren(el("h2", "Reconciliation: " + reconciling.length + " disagreement(s)"));
    const open = reconciling.filter((d) => d.resolved === null);
    for (const d of reconciling) {
      const div = el("div");
      div.setAttribute("data-reconcile-id", d.doc_id);
      const codes = Object.entries(d.codes).map(([c, l]) => c + ": " + l).concat(
        Object.entries(d.machine || {}).map(([c, l]) => c + " (machine): " + l)).join(", ") +
        (d.with_machine ? " [disagreement with the machine coder]" : "");
      div.append(el("b", d.doc_id + " "), el("span", codes + (d.resolved ?
        " → resolved: " + d.resolved : " (open)")), el("p", d.text));
      box.append(div);
    }
    box.append(el("p", open.length ? "Press a label's key to resolve " + open[0].doc_id +
      "; r closes this view." : "All resolved; r closes this view."));
  }

  function resolveKey(label) {
    const open = reconciling.filter((d) => d.resolved === null);
    if (!open.length) { return Promise.resolve(); }
    return api("api/resolve", { doc_id: open[0].doc_id, label: label }).then((r) => {
      reconciling = r.disagreements; drawReconcile();
      return api("api/state").then(render);  // the side panel counts the resolved code
    });
  }

  // -- keys -----------------------------------------------------------------------------
  function labelOfKey(key) {
    if (!state) { return null; }
    const e = state.codebook.find((x) => x.key === key);
    return e ? e.label : null;
  }

  function handleKey(ev) {
    const label = labelOfKey(ev.key);
    if (reconciling !== null) {
      if (label) { return resolveKey(label); }
      if (ev.key === "r" || ev.key === "Escape") { reconciling = null; drawReconcile(); }
      return Promise.resolve();
    }
    if (label) { return code(label); }
    switch (ev.key) {
      case "s": return code(null, "skip");
      case "n": return code(null, "not_applicable");
      case "b": case "Backspace":
        return undo();
      case "g":
        showGuess = !showGuess;
        return api("api/state").then(render);
      case "a":
        if (showGuess && state && state.guess) { return code(state.guess.label, "code", true); }
        return Promise.resolve();
      case "c": openComment(); return Promise.resolve();
      case "r": return openReconcile();
      case "f": return state && state.owner ? finetune() : Promise.resolve();
      case "q": return done();
    }
    return Promise.resolve();
  }

  function openComment() {
    $("comment-box").hidden = false;
    $("comment").value = "";
    $("comment").focus();
  }

  function closeComment(save) {
    const text = $("comment").value.trim();
    $("comment-box").hidden = true;
    $("comment").blur();
    if (save && text && state && state.doc) {
      chain = chain.then(() => api("api/comment", { doc_id: state.doc.doc_id, text: text }))
        .then(() => setStatus("comment saved")).catch((e) => setStatus(e.message, true));
    }
  }

  // the owner (who started the room) stops it for every coder, after a confirmation; any
  // other coder's "done" ends their own session only
  function done() {
    const owner = state && state.owner;
    if (owner && !window.confirm("Stop the coding room for every coder? " +
        "Every code is already saved in the project file.")) {
      return Promise.resolve();
    }
    return api("api/done", { stop: !!owner }).then(() => {
      document.body.replaceChildren(el("p", (owner ? "The coding room is stopped. " :
        "Done: your codes are in the project file. ") + "You can close this tab."));
    });
  }

  document.addEventListener("keydown", (ev) => {
    if (ev.target === $("comment")) {
      if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); closeComment(true); }
      if (ev.key === "Escape") { closeComment(false); }
      return;
    }
    if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.target.tagName === "SELECT") { return; }
    if (conflict) {  // a choice to make first: Esc keeps the other tab's code
      if (ev.key === "Escape") {
        chain = chain.then(() => settleConflict("keep")).catch((e) => setStatus(e.message, true));
      }
      return;
    }
    // a key the page uses does nothing else (no typing into the comment box it opens, no
    // browser "back" for Backspace)
    if (labelOfKey(ev.key) || "snbcgarfqBackspaceEscape".includes(ev.key)) {
      ev.preventDefault();
    }
    chain = chain.then(() => handleKey(ev)).catch((e) => setStatus(e.message, true));
  });
  $("strategy").addEventListener("change", (ev) => {
    chain = chain.then(() => post("api/strategy", { strategy: ev.target.value }))
      .then(() => ev.target.blur()).catch((e) => setStatus(e.message, true));
  });
  $("done").addEventListener("click", () => { chain = chain.then(done); });
  for (const choice of ["keep", "replace"]) {
    $("conflict-" + choice).addEventListener("click", () => {
      if (!conflict) { return; }
      chain = chain.then(() => settleConflict(choice)).catch((e) => setStatus(e.message, true));
    });
  }
  $("finetune").addEventListener("click", (ev) => {
    ev.target.blur();
    chain = chain.then(finetune).catch((e) => setStatus(e.message, true));
  });
  chain = api("api/state").then(render).then(refreshFinetune)
    .catch((e) => setStatus(e.message, true));
})();
