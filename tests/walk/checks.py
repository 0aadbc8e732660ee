"""What the layout walk measures on a rendered page, in the page itself.

Each function returns a list of offences (short strings), empty when the page
is fine, so one walk can report every page's problems at once.
"""

from __future__ import annotations

from playwright.sync_api import Page

LABEL_GAP_PX = 48

# An element sticks out when it reaches past the window's right edge, or
# starts left of it while still showing (a box wholly off to the left, such as
# a skip link, is hidden on purpose). Boxes inside a deliberate scroller
# (overflow-x auto or scroll) may be as wide as they like.
OVERFLOW = r"""() => {
  const out = [];
  const width = document.documentElement.clientWidth;
  const scrolled = (el) => {
    for (let box = el.parentElement; box; box = box.parentElement) {
      const o = getComputedStyle(box).overflowX;
      if (o === "auto" || o === "scroll") return true;
    }
    return false;
  };
  if (document.documentElement.scrollWidth > width + 1) {
    out.push(`page is ${document.documentElement.scrollWidth} px wide in a ${width} px window`);
  }
  const sticks = (el) => {
    const r = el.getBoundingClientRect();
    if (!r.width || !r.height) return false;
    const style = getComputedStyle(el);
    if (style.visibility === "hidden" || style.position === "fixed") return false;
    return r.right > width + 1 || (r.left < -1 && r.right > 0);
  };
  for (const el of document.body.querySelectorAll("*")) {
    // The outermost box that sticks out names the fault; its children follow.
    if (sticks(el) && !scrolled(el) && !(el.parentElement && sticks(el.parentElement))) {
      const r = el.getBoundingClientRect();
      out.push(`${el.tagName.toLowerCase()}${el.id ? "#" + el.id : ""}${el.className && typeof el.className === "string" ? "." + el.className.trim().split(/\s+/).join(".") : ""} spans ${Math.round(r.left)}..${Math.round(r.right)} px: ${(el.innerText || "").replace(/\s+/g, " ").trim().slice(0, 50)}`);
      if (out.length > 8) break;
    }
  }
  return out;
}"""

# The distance from a label's own text to its control, box to box.
LABELS = r"""(limit) => {
  const out = [];
  const textBox = (label, control) => {
    let box = null;
    const walker = document.createTreeWalker(label, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (!node.textContent.trim() || (control && control.contains(node))) continue;
      const range = document.createRange();
      range.selectNodeContents(node);
      for (const r of range.getClientRects()) {
        if (!r.width) continue;
        box = box ? {left: Math.min(box.left, r.left), right: Math.max(box.right, r.right),
                     top: Math.min(box.top, r.top), bottom: Math.max(box.bottom, r.bottom)}
                  : {left: r.left, right: r.right, top: r.top, bottom: r.bottom};
      }
    }
    return box;
  };
  for (const label of document.querySelectorAll("label")) {
    const control = label.control;
    if (!control || control.type === "hidden") continue;
    // Django's two-box chooser: the label titles a box whose own search field
    // and help sit between it and the list.
    if (control.closest(".selector")) continue;
    const c = control.getBoundingClientRect();
    if (!c.width || !c.height) continue;
    const t = textBox(label, control);
    if (!t) continue;
    const dx = Math.max(0, t.left - c.right, c.left - t.right);
    const dy = Math.max(0, t.top - c.bottom, c.top - t.bottom);
    const gap = Math.round(Math.hypot(dx, dy));
    if (gap > limit) out.push(`"${label.innerText.replace(/\s+/g, " ").trim().slice(0, 40)}" is ${gap} px from its ${control.tagName.toLowerCase()}`);
  }
  return out;
}"""

# A word (a letter and the lower-case letters after it) whose letters land on
# two lines of a table cell was broken mid-word. Tokens with a digit (ids,
# hashes, times) and tokens too long to be words (a receiver's blob) may break.
BROKEN_WORDS = r"""() => {
  const out = [];
  const word = /[A-Za-z][a-z]{2,}/g;
  const token = /\S+/g;
  for (const cell of document.querySelectorAll("td, th")) {
    if (!cell.getClientRects().length) continue;
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const text = node.textContent;
      if (!/[a-z]{3}/.test(text)) continue;
      for (const t of text.matchAll(token)) {
       if (/\d/.test(t[0]) || t[0].length > 40) continue;
       for (const m of t[0].matchAll(word)) {
        const start = t.index + m.index;
        const range = document.createRange();
        range.setStart(node, start);
        range.setEnd(node, start + m[0].length);
        const tops = new Set([...range.getClientRects()].filter(r => r.width).map(r => Math.round(r.top)));
        if (tops.size > 1) {
          out.push(`"${m[0]}" broken in a cell: ${text.replace(/\s+/g, " ").trim().slice(0, 60)}`);
          break;
        }
       }
      }
      if (out.length > 8) return out;
    }
  }
  return out;
}"""

