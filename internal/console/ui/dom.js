// DOM, formatting and API helpers. Everything the console shows is put in
// the page as text (textContent), never as HTML, so data cannot inject code.

const TOKEN_KEY = 'clockwork.token';

export function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }
export function setToken(t) { sessionStorage.setItem(TOKEN_KEY, t); }
export function clearToken() { sessionStorage.removeItem(TOKEN_KEY); }

// h builds an element: h('a', {href: '#/x', class: 'c'}, 'text', child...).
// Attributes starting with "on" are listeners; null children are skipped.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'style' && typeof v === 'object') Object.assign(el.style, v);
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

export function badge(text, cls) { return h('span', { class: 'badge ' + (cls || text) }, text); }

// kv renders a definition list of [label, value] pairs, skipping empty values.
export function kv(pairs) {
  const dl = h('dl', { class: 'kv' });
  for (const [k, v] of pairs) {
    if (v === undefined || v === null || v === '') continue;
    dl.append(h('dt', null, k), h('dd', null, v));
  }
  return dl;
}

export function code(text) { return h('code', null, text); }

// table renders rows under headings; on a phone each row becomes a block
// whose cells carry their heading (data-label).
export function table(headings, rows, attrs) {
  return h('div', { class: 'scroll' }, h('table', Object.assign({ class: 'stack' }, attrs || {}),
    h('thead', null, h('tr', null, headings.map(t => h('th', null, t)))),
    h('tbody', null, rows.map(r => {
      const tr = h('tr', r.attrs || null);
      r.cells.forEach((c, i) => tr.append(h('td', { 'data-label': headings[i] }, c)));
      return tr;
    }))));
}

export function errorBox(err) {
  const lines = [err.title || err.message || String(err)];
  if (err.status) lines[0] = err.status + ' ' + lines[0];
  if (err.detail && err.detail !== err.title) lines.push(err.detail);
  for (const e of err.errors || []) lines.push(e.path + ': ' + e.message);
  return h('div', { class: 'error', role: 'alert' }, lines.join('\n'));
}

// fmtTime shows an RFC 3339 instant in UTC, to the millisecond when it has one.
export function fmtTime(s) {
  if (!s) return '';
  const d = new Date(s);
  if (isNaN(d)) return s;
  const iso = d.toISOString();
  return (iso.endsWith('.000Z') ? iso.slice(0, 19) : iso.slice(0, 23)).replace('T', ' ') + 'Z';
}

// fmtRel says how far an instant is from now ("in 4s", "3m ago").
export function fmtRel(ms, now) {
  const d = ms - now;
  const a = Math.abs(d);
  const units = [[86400000, 'd'], [3600000, 'h'], [60000, 'm'], [1000, 's']];
  let text = '0s';
  for (const [u, n] of units) {
    if (a >= u) { text = (a / u >= 10 ? Math.round(a / u) : Math.round(a / u * 10) / 10) + n; break; }
  }
  return d >= 0 ? 'in ' + text : text + ' ago';
}

// ApiError is a problem+json answer (or a transport failure).
export class ApiError extends Error {
  constructor(status, problem) {
    super(problem.title || ('HTTP ' + status));
    this.status = status;
    this.title = problem.title;
    this.detail = problem.detail;
    this.errors = problem.errors;
  }
}

// base is the API's root: the console is served at <root>/console.
export const base = new URL('./', location.href).href.replace(/console\/?$/, '');

// api calls the JSON API with the session's bearer token. A 401 sends the
// person back to sign in.
export async function api(path, opts) {
  opts = opts || {};
  const headers = { Authorization: 'Bearer ' + token(), Accept: 'application/json' };
  let body;
  if (opts.body !== undefined) { headers['Content-Type'] = 'application/json'; body = JSON.stringify(opts.body); }
  let res;
  try {
    res = await fetch(base + path.replace(/^\//, ''), { method: opts.method || 'GET', headers, body, cache: 'no-store', credentials: 'omit' });
  } catch (e) {
    throw new ApiError(0, { title: 'the server could not be reached', detail: String(e) });
  }
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = { title: text.slice(0, 300) }; }
  if (!res.ok) {
    const err = new ApiError(res.status, data || {});
    if (res.status === 401 && !opts.noRedirect) {
      clearToken();
      location.hash = '#/login?expired=1';
    }
    throw err;
  }
  return data;
}

export function enc(s) { return encodeURIComponent(s); }

export const EXT_URI = 'https://rsaxb.com/a2a/expectations/v1';

// extensionOf returns the expectations extension's params of a card, or
// null when the card does not declare the extension.
export function extensionOf(card) {
  const exts = ((card || {}).capabilities || {}).extensions || [];
  const ext = exts.find(e => e && e.uri === EXT_URI);
  return ext ? (ext.params || {}) : null;
}
