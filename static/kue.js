// kue dashboard: live refresh from the event stream, and actions through the JSON API.
//
// Pages are rendered (and escaped) by the server. When events arrive, this script fetches
// the page again and swaps in the elements marked data-live, at most once per REFRESH_GAP,
// so a busy queue costs one page fetch a second, not one per event. Nothing here builds
// HTML from strings: only textContent and nodes parsed from the server's own pages.
"use strict";

(() => {
  const REFRESH_GAP = 700; // ms between two refreshes
  const FIRST_DELAY = 100; // ms from the first event to its refresh, to gather a burst
  const RECONNECT = 3000; // ms before opening a stream the server closed for good
  const status = document.getElementById("live-status");
  const toast = document.getElementById("toast");

  // -- live refresh ------------------------------------------------------------------------
  let timer = null;
  let running = false;
  let again = false;
  let lastStart = 0;

  function schedule() {
    if (running) {
      again = true;
      return;
    }
    if (timer !== null) return;
    const wait = Math.max(FIRST_DELAY, lastStart + REFRESH_GAP - Date.now());
    timer = setTimeout(refresh, wait);
  }

  // After an action: show its effect at once rather than wait for its events.
  function refreshNow() {
    clearTimeout(timer);
    timer = null;
    if (running) again = true;
    else refresh();
  }

  async function refresh() {
    timer = null;
    running = true;
    lastStart = Date.now();
    try {
      const response = await fetch(location.href, {
        headers: { Accept: "text/html" },
        credentials: "same-origin",
        cache: "no-store",
      });
      if (response.status === 404) {
        setStatus("gone", "this job no longer exists");
        return;
      }
      if (!response.ok) {
        setStatus("error", `refresh failed (${response.status})`);
        return;
      }
      const page = new DOMParser().parseFromString(await response.text(), "text/html");
      swap(page);
      if (source && source.readyState === EventSource.OPEN) setStatus("on", "live");
    } catch (error) {
      setStatus("error", "server unreachable");
    } finally {
      running = false;
      if (again) {
        again = false;
        schedule();
      }
    }
  }

  // Replace each data-live element whose content changed, keeping focus and open details.
  // A part holding the field being edited waits until the field loses focus.
  let skipped = false;

  function swap(page) {
    const active = document.activeElement;
    const focused = active && active.id;
    const editing = active && active.matches("input, select, textarea") ? active : null;
    for (const fresh of page.querySelectorAll("[data-live]")) {
      const old = document.querySelector(`[data-live="${CSS.escape(fresh.dataset.live)}"]`);
      if (!old || old.innerHTML === fresh.innerHTML) continue;
      if (editing && old.contains(editing)) {
        skipped = true;
        continue;
      }
      const open = new Set(
        [...old.querySelectorAll("details[open] > summary")].map((s) => s.textContent)
      );
      const node = document.importNode(fresh, true);
      for (const s of node.querySelectorAll("details > summary")) {
        if (open.has(s.textContent)) s.parentElement.open = true;
      }
      old.replaceWith(node);
    }
    if (focused && document.activeElement === document.body) {
      const again = document.getElementById(focused);
      if (again) again.focus();
    }
    relativeTimes();
  }

  // -- the event stream --------------------------------------------------------------------
  let source = null;
  let broken = false;

  function connect() {
    const url = document.body.dataset.events;
    if (!url) return;
    source = new EventSource(url);
    source.onopen = () => {
      setStatus("on", "live");
      if (broken) schedule(); // events may have been missed while away
      broken = false;
    };
    source.onmessage = schedule;
    source.onerror = () => {
      broken = true;
      setStatus("off", "reconnecting…");
      if (source.readyState === EventSource.CLOSED) {
        // The server answered with an error (restarting, Redis down): try again later.
        source.close();
        setTimeout(connect, RECONNECT);
      }
    };
  }

  function setStatus(state, text) {
    if (!status) return;
    status.dataset.state = state;
    status.textContent = text;
  }

  // -- actions -----------------------------------------------------------------------------
  async function send(method, url) {
    const options = {
      method,
      credentials: "same-origin",
      headers: { Accept: "application/json", "Content-Type": "application/json" },
    };
    if (method === "POST") options.body = "{}";
    let body = {};
    let response;
    try {
      response = await fetch(url, options);
      body = await response.json();
    } catch (error) {
      show(response ? `Failed (${response.status})` : "The server is unreachable", true);
      return false;
    }
    show(body.message || body.error || `Done (${response.status})`, !response.ok);
    return response.ok;
  }

  function show(text, isError) {
    toast.textContent = text;
    toast.classList.toggle("bad", Boolean(isError));
    toast.hidden = false;
    clearTimeout(show.timer);
    show.timer = setTimeout(() => (toast.hidden = true), 4000);
  }

  function confirmed(question) {
    const dialog = document.getElementById("confirm");
    document.getElementById("confirm-text").textContent = question;
    return new Promise((resolve) => {
      dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), {
        once: true,
      });
      dialog.returnValue = "";
      dialog.showModal();
    });
  }

  document.addEventListener("click", async (event) => {
    const button = event.target.closest("button[data-url]");
    if (!button || button.disabled) return;
    event.preventDefault();
    if (button.dataset.confirm && !(await confirmed(button.dataset.confirm))) return;
    button.disabled = true;
    const ok = await send(button.dataset.method, button.dataset.url);
    button.disabled = false;
    if (ok && button.dataset.after) location.assign(button.dataset.after);
    else refreshNow();
  });

  document.addEventListener("submit", async (event) => {
    const form = event.target.closest("form.priority");
    if (!form) return;
    event.preventDefault();
    const value = form.elements.priority.value;
    if (await send("PUT", form.dataset.url + encodeURIComponent(value))) refreshNow();
  });

  document.addEventListener("focusout", () => {
    if (skipped) {
      skipped = false;
      schedule();
    }
  });

  document.addEventListener("change", (event) => {
    if (event.target.matches("select[data-autosubmit]")) event.target.form.requestSubmit();
  });

  // "/" jumps to the search box, as on most sites with one.
  document.addEventListener("keydown", (event) => {
    const typing = event.target.closest("input, select, textarea, [contenteditable]");
    if (event.key === "/" && !typing && !event.ctrlKey && !event.metaKey) {
      event.preventDefault();
      document.getElementById("find").focus();
    }
  });

  // -- relative times ----------------------------------------------------------------------
  function ago(ms) {
    const delta = (ms - Date.now()) / 1000;
    const seconds = Math.abs(delta);
    let text;
    if (seconds < 60) text = `${Math.round(seconds)}s`;
    else if (seconds < 3600) text = `${Math.floor(seconds / 60)}m`;
    else if (seconds < 86400) text = `${Math.floor(seconds / 3600)}h`;
    else text = `${Math.floor(seconds / 86400)}d`;
    return delta > 0.5 ? `in ${text}` : `${text} ago`;
  }

  function relativeTimes() {
    for (const t of document.querySelectorAll("time[data-ms]")) {
      t.textContent = ago(Number(t.dataset.ms));
    }
  }

  relativeTimes();
  setInterval(relativeTimes, 5000);
  connect();
})();