# Template syntax that reached the page: a `{# ... #}` comment spread over
# lines (Django's {# #} is one line only), or a tag the engine never saw.
TEMPLATE_MARKS = ("{#", "#}", "{%")

TEMPLATE_LEFT = r"""(marks) => {
  const html = document.documentElement.outerHTML;
  const out = [];
  for (const mark of marks) {
    const at = html.indexOf(mark);
    if (at >= 0) out.push(`"${mark}" in the page: ${html.slice(Math.max(0, at - 30), at + 50).replace(/\s+/g, " ")}`);
  }
  return out;
}"""

# A table wider than the box that scrolls it: at a desktop width the reader
# should not need an inner scrollbar to reach a column.
TABLE_SCROLLS = r"""() => {
  const out = [];
  for (const table of document.body.querySelectorAll("table")) {
    if (!table.getClientRects().length) continue;
    let box = table.parentElement;
    for (; box; box = box.parentElement) {
      const o = getComputedStyle(box).overflowX;
      if (o === "auto" || o === "scroll") break;
    }
    if (!box) continue;
    const inner = box.getBoundingClientRect().left + box.clientLeft + box.clientWidth;
    if (table.getBoundingClientRect().right <= inner + 1) continue;
    const name = box.tagName.toLowerCase() + (box.id ? "#" + box.id : "") +
      (typeof box.className === "string" && box.className.trim() ? "." + box.className.trim().split(/\s+/).join(".") : "");
    out.push(`${name}: a ${table.offsetWidth} px table in a ${box.clientWidth} px box`);
  }
  return out;
}"""

# Something drawn over a heading's words: the text of another element, or a
# control, whose box meets the box of the heading's text (a menu opened over
# the page excepted).
OVER_HEADINGS = r"""() => {
  const out = [];
  const textRects = (el, skip) => {
    const rects = [];
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      if (!node.textContent.trim()) continue;
      if (skip && node.parentElement !== el) continue;
      const range = document.createRange();
      range.selectNodeContents(node);
      for (const r of range.getClientRects()) if (r.width && r.height) rects.push(r);
    }
    return rects;
  };
  const meet = (a, b) => a.left < b.right - 1 && b.left < a.right - 1 &&
    a.top < b.bottom - 1 && b.top < a.bottom - 1;
  const shown = (el) => {
    const style = getComputedStyle(el);
    return style.visibility !== "hidden" && style.display !== "none" &&
      style.opacity !== "0" && el.getClientRects().length;
  };
  // A menu the walk opened (a <details> drawn over the page, such as the
  // merchant switcher) lies over what is under it on purpose.
  const popup = (el) => {
    for (let box = el; box; box = box.parentElement) {
      if (getComputedStyle(box).position === "absolute" && box.closest("details")) return true;
    }
    return false;
  };
  const controls = "button, input:not([type=hidden]), select, textarea, img, svg, a.button";
  const headings = [...document.querySelectorAll("h1, h2, h3")]
    .filter(shown)
    .map((h) => ({h, words: textRects(h, false)}))
    .filter(({words}) => words.length);
  if (!headings.length) return out;
  // One pass: each element's box is read once, its style only when it meets
  // a heading's words.
  for (const el of document.body.querySelectorAll("*")) {
    const box = el.getBoundingClientRect();
    for (const {h, words} of headings) {
      if (!words.some((w) => meet(box, w))) continue;
      if (h.contains(el) || el.contains(h) || !shown(el) || popup(el)) continue;
      const boxes = el.matches(controls) ? [box] : textRects(el, true);
      if (boxes.some((b) => words.some((w) => meet(b, w)))) {
        out.push(`"${(el.innerText || el.value || el.tagName).replace(/\s+/g, " ").trim().slice(0, 30)}" covers the heading "${h.innerText.replace(/\s+/g, " ").trim().slice(0, 40)}"`);
        if (out.length > 8) return out;
      }
    }
  }
  return out;
}"""

DESKTOP_PX = 1280

OPEN_DETAILS = (
    """() => document.querySelectorAll("details").forEach(d => { d.open = true; })"""
)


def offences(page: Page) -> list[str]:
    """Everything wrong with the page's layout at the window's current width."""
    found = [f"overflow: {o}" for o in page.evaluate(OVERFLOW)]
    found += [f"label: {o}" for o in page.evaluate(LABELS, LABEL_GAP_PX)]
    found += [f"word: {o}" for o in page.evaluate(BROKEN_WORDS)]
    found += [f"template: {o}" for o in page.evaluate(TEMPLATE_LEFT, TEMPLATE_MARKS)]
    found += [f"heading: {o}" for o in page.evaluate(OVER_HEADINGS)]
    if page.viewport_size and page.viewport_size["width"] >= DESKTOP_PX:
        found += [f"scroll: {o}" for o in page.evaluate(TABLE_SCROLLS)]
    if not page.locator("head link[rel~=icon]").count():
        found.append("no favicon link")
    return found
