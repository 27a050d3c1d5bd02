// The console's entry point: sign-in, the hash router, the agents and the
// dead letters pages. Pages live in expectations.js, heartbeats.js,
// anticipations.js, evaluations.js, reviews.js and alerts.js.
import { h, api, token, setToken, clearToken, kv, table, badge, errorBox, fmtTime, code, enc, extensionOf } from './dom.js';
import { expectationsPage, expectationPage } from './expectations.js';
import { anticipationsPage, agentAnticipationsPage, anticipationPage } from './anticipations.js';
import { alertsPage } from './alerts.js';
import { heartbeatsPage } from './heartbeats.js';
import { evaluationsPage, evaluationPage, agentEvaluationsPage, agentEvaluatorsPage } from './evaluations.js';
import { inboxPage, agreementPage } from './reviews.js';

const main = document.getElementById('main');
let timers = [];
let generation = 0;

// ctx is what a page gets: its params, query, a way to render, and timers
// that stop when the person leaves the page.
function context(params, query) {
  const gen = generation;
  return {
    params, query,
    live: () => gen === generation,
    render(...nodes) { if (gen === generation) main.replaceChildren(...nodes.filter(n => n !== null && n !== undefined)); },
    every(ms, fn) { timers.push(setInterval(() => { if (gen === generation) fn(); }, ms)); },
  };
}

const routes = [
  [/^\/login$/, loginPage, true],
  [/^\/agents$/, agentsPage],
  [/^\/agents\/([^/]+)\/expectations$/, expectationsPage],
  [/^\/agents\/([^/]+)\/expectations\/([^/]+)$/, expectationPage],
  [/^\/agents\/([^/]+)\/anticipations$/, agentAnticipationsPage],
  [/^\/agents\/([^/]+)\/heartbeats$/, heartbeatsPage],
  [/^\/deadletters$/, deadLettersPage],
  [/^\/alerts$/, alertsPage],
  [/^\/anticipations$/, anticipationsPage],
  [/^\/anticipations\/([^/]+)$/, anticipationPage],
  [/^\/evaluations$/, evaluationsPage],
  [/^\/agents\/([^/]+)\/evaluations$/, agentEvaluationsPage],
  [/^\/evaluations\/([^/]+)$/, evaluationPage],
  [/^\/agents\/([^/]+)\/anticipations\/([^/]+)$/, anticipationPage],
  [/^\/agents\/([^/]+)\/evaluators$/, agentEvaluatorsPage],
  [/^\/reviews$/, inboxPage],
  [/^\/review-queues\/([^/]+)\/agreement$/, agreementPage],
];

