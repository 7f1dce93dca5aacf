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

  // Replace each data-live element whose content changed, keeping focus, open details and
  // what was typed into a field and not sent yet (a move's type, left while a question was
  // asked). A part holding the field being edited waits until the field loses focus.
  // "Changed" compares the server's HTML with what the server sent for the part last time,
  // not with the part as this script has touched it since (relative times): a refresh that
  // brings nothing new replaces nothing, so a control being clicked is never swapped away.
  let skipped = false;
  // A part under a press (pointer down, not yet up) waits too: swapped between the press and
  // its release, the click would land on nothing.
  let pressed = null;
  const served = new WeakMap();
  const swapped = []; // functions of a page's script, called with each page fetched
  for (const part of document.querySelectorAll("[data-live]")) served.set(part, part.innerHTML);

  function keepTyped(old, node) {
    for (const field of old.querySelectorAll("input[id], textarea[id]")) {
      if (field.type === "hidden" || field.value === field.defaultValue) continue;
      const twin = node.querySelector(`#${CSS.escape(field.id)}`);
      if (twin && twin.type === field.type) twin.value = field.value;
    }
  }

  function swap(page) {
    const active = document.activeElement;
    const focused = active && active.id;
    const editing = active && active.matches("input, select, textarea") ? active : null;
    for (const fresh of page.querySelectorAll("[data-live]")) {
      const old = document.querySelector(`[data-live="${CSS.escape(fresh.dataset.live)}"]`);
      if (!old || (served.get(old) ?? old.innerHTML) === fresh.innerHTML) continue;
      // A part a page's script keeps as it made it: a refresh would hide a revealed payload
      // again, empty a followed stream (static/job.js).
      if (old.hasAttribute("data-revealed") || old.hasAttribute("data-streaming")) continue;
      const busy = (editing && old.contains(editing)) || (pressed && old.contains(pressed));
      if (busy || old.querySelector("form[data-dirty]")) {
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
      keepTyped(old, node);
      served.set(node, fresh.innerHTML);
      old.replaceWith(node);
    }
    if (focused && document.activeElement === document.body) {
      const again = document.getElementById(focused);
      if (again) again.focus();
    }
    relativeTimes();
    markStopping();
    for (const hook of swapped) hook(page);
  }

  // -- the event stream --------------------------------------------------------------------
  let source = null;

  function connect() {
    const url = document.body.dataset.events;
    if (!url) return;
    source = new EventSource(url);
    source.onopen = () => {
      setStatus("on", "live");
      // Events may have been missed: between the page's rendering and this first opening,
      // or while away.
      schedule();
    };
    source.onmessage = (message) => {
      if (wanted(message)) schedule();
      trackedEvent(message);
    };
    source.onerror = () => {
      setStatus("off", "reconnecting…");
      if (source.readyState === EventSource.CLOSED) {
        // The server answered with an error (restarting, Redis down): try again later.
        source.close();
        setTimeout(connect, RECONNECT);
      }
    };
  }

  // A job page linked to other jobs listens to every event, and refreshes for those of the
  // ids its data-watch names (the job and those it lists; "*" for any, when a list is cut).
  function wanted(message) {
    const watch = document.querySelector("[data-watch]");
    if (!watch || watch.dataset.watch === "*") return true;
    let event;
    try {
      event = JSON.parse(message.data);
    } catch (error) {
      return true;
    }
    return event.id === undefined || watch.dataset.watch.split(" ").includes(String(event.id));
  }

  function setStatus(state, text) {
    if (!status) return;
    status.dataset.state = state;
    status.textContent = text;
    status.title = text;
  }

  // -- actions -----------------------------------------------------------------------------
  // A write to the JSON API, with `body` (any JSON value) when given; the answer's message
  // is shown. Returns whether it succeeded.
  async function send(method, url, body) {
    const options = {
      method,
      credentials: "same-origin",
      headers: { Accept: "application/json", "Content-Type": "application/json" },
    };
    if (body !== undefined) options.body = JSON.stringify(body);
    else if (method === "POST") options.body = "{}";
    let answer = {};
    let response;
    try {
      response = await fetch(url, options);
      answer = await response.json();
    } catch (error) {
      show(response ? `Failed (${response.status})` : "The server is unreachable", true);
      return false;
    }
    show(answer.message || answer.error || `Done (${response.status})`, !response.ok);
    send.answer = answer;
    return response.ok;
  }

  // A remove refused because jobs are blocked waiting for the job (409 naming them): offer to
  // remove them too (`?cascade=true`). Returns whether the job went.
  async function removeWaiting(url) {
    const waiting = send.answer && send.answer.dependents;
    if (!Array.isArray(waiting) || !waiting.length) return false;
    const ids = waiting.map((id) => `#${Number(id)}`).join(", ");
    const question =
      `Jobs ${ids} are blocked waiting for this job. ` +
      "Remove them too, with the jobs waiting for them?";
    const answer = await confirmed(question, { ok: "Remove all of them", back: "Keep them" });
    if (answer === null) return false;
    return send("DELETE", url + (url.includes("?") ? "&" : "?") + "cascade=true");
  }

  function show(text, isError) {
    toast.textContent = text;
    toast.classList.toggle("bad", Boolean(isError));
    toast.hidden = false;
    clearTimeout(show.timer);
    show.timer = setTimeout(() => (toast.hidden = true), 4000);
  }

  // Ask `question` in the confirmation dialog, with a reason field when `withReason`; the
  // buttons say `ok` and `back`. Resolves to null when declined, else to the reason given.
  // `items`: lines shown under the question (some of the jobs it is about), as text.
  function confirmed(
    question,
    { withReason = false, ok = "Confirm", back = "Cancel", items = [] } = {}
  ) {
    const dialog = document.getElementById("confirm");
    const reason = document.getElementById("confirm-reason-text");
    const list = document.getElementById("confirm-list");
    document.getElementById("confirm-text").textContent = question;
    list.replaceChildren(
      ...items.map((text) => {
        const item = document.createElement("li");
        item.textContent = text;
        return item;
      })
    );
    list.hidden = !items.length;
    document.getElementById("confirm-ok").textContent = ok;
    document.getElementById("confirm-back").textContent = back;
    document.getElementById("confirm-reason").hidden = !withReason;
    reason.value = "";
    return new Promise((resolve) => {
      dialog.addEventListener(
        "close",
        () => resolve(dialog.returnValue === "ok" ? reason.value.trim() : null),
        { once: true }
      );
      dialog.returnValue = "";
      dialog.showModal();
      if (withReason) reason.focus();
    });
  }

  // A worker process asked to stop leaves the list when it has finished, which no event
  // tells: until then its row says "Stopping…" and the page is fetched again every second.
  const STOP_WATCH = 60000; // ms to keep watching
  const stopping = new Map(); // worker id -> when to stop watching

  function markStopping() {
    for (const [id, until] of stopping) {
      const row = document.querySelector(`tr[data-worker="${CSS.escape(id)}"]`);
      if (!row || Date.now() > until) {
        stopping.delete(id);
        continue;
      }
      const button = row.querySelector("button[data-worker]");
      if (button) {
        button.disabled = true;
        button.textContent = "Stopping…";
      }
    }
    if (stopping.size) setTimeout(schedule, 1000);
  }

  // Enter in the reason field confirms (the form's first button would decline).
  document.getElementById("confirm-reason-text").addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      document.getElementById("confirm").close("ok");
    }
  });

  document.addEventListener("click", async (event) => {
    const button = event.target.closest("button[data-url]");
    if (!button || button.disabled) return;
    event.preventDefault();
    const data = button.dataset;
    let body = data.body ? JSON.parse(data.body) : undefined;
    if (data.confirm) {
      const withReason = data.reason !== undefined;
      const reason = await confirmed(data.confirm, { withReason, ok: data.ok, back: data.back });
      if (reason === null) return;
      if (reason) body = { ...body, reason };
    }
    button.disabled = true;
    let ok = await send(data.method, data.url, body);
    if (!ok && data.method === "DELETE") ok = await removeWaiting(data.url);
    button.disabled = false;
    if (ok && data.worker) stopping.set(data.worker, Date.now() + STOP_WATCH);
    if (ok && data.after) location.assign(data.after);
    else refreshNow();
    markStopping();
  });

  // Move a job to another type; a running one only once told its attempt will be stopped.
  async function move(form) {
    const type = form.elements.type.value.trim();
    if (!type) return;
    let url = form.dataset.url + encodeURIComponent(type);
    if (form.dataset.running !== undefined) {
      const question =
        `Job #${form.dataset.job} is running: moving it to ${type} stops its running ` +
        "attempt (not counted), and it waits under the new type.";
      if ((await confirmed(question, { ok: "Stop and move", back: "Keep it running" })) === null)
        return;
      url += "?force=true";
    }
    if (await send("PUT", url)) {
      form.elements.type.value = "";
      refreshNow();
    }
  }

  // The workers that alone may run the job (ids separated by spaces or commas; none: any).
  async function setOnly(form) {
    const workers = form.elements.workers.value.split(/[\s,]+/).filter(Boolean);
    if (form.dataset.running !== undefined) {
      const question =
        `Job #${form.dataset.job} is running: on a worker no longer allowed, its run stops ` +
        "(not counted as an attempt) and waits for the new workers.";
      if ((await confirmed(question, { ok: "Change workers", back: "Keep them" })) === null)
        return;
    }
    if (await send("PUT", form.dataset.url, { workers: workers.length ? workers : null }))
      refreshNow();
  }

  async function addTag(form) {
    const tag = form.elements.tag.value.trim();
    if (!tag) return;
    if (await send("PUT", form.dataset.url + encodeURIComponent(tag))) {
      form.elements.tag.value = "";
      refreshNow();
    }
  }

  // -- the events of tracked jobs (overview) -----------------------------------------------
  // The live table of tracked jobs names their ids; each of their events is listed as it
  // comes, newest first, the last TRACKED_SHOWN kept. Text only, never HTML.
  const TRACKED_SHOWN = 50;

  function trackedEvent(message) {
    const list = document.getElementById("tracked-events");
    const table = document.getElementById("tracked");
    if (!list || !table) return;
    let event;
    try {
      event = JSON.parse(message.data);
    } catch (error) {
      return;
    }
    const ids = new Set((table.dataset.ids || "").split(" "));
    if (!ids.has(String(event.id))) return;
    const item = document.createElement("li");
    const when = new Date().toLocaleTimeString();
    const args = (event.args || []).slice(1).map((a) => JSON.stringify(a)).join(" ");
    item.textContent = `${when} #${event.id} ${event.type || ""} ${event.event} ${args}`.trim();
    list.prepend(item);
    while (list.children.length > TRACKED_SHOWN) list.lastElementChild.remove();
    const empty = document.getElementById("tracked-events-empty");
    if (empty) empty.hidden = true;
  }

  // -- limits (limits page) ----------------------------------------------------------------
  // A form per job type, sent whole as the JSON body of PUT /api/limits/<type>: an empty
  // field is null (that limit removed). A form typed in is not replaced by a refresh (swap)
  // until it is saved or closed.
  function limitsBody(form) {
    const f = form.elements;
    const number = (input) => (input.value.trim() === "" ? null : Number(input.value));
    const rate = (name) => {
      const max = number(f[`${name}-max`]);
      const per = number(f[`${name}-per`]);
      if (max === null && per === null) return null;
      const perMs = per === null ? null : Math.round(per * Number(f[`${name}-unit`].value));
      return { max, perMs };
    };
    return {
      rate: rate("rate"),
      concurrency: number(f.concurrency),
      groupRate: rate("group-rate"),
      groupConcurrency: number(f["group-concurrency"]),
    };
  }

  async function saveLimits(form) {
    if (!(await send("PUT", form.dataset.url, limitsBody(form)))) return;
    delete form.dataset.dirty;
    const details = form.closest("details");
    if (details) details.open = false;
    refreshNow();
  }

  document.addEventListener("input", (event) => {
    const form = event.target.closest("form.limits");
    if (form) form.dataset.dirty = "";
  });

  document.addEventListener(
    "toggle",
    (event) => {
      const form = event.target.matches("details") && event.target.querySelector("form.limits");
      if (!form || event.target.open || form.dataset.dirty === undefined) return;
      form.reset();
      delete form.dataset.dirty;
      schedule();
    },
    true // toggle does not bubble
  );

  // -- bulk actions on a filter (jobs lists) ------------------------------------------------
  // Count what the filter matches, ask with that count, then act server-side: a long action
  // is followed (its progress shown, a Stop button) until it ends.
  function bulkFilter(form) {
    const f = form.elements;
    const filter = { state: form.dataset.state };
    if (form.dataset.type) filter.type = form.dataset.type;
    if (f.tag.value.trim()) filter.tag = f.tag.value.trim();
    if (f.words.value.trim()) filter.words = f.words.value.trim();
    if (Number(f.min_age_ms.value)) filter.min_age_ms = Number(f.min_age_ms.value);
    return filter;
  }

  const capitalized = (word) => `${word[0].toUpperCase()}${word.slice(1)}`;

  function bulkQuestion(action, matched, filter, form) {
    const parts = [`${matched} ${filter.state} job${matched === 1 ? "" : "s"}`];
    if (filter.type) parts.push(`of type ${filter.type}`);
    if (filter.tag) parts.push(`tagged ${filter.tag}`);
    if (filter.words) parts.push(`found by "${filter.words}"`);
    const age = form.elements.min_age_ms;
    if (filter.min_age_ms) parts.push(`created ${age.options[age.selectedIndex].text}`);
    const undo = action === "remove" ? " This deletes them and cannot be undone." : "";
    return `${capitalized(action)} ${parts.join(" ")}?${undo}`;
  }

  // What the filter matches now: {matched, examples (as lines)}, or null (said why).
  async function bulkMatch(form, filter) {
    try {
      const response = await fetch(`${form.dataset.match}?${new URLSearchParams(filter)}`, {
        credentials: "same-origin",
        headers: { Accept: "application/json" },
      });
      const answer = await response.json();
      if (!response.ok) {
        show(answer.error || `Failed (${response.status})`, true);
        return null;
      }
      const examples = answer.examples.map(
        (e) => `#${e.id} ${e.type}${e.title ? ` · ${e.title}` : ""}`
      );
      return { matched: answer.matched, examples };
    } catch (error) {
      show("The server is unreachable", true);
      return null;
    }
  }

  // Ask with the count, then act on that count: when the filter matches another number by
  // the time the server starts (409), nothing was done and the operator is asked again.
  async function bulkApply(form) {
    const filter = bulkFilter(form);
    const action = form.elements.action.value;
    let found = await bulkMatch(form, filter);
    let before = null; // the count asked about last, when the server found another
    while (found) {
      const { matched, examples } = found;
      if (!matched) return show("No job matches this filter.", false);
      if (matched > examples.length) examples.push(`and ${matched - examples.length} more`);
      let question = bulkQuestion(action, matched, filter, form);
      if (before !== null)
        question = `The filter matches ${matched} now, not ${before}: nothing was done. ${question}`;
      const ok = `${capitalized(action)} ${matched}`;
      if ((await confirmed(question, { ok, back: "Cancel", items: examples })) === null) return;
      const body = { action, filter, expect: matched };
      if (action === "cancel" && form.elements.reason.value.trim())
        body.reason = form.elements.reason.value.trim();
      const applied = document.getElementById("bulk-apply");
      applied.disabled = true;
      send.answer = null; // not an earlier answer, when this one never comes
      const sent = await send("POST", form.dataset.url, body);
      applied.disabled = false;
      if (sent) {
        await bulkFollow(send.answer);
        return refreshNow();
      }
      refreshNow();
      if (!send.answer || typeof send.answer.expected !== "number") return;
      before = matched;
      found = await bulkMatch(form, filter);
    }
  }

  async function bulkFollow(status) {
    const box = document.getElementById("bulk-progress");
    const bar = box.querySelector("progress");
    const text = box.querySelector(".bulk-text");
    const stop = document.getElementById("bulk-stop");
    box.hidden = false;
    stop.onclick = async () => {
      stop.disabled = true;
      await send("DELETE", status.follow);
    };
    for (;;) {
      const matched = status.matched || 0;
      const part = matched ? Math.min(99, (status.done / matched) * 100) : 0;
      bar.value = status.state === "done" ? 100 : part;
      const verb = status.state === "running" ? "so far" : status.state;
      text.textContent = `${status.done} of ${matched} matched jobs: ${status.action} ${verb}`;
      stop.hidden = status.state !== "running" || !status.follow;
      if (status.state !== "running" || !status.follow) break;
      await new Promise((resolve) => setTimeout(resolve, 500));
      try {
        const response = await fetch(status.follow, { credentials: "same-origin" });
        if (!response.ok) break;
        status = { ...(await response.json()), follow: status.follow };
      } catch (error) {
        break;
      }
    }
    stop.disabled = false;
    show(`${status.action}: ${status.done} of ${status.matched} jobs (${status.state})`, false);
  }

  document.addEventListener("change", (event) => {
    const form = event.target.closest("form.bulk-filter");
    if (form && event.target.name === "action")
      form.querySelector(".bulk-reason").hidden = event.target.value !== "cancel";
  });

  document.addEventListener("submit", async (event) => {
    const form = event.target.closest(
      "form.priority, form.move, form.only, form.add-tag, form.limits, form.bulk-filter"
    );
    if (!form) return;
    event.preventDefault();
    if (form.matches(".bulk-filter")) return bulkApply(form);
    if (form.matches(".limits")) return saveLimits(form);
    if (form.matches(".move")) return move(form);
    if (form.matches(".only")) return setOnly(form);
    if (form.matches(".add-tag")) return addTag(form);
    const value = form.elements.priority.value;
    if (await send("PUT", form.dataset.url + encodeURIComponent(value))) refreshNow();
  });

  function resumeSkipped() {
    if (skipped) {
      skipped = false;
      schedule();
    }
  }

  document.addEventListener("focusout", resumeSkipped);
  document.addEventListener("pointerdown", (event) => (pressed = event.target), true);
  for (const end of ["pointerup", "pointercancel"]) {
    document.addEventListener(
      end,
      () => {
        pressed = null;
        resumeSkipped();
      },
      true,
    );
  }

  document.addEventListener("change", (event) => {
    if (event.target.matches("select[data-autosubmit]")) event.target.form.requestSubmit();
  });

  // A filter chosen before this script ran (on a slow page) had no listener: apply it now.
  for (const select of document.querySelectorAll("select[data-autosubmit]")) {
    const initial = [...select.options].find((o) => o.defaultSelected) ?? select.options[0];
    if (select.selectedIndex >= 0 && select.options[select.selectedIndex] !== initial) {
      select.form.requestSubmit();
      break;
    }
  }

  // "/" jumps to the search box, as on most sites with one.
  document.addEventListener("keydown", (event) => {
    const typing = event.target.closest("input, select, textarea, [contenteditable]");
    if (event.key === "/" && !typing && !event.ctrlKey && !event.metaKey) {
      event.preventDefault();
      document.getElementById("find").focus();
    }
  });

  // The header's menu of pages (a phone's): closed by a tap elsewhere or Escape.
  const menu = document.getElementById("pages-menu");
  if (menu) {
    document.addEventListener("click", (event) => {
      if (menu.open && !menu.contains(event.target)) menu.open = false;
    });
    document.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && menu.open) {
        menu.open = false;
        menu.querySelector("summary").focus();
      }
    });
  }

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

  // A page whose state changes without job events (the rules page: events taken from plain
  // lists) names how often to fetch it again (ms) in data-poll.
  const poll = document.querySelector("[data-poll]");
  if (poll && Number(poll.dataset.poll) > 0) setInterval(schedule, Number(poll.dataset.poll));

  relativeTimes();
  setInterval(relativeTimes, 5000);
  connect();

  // What a page's own script (static/job.js) uses: each hook of `swapped` is called with the
  // page fetched, after each refresh has swapped in its parts.
  window.kue = {
    send,
    refreshNow,
    swapped,
    lastRefresh: () => lastStart,
    RECONNECT,
  };
})();
