// A few DOM helpers: elements are built with textContent only (never
// innerHTML), so nothing the model or a command prints becomes markup.

type Attrs = Record<string, string>;

/** h makes an element with attributes and children (strings become text). */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: (Node | string)[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  for (const c of children) el.append(c);
  return el;
}

/** byId returns the element with id, which the page must have. */
export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const el = document.getElementById(id);
  if (!el) throw new Error(`page has no #${id}`);
  return el as T;
}

/** button makes a button that runs onClick, showing its error in status. */
export function button(label: string, attrs: Attrs, onClick: () => unknown): HTMLButtonElement {
  const b = h("button", { type: "button", ...attrs }, label);
  b.addEventListener("click", () => {
    Promise.resolve()
      .then(onClick)
      .catch((err: unknown) => showStatus(String(err instanceof Error ? err.message : err)));
  });
  return b;
}

/** showStatus shows a line in the page's status bar. */
export function showStatus(text: string): void {
  const el = document.getElementById("status");
  if (el) el.textContent = text;
}
