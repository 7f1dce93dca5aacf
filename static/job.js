// kue dashboard, the job page: the data editor, the reveal of a hidden payload, the signal
// dialog and the job's stream of output. It runs after static/kue.js (both deferred, in this
// order), which refreshes the page's live parts and lends it what it uses through
// window.kue. As there, nothing here builds HTML from strings: text and nodes only.
"use strict";

(() => {
  const { send, refreshNow, swapped, lastRefresh, RECONNECT } = window.kue;

  // -- the data editor ---------------------------------------------------------------------
  // It stays outside the live parts, so a refresh never takes what is being typed.
  const editor = document.getElementById("editor");

  function openEditor() {
    const data = document.getElementById("job-data");
    const live = document.querySelector('[data-live="data"]');
    if (!editor || !data) return;
    editor.elements.data.value = data.textContent; // the server's pretty-printed JSON
    editor.elements.retry.hidden = live.dataset.state !== "failed";
    setEditError("");
    editor.hidden = false;
    document.getElementById("data-panel").classList.add("editing");
    editor.elements.data.focus();
  }

  function closeEditor() {
    editor.hidden = true;
    document.getElementById("data-panel").classList.remove("editing");
  }

  function setEditError(text) {
    document.getElementById("edit-error").textContent = text;
    if (text) editor.elements.data.setAttribute("aria-invalid", "true");
    else editor.elements.data.removeAttribute("aria-invalid");
  }

  async function saveData(retry) {
    let data;
    try {
      data = JSON.parse(editor.elements.data.value);
    } catch (error) {
      setEditError(`Not valid JSON, nothing was saved: ${error.message}`);
      editor.elements.data.focus();
      return;
    }
    setEditError("");
    if (!(await send("PUT", editor.dataset.url, data))) return;
    // A revealed panel is left out of refreshes: it shows what was saved itself.
    const revealed = document.querySelector('[data-live="data"][data-revealed]');
    if (revealed) document.getElementById("job-data").textContent = JSON.stringify(data, null, 2);
    if (retry) await send("POST", editor.dataset.retryUrl);
    closeEditor();
    refreshNow();
  }

  // -- reveal ------------------------------------------------------------------------------
  // The payload hidden from the user's view, shown once the server has recorded the reveal
  // in the audit log; the panel is then left out of refreshes, which would hide it anew.
  async function reveal(button) {
    if (!(await send("POST", button.dataset.reveal))) return;
    const job = send.answer.job;
    const shown = { "job-data": "data", "job-result": "result", "job-progress": "progress_data" };
    for (const [id, name] of Object.entries(shown)) {
      const pre = document.getElementById(id);
      if (pre && name in job) pre.textContent = JSON.stringify(job[name], null, 2);
    }
    for (const name of ["signals", "steps"]) {
      const shownPairs = document.getElementById(`job-${name}`);
      if (shownPairs && name in job) shownPairs.replaceWith(pairs(job[name], shownPairs.id));
    }
    button.closest('[data-live="data"]').setAttribute("data-revealed", "");
    document.getElementById("hidden-note").hidden = true;
    const edit = document.getElementById("edit-data");
    if (edit) edit.hidden = false;
  }

  // A job's signals or steps as the page shows them (the pairs macro of _macros.html): a
  // list of name -> value, or one value ("[hidden]"). Text only.
  function pairs(value, id) {
    const pretty = (v) => {
      const pre = document.createElement("pre");
      pre.className = "json";
      pre.textContent = JSON.stringify(v, null, 2);
      return pre;
    };
    if (value === null || typeof value !== "object" || Array.isArray(value)) {
      const pre = pretty(value);
      pre.id = id;
      return pre;
    }
    const list = document.createElement("dl");
    list.className = "pairs";
    list.id = id;
    for (const [name, v] of Object.entries(value)) {
      const term = document.createElement("dt");
      term.className = "mono";
      term.textContent = name;
      const detail = document.createElement("dd");
      detail.append(pretty(v));
      list.append(term, detail);
    }
    return list;
  }

  document.addEventListener("click", (event) => {
    const revealing = event.target.closest("[data-reveal]");
    const signalling = event.target.closest("[data-signal]");
    if (revealing) reveal(revealing);
    else if (signalling) openSignal(signalling);
    else if (event.target.closest("[data-signal-close]")) closeSignal();
    else if (event.target.closest("[data-edit]")) openEditor();
    else if (event.target.closest("[data-discard]")) closeEditor();
  });

  if (editor) {
    editor.elements.data.addEventListener("input", () => setEditError(""));
    // (#edit names no element: a fragment naming a hidden one would take the focus away.)
    // Not while the data is masked (the Edit button is hidden until Reveal): saving the
    // editor's text would write "[hidden]" where the sensitive values are.
    const edit = document.getElementById("edit-data");
    if (location.hash === "#edit" && edit && !edit.hidden) openEditor();
  }

  // -- a signal ----------------------------------------------------------------------------
  // Signal opens a small form in a dialog (outside the live parts): the signal's name, filled
  // with the one the job waits for when it waits, and an optional payload. Text that is not
  // JSON is told in the form and nothing is sent. Once sent, the page refreshes at once.
  const signalDialog = document.getElementById("signal-dialog");

  function openSignal(button) {
    if (!signalDialog) return;
    const form = document.getElementById("signal-form");
    if (button.dataset.signal) form.elements.name.value = button.dataset.signal;
    setSignalError("");
    signalDialog.showModal();
    (form.elements.name.value ? form.elements.payload : form.elements.name).focus();
  }

  function closeSignal() {
    signalDialog.close();
  }

  // `field`: the field at fault, marked invalid and focused.
  function setSignalError(text, field = null) {
    const form = document.getElementById("signal-form");
    document.getElementById("signal-error").textContent = text;
    for (const f of [form.elements.name, form.elements.payload]) {
      if (f === field) f.setAttribute("aria-invalid", "true");
      else f.removeAttribute("aria-invalid");
    }
    if (field) field.focus();
  }

  async function sendSignal(form) {
    const name = form.elements.name.value.trim();
    const text = form.elements.payload.value.trim();
    if (!name) return setSignalError("Name the signal: nothing was sent.", form.elements.name);
    const body = { name };
    if (text) {
      try {
        body.payload = JSON.parse(text);
      } catch (error) {
        const told = `Not valid JSON, nothing was sent: ${error.message}`;
        return setSignalError(told, form.elements.payload);
      }
    }
    setSignalError("");
    const button = document.getElementById("signal-send");
    button.disabled = true;
    send.answer = null; // not an earlier answer, when this one never comes
    const ok = await send("POST", form.dataset.url, body);
    button.disabled = false;
    if (!ok) {
      // Told in the form too: the message behind the dialog's backdrop is dimmed.
      return setSignalError((send.answer && send.answer.error) || "The signal was not sent.");
    }
    form.reset();
    signalDialog.close();
    refreshNow();
  }

  if (signalDialog) {
    const form = document.getElementById("signal-form");
    form.addEventListener("input", () => setSignalError(""));
  }

  // -- the job's stream --------------------------------------------------------------------
  // The parts a job streams (job.stream()), from the API's Server-Sent Events as they come: a
  // string appended as text (a stream of tokens reads as prose), any other value as a line of
  // JSON, each attempt's after a marker. Text only, never HTML. Once followed, the panel is
  // left out of refreshes, which would empty it. On "end" the EventSource is closed (else it
  // reconnects and is told the end again); a refresh showing the job retried follows it anew,
  // after the last part it had. A suspended job (waiting for a signal, maybe for days) is
  // read once, not followed, and a followed job that comes to wait ends its stream (the
  // server says so): a refresh showing it running again follows it.
  const ENDED = ["complete", "failed"];
  // {panel, source, state (the job's when listened to), last (entry id), attempt, parts,
  // ended (when, in ms), refused (connections refused in a row)}
  let output = null;
  const MOST_WAIT = 60000; // ms between two tries at most

  function follow() {
    const panel = document.getElementById("stream-panel");
    if (!panel || (output && output.panel === panel)) return;
    panel.parentElement.setAttribute("data-streaming", "");
    output = {
      panel,
      source: null,
      state: null,
      last: "",
      attempt: null,
      parts: 0,
      ended: 0,
      refused: 0,
    };
    listen(panel.dataset.state);
  }

  function listen(state) {
    const url = new URL(output.panel.dataset.stream, location.href);
    if (output.last) url.searchParams.set("after", output.last);
    if (state === "suspended") url.searchParams.set("once", "true");
    const source = new EventSource(url);
    output.source = source;
    output.state = state;
    output.ended = 0;
    streamStatus("off", "connecting…");
    streamEmpty("Nothing streamed yet.");
    source.onopen = () => {
      output.refused = 0;
      streamStatus("on", "live");
    };
    source.addEventListener("part", (message) => {
      const part = JSON.parse(message.data);
      output.last = message.lastEventId;
      addPart(part.attempt, part.value);
    });
    source.addEventListener("end", (message) => {
      source.close();
      output.ended = Date.now();
      const { state } = JSON.parse(message.data);
      if (state === "suspended") {
        streamStatus(state, "paused: waiting for a signal");
        return;
      }
      streamStatus(state, `ended: ${state}`);
      streamEmpty("Nothing streamed.");
    });
    source.onerror = () => {
      if (output.source !== source || output.ended) return;
      streamStatus("off", "reconnecting…");
      // Refused (the server restarting, a session that expired): try again later, a little
      // later each time; else the browser reconnects by itself.
      const status = document.getElementById("live-status");
      const gone = status && status.dataset.state === "gone";
      if (source.readyState === EventSource.CLOSED && !gone) {
        const wait = Math.min(RECONNECT * 2 ** output.refused, MOST_WAIT);
        output.refused += 1;
        setTimeout(() => output.source === source && listen(output.state), wait);
      }
    };
  }

  function addPart(attempt, value) {
    const box = document.getElementById("stream-output");
    const atEnd = box.scrollHeight - box.scrollTop - box.clientHeight < 8;
    if (attempt !== output.attempt && (output.attempt !== null || attempt > 1)) {
      const mark = document.createElement("div");
      mark.className = "stream-attempt";
      mark.dataset.attempt = attempt;
      mark.textContent = `attempt ${attempt}`;
      box.append(mark);
    }
    output.attempt = attempt;
    // Hidden from the user's role, each part is "[hidden]": one a line.
    if (typeof value === "string" && !("hidden" in output.panel.dataset)) {
      let text = box.lastElementChild;
      if (!text || !text.matches(".stream-text")) {
        text = document.createElement("span");
        text.className = "stream-text";
        box.append(text);
      }
      text.append(value); // a text node
    } else {
      const line = document.createElement("div");
      line.className = "stream-value";
      line.textContent = typeof value === "string" ? value : JSON.stringify(value);
      box.append(line);
    }
    output.parts += 1;
    box.hidden = false;
    document.getElementById("stream-empty").hidden = true;
    if (atEnd) box.scrollTop = box.scrollHeight;
  }

  // A job retried once its stream ended: followed again. (Only by a page fetched after the
  // end: one fetched before would show it still running.)
  function streamAgain(page) {
    const panel = page.querySelector("#stream-panel");
    const after = output && output.ended && output.ended < lastRefresh();
    const state = panel && panel.dataset.state;
    if (after && panel && !ENDED.includes(state) && state !== "suspended") listen(state);
  }

  function streamStatus(state, text) {
    const shown = document.getElementById("stream-state");
    shown.dataset.state = state;
    shown.textContent = text;
  }

  function streamEmpty(text) {
    if (!output.parts) document.getElementById("stream-empty").textContent = text;
  }

  document.addEventListener("submit", (event) => {
    const form = event.target.closest("form.edit-data, form.signal");
    if (!form) return;
    event.preventDefault();
    if (form.matches(".signal")) sendSignal(form);
    else saveData(event.submitter === form.elements.retry);
  });

  swapped.push((page) => {
    streamAgain(page);
    follow();
  });
  follow();
})();
