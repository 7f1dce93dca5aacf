// The buttons of the dashboard page shown that cannot be reached (none: a list empty), every
// <details> of main open: out of the screen's width, in a box that scrolls or hides sideways,
// or covered where a tap on their middle lands. See tests/browser/test_reach_browser.py.
() => {
  for (const d of document.querySelectorAll("main details")) d.open = true;
  const wrong = [];
  const name = (el) => `${el.tagName.toLowerCase()}${el.id ? "#" + el.id : ""} "${el.textContent.trim().slice(0, 30)}"`;
  const controls = document.querySelectorAll(
    "main button, main a.btn, main summary, main select, header.top a, header.top summary, header.top input");
  for (const el of controls) {
    if (!el.checkVisibility() || el.closest(".sr, [hidden], dialog")) continue;
    const r0 = el.getBoundingClientRect();
    if (!r0.width || !r0.height) continue;
    window.scrollTo(0, Math.max(0, r0.top + scrollY - innerHeight / 2));
    const r = el.getBoundingClientRect();
    if (r.left < -1 || r.right > innerWidth + 1) {
      wrong.push(`${name(el)} is outside the screen (${Math.round(r.left)}..${Math.round(r.right)})`);
      continue;
    }
    let cut = null;
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
      if (getComputedStyle(a).overflowX === "visible") continue;
      const box = a.getBoundingClientRect();
      if (r.left < box.left - 1 || r.right > box.right + 1 || a.scrollWidth > a.clientWidth + 1) cut = a;
    }
    if (cut) {
      wrong.push(`${name(el)} is in a box that scrolls sideways (${cut.tagName.toLowerCase()}.${cut.className})`);
      continue;
    }
    const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    if (!hit || !(el === hit || el.contains(hit) || hit.contains(el) && hit.tagName === "LABEL"))
      wrong.push(`${name(el)} is covered by ${hit ? hit.tagName.toLowerCase() + "." + hit.className : "nothing"}`);
  }
  window.scrollTo(0, 0);
  return [...new Set(wrong)];
}
