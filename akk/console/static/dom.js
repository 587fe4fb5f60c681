// Building the page's elements: text only ever goes in as textContent, never as markup.

/** An element: `attrs` become attributes (true: present, null/false/undefined: left out),
 *  `children` are nodes or strings (strings become text nodes). */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === true) node.setAttribute(name, '');
    else if (value !== null && value !== false && value !== undefined) node.setAttribute(name, String(value));
  }
  append(node, children);
  return node;
}

export function append(node, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(typeof child === 'string' ? document.createTextNode(child) : child);
  }
  return node;
}

/** Replace `node`'s children. */
export function fill(node, ...children) {
  node.replaceChildren();
  return append(node, children);
}

/** Show `items` in `container`, one element per key, built again only when its item changed,
 *  so that focus, open <details> and typed text survive a view that changed elsewhere. */
export function keyed(container, items, keyOf, render) {
  const kept = container.akkKeyed || new Map();
  const next = new Map();
  items.forEach((item, index) => {
    const key = keyOf(item);
    const json = JSON.stringify(item);
    let entry = kept.get(key);
    if (!entry || entry.json !== json) {
      const node = render(item, entry && entry.node);
      if (entry && entry.node !== node) entry.node.replaceWith(node);
      entry = { json, node };
    }
    next.set(key, entry);
    if (container.children[index] !== entry.node) container.insertBefore(entry.node, container.children[index] || null);
  });
  for (const [key, entry] of kept) if (!next.has(key)) entry.node.remove();
  container.akkKeyed = next;
}

/** A value shown as text: objects as compact `key: value` lists, null as an em dash. */
export function show(value) {
  if (value === null || value === undefined || value === '') return '—';
  if (Array.isArray(value)) return value.length ? value.map(show).join(', ') : '—';
  if (typeof value === 'object') {
    return Object.entries(value).filter(([, v]) => v !== null && v !== undefined)
      .map(([k, v]) => `${k}: ${typeof v === 'object' ? JSON.stringify(v) : v}`).join('; ') || '—';
  }
  return String(value);
}

/** A <dl> of the given [label, value] pairs (values through `show` unless already nodes). */
export function facts(pairs, className = 'facts') {
  const list = el('dl', { class: className });
  for (const [label, value, testid] of pairs) {
    const shown = value instanceof Node ? value : show(value);
    list.append(el('div', { 'data-field': testid || null }, el('dt', {}, label), el('dd', {}, shown)));
  }
  return list;
}