async function route() {
  generation++;
  timers.forEach(clearInterval);
  timers = [];
  const raw = location.hash.replace(/^#/, '') || '/agents';
  const [path, qs] = raw.split('?');
  const query = new URLSearchParams(qs || '');
  document.getElementById('nav').hidden = !token();
  for (const a of document.querySelectorAll('nav a')) a.classList.toggle('active', path.startsWith('/' + a.dataset.nav));
  for (const [re, page, open] of routes) {
    const m = path.match(re);
    if (!m) continue;
    if (!open && !token()) { location.hash = '#/login?next=' + enc(raw); return; }
    const ctx = context(m.slice(1).map(decodeURIComponent), query);
    try {
      await page(ctx);
    } catch (e) {
      ctx.render(h('h1', null, 'Something went wrong'), errorBox(e));
    }
    return;
  }
  context([], query).render(h('h1', null, 'Not found'), h('p', null, h('a', { href: '#/agents' }, 'Agents')));
}

function loginPage(ctx) {
  const input = h('input', { id: 'token', type: 'password', autocomplete: 'off', required: true, placeholder: 'bearer token' });
  const msg = h('div');
  if (ctx.query.get('expired')) msg.append(errorBox({ title: 'The server refused the token (401): sign in again.' }));
  const form = h('form', { class: 'stack card', id: 'login', onsubmit: async (ev) => {
    ev.preventDefault();
    msg.replaceChildren();
    setToken(input.value.trim());
    try {
      await api('/v1/agents?limit=1', { noRedirect: true });
    } catch (e) {
      clearToken();
      msg.append(errorBox(e.status === 401 ? { status: 401, title: 'The server does not know this token.' } : e));
      return;
    }
    location.hash = ctx.query.get('next') ? '#' + ctx.query.get('next') : '#/agents';
  } },
  h('label', { for: 'token' }, 'Bearer token'), input,
  h('button', { type: 'submit' }, 'Sign in'),
  h('p', { class: 'muted' }, 'The token is kept in this tab only (sessionStorage) and sent as Authorization: Bearer to the API. No cookie is set.'));
  ctx.render(h('h1', null, 'Sign in'), form, msg);
  input.focus();
}

function cardURL(card) {
  const ifs = card.supportedInterfaces || card.supported_interfaces || [];
  return (ifs[0] && ifs[0].url) || card.url || '';
}

export function kindsTable(params) {
  const kinds = (params && params.kinds) || [];
  if (!kinds.length) return h('p', { class: 'muted' }, 'No kinds declared.');
  return table(['kind', 'subject type', 'describes', 'basis', 'skills'],
    kinds.map(k => ({ cells: [code(k.kind), k.subjectType || '', k.describes || '', k.basis || '', (k.skills || []).join(', ')] })));
}

async function agentsPage(ctx) {
  const agents = [];
  let next = '';
  for (let i = 0; i < 20; i++) {
    const page = await api('/v1/agents?limit=100' + (next ? '&nextToken=' + enc(next) : ''));
    agents.push(...page.agents);
    next = page.nextToken || '';
    if (!next) break;
  }
  const jump = h('input', { id: 'agent-id', placeholder: 'agent id', 'aria-label': 'agent id' });
  const open = h('form', { class: 'toolbar', onsubmit: (ev) => { ev.preventDefault(); if (jump.value) location.hash = '#/agents/' + enc(jump.value) + '/expectations'; } },
    jump, h('button', { type: 'submit', class: 'secondary' }, 'Open expectations'));
  const cards = agents.map(a => {
    const params = extensionOf(a.card);
    const c = a.card || {};
    return h('section', { class: 'card agent', 'data-agent': a.agentId },
      h('div', { class: 'exp-head' }, h('span', { class: 'id' }, c.name || a.agentId), code(a.agentId),
        params ? null : badge('no extension', 'warn')),
      c.description ? h('p', { class: 'muted' }, c.description) : null,
      kv([['A2A endpoint', cardURL(c) ? code(cardURL(c)) : ''], ['version', c.version || c.protocolVersion || ''],
        ['keepsTime', params ? (params.keepsTime ? badge('yes — lapses recorded, not sent', 'warn') : 'no') : ''],
        ['lapse skill', params && params.lapseSkill ? code(params.lapseSkill) : '']]),
      h('h3', null, 'Declared kinds'), kindsTable(params),
      h('p', { class: 'toolbar' },
        h('a', { href: '#/agents/' + enc(a.agentId) + '/expectations' }, 'Expectations'),
        h('a', { href: '#/agents/' + enc(a.agentId) + '/heartbeats' }, 'Heartbeats'),
        h('a', { href: '#/agents/' + enc(a.agentId) + '/anticipations' }, 'Anticipations'),
        h('a', { href: '#/agents/' + enc(a.agentId) + '/evaluations' }, 'Evaluations'),
        h('a', { href: '#/agents/' + enc(a.agentId) + '/evaluators' }, 'Evaluators')));
  });
  ctx.render(h('h1', null, 'Agents'), open,
    agents.length ? h('div', { class: 'grid' }, cards) : h('p', { class: 'muted' }, 'No agent cards yet (PUT /v1/agents/{agentId}).'));
}

async function deadLettersPage(ctx) {
  const note = h('div');
  const list = h('div');
  async function load() {
    const out = await api('/v1/deadletters');
    const recs = out.records || [];
    list.replaceChildren(recs.length ? table(['agent', 'expectation', 'lapse', 'lapsed at', 'attempts', 'reason', ''],
      recs.map(r => {
        const d = r.delivery || {};
        const btn = h('button', { type: 'button', class: 'replay', onclick: async () => {
          btn.disabled = true;
          try {
            const rec = await api('/v1/agents/' + enc(r.agentId) + '/expectations/' + enc(r.expectation.expectationId) + '/redeliver', { method: 'POST' });
            note.replaceChildren(h('div', { class: 'notice', role: 'status' }, 'Replayed ' + rec.expectation.expectationId + ': back in the outbox with messageId ' + ((rec.delivery || {}).messageId || '') + '.'));
            await load();
          } catch (e) { btn.disabled = false; note.replaceChildren(errorBox(e)); }
        } }, 'Replay');
        return { attrs: { 'data-id': r.expectation.expectationId }, cells: [
          code(r.agentId),
          h('a', { href: '#/agents/' + enc(r.agentId) + '/expectations/' + enc(r.expectation.expectationId) }, r.expectation.expectationId),
          badge((r.lapse || {}).lapse || 'lapsed', 'lapsed'), fmtTime((r.lapse || {}).lapsedAt), String(d.attempts || 0),
          h('span', { class: 'reason' }, (d.lastErrorClass ? '[' + d.lastErrorClass + '] ' : '') + (d.lastError || '')), btn] };
      })) : h('p', { class: 'muted', id: 'no-deadletters' }, 'No dead letters.'));
  }
  await load();
  ctx.render(h('h1', null, 'Dead letters'),
    h('p', { class: 'muted' }, 'Lapse tasks that could not be delivered after every attempt. Replay sends one back to the outbox with the same messageId.'),
    note, list);
  ctx.every(5000, () => load().catch(() => {}));
}

document.getElementById('signout').addEventListener('click', () => { clearToken(); location.hash = '#/login'; });
window.addEventListener('hashchange', route);
route();
