// A small markdown renderer for the model's answers: paragraphs, headings,
// lists, block quotes, fenced code, inline code, bold, italics and links.
// It builds DOM nodes with textContent only (never innerHTML), so markup
// in the text stays text: `<img onerror=…>` is shown, not run. Links keep
// only http:, https: and mailto: targets (a javascript: link is text) and
// open in a new tab without a referrer or an opener.

import { h } from "./dom.js";

const SAFE_SCHEME = /^(https?:|mailto:)/i;

/** renderMarkdown returns the nodes of text; text still streaming renders as far as it goes. */
export function renderMarkdown(text: string): DocumentFragment {
  const out = document.createDocumentFragment();
  const lines = text.replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i] ?? "";
    const fence = /^\s*(```|~~~)\s*([\w+-]*)\s*$/.exec(line);
    if (fence) {
      const body: string[] = [];
      for (i++; i < lines.length && !(lines[i] ?? "").trim().startsWith(fence[1] ?? "```"); i++) body.push(lines[i] ?? "");
      i++;
      const code = h("code", fence[2] ? { "data-lang": fence[2] } : {}, body.join("\n"));
      out.append(h("pre", { class: "md-code" }, code));
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    if (heading) {
      const level = Math.min(6, (heading[1] ?? "#").length + 2); // h3..h6: inside a message
      out.append(inline(h(`h${Math.min(level, 6)}` as "h3", {}), heading[2] ?? ""));
      i++;
      continue;
    }
    if (/^\s*([-*+]|\d+[.)])\s+/.test(line)) {
      const ordered = /^\s*\d+[.)]/.test(line);
      const list = h(ordered ? "ol" : "ul", {});
      for (; i < lines.length && /^\s*([-*+]|\d+[.)])\s+/.test(lines[i] ?? ""); i++) {
        list.append(inline(h("li", {}), (lines[i] ?? "").replace(/^\s*([-*+]|\d+[.)])\s+/, "")));
      }
      out.append(list);
      continue;
    }
    if (/^\s*>/.test(line)) {
      const quoted: string[] = [];
      for (; i < lines.length && /^\s*>/.test(lines[i] ?? ""); i++) quoted.push((lines[i] ?? "").replace(/^\s*>\s?/, ""));
      const q = h("blockquote", {});
      q.append(renderMarkdown(quoted.join("\n")));
      out.append(q);
      continue;
    }
    if (line.trim() === "") {
      i++;
      continue;
    }
    const para: string[] = [];
    for (; i < lines.length; i++) {
      const l = lines[i] ?? "";
      if (l.trim() === "" || /^(#{1,6})\s|^\s*(```|~~~)|^\s*([-*+]|\d+[.)])\s+|^\s*>/.test(l)) break;
      para.push(l);
    }
    out.append(inline(h("p", {}), para.join("\n")));
  }
  return out;
}

/** inline appends text's inline markup (code, bold, italics, links) to el as nodes. */
function inline(el: HTMLElement, text: string): HTMLElement {
  const re = /`([^`]+)`|\*\*([^*]+)\*\*|__([^_]+)__|\*([^*\s][^*]*)\*|_([^_\s][^_]*)_|\[([^\]]+)\]\(([^)\s]+)\)/g;
  let at = 0;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    if (m.index > at) el.append(text.slice(at, m.index));
    if (m[1] !== undefined) el.append(h("code", {}, m[1]));
    else if (m[2] !== undefined || m[3] !== undefined) el.append(inline(h("strong", {}), m[2] ?? m[3] ?? ""));
    else if (m[4] !== undefined || m[5] !== undefined) el.append(inline(h("em", {}), m[4] ?? m[5] ?? ""));
    else if (m[6] !== undefined && m[7] !== undefined) el.append(link(m[6], m[7]));
    at = m.index + m[0].length;
  }
  if (at < text.length) el.append(text.slice(at));
  return el;
}

/** link is an <a> for a safe target, else the markdown as written. */
function link(label: string, target: string): Node {
  if (!SAFE_SCHEME.test(target)) return document.createTextNode(`[${label}](${target})`);
  const a = h("a", { href: target, target: "_blank", rel: "noopener noreferrer nofollow" });
  return inline(a, label);
}
