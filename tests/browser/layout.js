// What is wrong with the dashboard page shown, as a list of lines (none: nothing); see
// tests/browser/test_layout_browser.py. `strict` (1280 and 1024 px): no box may scroll
// sideways and no word may break across lines; on a phone, tables may scroll in their panel.
(strict) => {
  const wrong = [];
  for (const d of document.querySelectorAll("main details")) d.open = true;
  const name = (el) => {
    const classes = typeof el.className === "string" ? el.className.trim().split(/\s+/) : [];
    return el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + classes.map((c) => c && "." + c).join("");
  };
  const shown = (el) => el.checkVisibility() && !el.closest(".sr");
  const scroller = (el) => ["auto", "scroll"].includes(getComputedStyle(el).overflowX);
  const inScroller = (el) => {
    for (let a = el.parentElement; a && a.tagName !== "MAIN"; a = a.parentElement) if (scroller(a)) return true;
    return false;
  };
  const doc = document.documentElement;
  if (doc.scrollWidth > innerWidth + 1) wrong.push(`the page scrolls sideways (${doc.scrollWidth} px)`);
  const main = document.querySelector("main").getBoundingClientRect();
  for (const el of document.querySelectorAll("main *, header.top *")) {
    if (!shown(el)) continue;
    const hides = ["auto", "scroll", "hidden", "clip"].includes(getComputedStyle(el).overflowX);
    const allowed = !strict && el.classList.contains("table-wrap");
    if (hides && !allowed && el.scrollWidth > el.clientWidth + 1)
      wrong.push(`${name(el)} hides ${el.scrollWidth - el.clientWidth} px of its content`);
    if (el.closest("main") && !inScroller(el)) {
      const r = el.getBoundingClientRect();
      if (r.width && (r.right > main.right + 1 || r.left < main.left - 1))
        wrong.push(`${name(el)} sticks out of the page (${Math.round(r.left)}..${Math.round(r.right)})`);
    }
  }
  if (strict) {
    const texts = document.querySelectorAll("main td, main th, main dt, main dd, main li, main h1, main h2, .card, header.top a");
    for (const el of texts) {
      if (!shown(el)) continue;
      const walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
      for (let node = walk.nextNode(); node; node = walk.nextNode()) {
        for (const m of node.data.matchAll(/\S+/g)) {
          if (m[0].length < 2 || m[0].length > 24) continue;  // a long URL may well break
          const range = document.createRange();
          range.setStart(node, m.index);
          range.setEnd(node, m.index + m[0].length);
          const lines = new Set([...range.getClientRects()].filter((r) => r.width).map((r) => Math.round(r.top)));
          if (lines.size > 1) wrong.push(`"${m[0]}" is cut across lines in ${name(el)}`);
        }
      }
    }
  }
  return [...new Set(wrong)];
}
