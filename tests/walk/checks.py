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

OPEN_DETAILS = (
    """() => document.querySelectorAll("details").forEach(d => { d.open = true; })"""
)


def offences(page: Page) -> list[str]:
    """Everything wrong with the page's layout at the window's current width."""
    found = [f"overflow: {o}" for o in page.evaluate(OVERFLOW)]
    found += [f"label: {o}" for o in page.evaluate(LABELS, LABEL_GAP_PX)]
    found += [f"word: {o}" for o in page.evaluate(BROKEN_WORDS)]
    if not page.locator("head link[rel~=icon]").count():
        found.append("no favicon link")
    return found
