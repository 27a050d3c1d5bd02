// The expectations of an agent: filters, sorting by next instant, and a
// timeline per expectation drawn to scale.
import { h, api, kv, badge, errorBox, fmtTime, fmtRel, code, enc, extensionOf } from './dom.js';
import { notificationsCard } from './alerts.js';

// addDuration adds an ISO 8601 duration (PT2H, P1DT12H, P2W, PT0.5S) to an
// instant in ms; calendar units are added in UTC, as the server does.
export function addDuration(ms, dur) {
  const m = /^P(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)W)?(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:[.,]\d+)?)S)?)?$/.exec(dur || '');
  if (!m) return NaN;
  const [, y, mo, w, d, hh, mm, ss] = m.map(x => x === undefined ? 0 : Number(String(x).replace(',', '.')));
  const t = new Date(ms);
  if (y || mo) t.setUTCFullYear(t.getUTCFullYear() + y, t.getUTCMonth() + mo);
  return t.getTime() + ((w * 7 + d) * 86400 + hh * 3600 + mm * 60 + ss) * 1000;
}

const ms = s => (s ? Date.parse(s) : NaN);

// instants returns the record's due, grace end and horizon in ms (NaN when
// absent). With zero grace the grace end is the due time.
export function instants(r) {
  const due = ms(r.dueAt);
  const e = r.expectation || {};
  const grace = e.grace ? addDuration(due, e.grace) : due;
  return { due, grace, horizon: ms(e.horizon) };
}

// nextInstant is the next instant an open expectation waits for (Infinity
// for a closed one), the key of "sort by next instant".
export function nextInstant(r) {
  if (r.state !== 'open') return Infinity;
  const { due, grace, horizon } = instants(r);
  const c = [grace];
  if (!r.pastDue && grace !== due) c.push(due);
  if (!r.horizonChecked) c.push(horizon);
  const v = c.filter(x => !isNaN(x));
  return v.length ? Math.min(...v) : Infinity;
}

// events lists what the timeline shows, each {kind, at (ms), label, detail}.
export function timelineEvents(r, now) {
  const ev = [];
  const add = (kind, at, label, detail) => { if (!isNaN(at)) ev.push({ kind, at, label, detail: detail || '' }); };
  const e = r.expectation || {};
  const { due, grace, horizon } = instants(r);
  add('raised', ms(r.raisedAt), 'raised', 'task ' + r.taskId + ', context ' + r.contextId);
  add('due', due, 'due', r.projectedDueAt && r.projectedDueAt !== r.dueAt ? 'projected ' + fmtTime(r.projectedDueAt) : e.anchor ? 'anchored' : '');
  if (grace !== due) add('grace', grace, 'grace end', 'grace ' + e.grace);
  add('horizon', horizon, 'horizon', r.horizonChecked ? 'passed with facts on the subject' : 'stalled if no fact on the subject by then');
  const f = r.satisfiedBy;
  if (f) add('fact', ms(f.observedAt), 'fact', f.factKey + ' from ' + (f.source || '?'));
  if (r.state === 'satisfied' || (r.late && r.satisfiedAt)) add('satisfied', ms(r.satisfiedAt), r.late ? 'satisfied late' : 'satisfied', f ? f.factKey + ' (source ' + (f.source || '?') + ')' : '');
  const l = r.lapse;
  if (l) {
    add('lapsed', ms(l.lapsedAt), 'lapsed: ' + l.lapse, r.lapseTaskId ? 'lapse task ' + r.lapseTaskId : '');
    if (l.lastFactAt) add('fact', ms(l.lastFactAt), 'last fact', 'latest observedAt on the subject');
    if (l.refutedBy) add('fact', ms(l.refutedBy.observedAt), 'refuting fact', l.refutedBy.factKey + ' from ' + (l.refutedBy.source || '?'));
  }
  if (r.ack) add('ack', ms(r.ack.at), 'acknowledged', 'by ' + r.ack.by + (r.ack.note ? ': ' + r.ack.note : ''));
  const d = r.delivery;
  if (d) {
    if (d.deliveredAt) add('delivery', ms(d.deliveredAt), 'delivered', 'attempt ' + (d.attempts || 1) + (r.lapseTaskId ? ', lapse task ' + r.lapseTaskId : '') + (d.activated === false ? ', extension not echoed' : ''));
    if (d.nextAttemptAt && !d.deliveredAt && !d.deadLettered) add('attempt', ms(d.nextAttemptAt), d.waitingForProbe ? 'next attempt, after the agent\'s probe' : 'next attempt', 'after ' + (d.attempts || 0) + ' failed' + (d.lastErrorClass ? ' (' + d.lastErrorClass + ')' : '') + ': ' + (d.lastError || ''));
  }
  add('withdrawn', ms(r.withdrawnAt), 'withdrawn', r.withdrawnReason || '');
  ev.sort((a, b) => a.at - b.at);
  ev.push({ kind: 'now', at: now, label: 'now', detail: '' });
  return ev;
}

// timeline draws the events on a bar to scale, with the "now" marker.
export function timeline(r, now) {
  const ev = timelineEvents(r, now);
  let lo = Math.min(...ev.map(x => x.at));
  let hi = Math.max(...ev.map(x => x.at));
  if (hi - lo < 1000) { hi = lo + 1000; }
  const pad = (hi - lo) * 0.04;
  lo -= pad; hi += pad;
  const pos = t => ((t - lo) / (hi - lo)) * 100;
  const bar = h('div', { class: 'timeline', role: 'img', 'aria-label': 'timeline of ' + r.expectation.expectationId, 'data-from': new Date(lo).toISOString(), 'data-to': new Date(hi).toISOString() },
    h('div', { class: 'axis' }));
  const { due, grace } = instants(r);
  const raised = ms(r.raisedAt);
  if (!isNaN(raised) && !isNaN(due) && due > raised) bar.append(h('div', { class: 'span due-window', style: { left: pos(raised) + '%', width: (pos(due) - pos(raised)) + '%' } }));
  if (!isNaN(grace) && grace > due) bar.append(h('div', { class: 'span grace-window', style: { left: pos(due) + '%', width: (pos(grace) - pos(due)) + '%' } }));
  let i = 0;
  for (const x of ev) {
    const p = pos(x.at);
    const side = x.kind === 'now' ? 'up' : (i++ % 2 ? 'down' : 'up');
    bar.append(h('div', { class: ['mark', x.kind, side, p > 70 ? 'right' : ''].join(' '), 'data-kind': x.kind, style: { left: p + '%' }, title: x.label + ' ' + fmtTime(new Date(x.at).toISOString()) + (x.detail ? ' — ' + x.detail : '') },
      h('span', { class: 'lbl' }, x.label)));
  }
  const list = h('ol', { class: 'events' }, ev.filter(x => x.kind !== 'now').map(x =>
    h('li', { 'data-kind': x.kind }, h('span', { class: 'when' }, fmtTime(new Date(x.at).toISOString())), h('span', { class: 'what' }, x.label), h('span', { class: 'muted' }, fmtRel(x.at, now)), x.detail ? h('span', null, x.detail) : null)));
  return h('div', { class: 'tl' }, bar, list);
}

function expLink(agent, id) { return h('a', { href: '#/agents/' + enc(agent) + '/expectations/' + enc(id) }, id); }

// article renders one expectation with its timeline and details.
export function article(r, now, open, onToggle) {
  const e = r.expectation;
  const next = nextInstant(r);
  const d = r.delivery || {};
  const details = h('details', { open: open, ontoggle: (ev) => onToggle && onToggle(ev.target.open) }, h('summary', null, 'Details'),
    kv([
      ['expects', e.expects], ['satisfied by fact', code(e.satisfiedBy.factKey)], ['basis', e.basis],
      ['task / context', code(r.taskId + ' / ' + r.contextId)], ['skill', r.skill || ''],
      ['supersedes', e.supersedes ? expLink(r.agentId, e.supersedes) : ''], ['lineage', r.lineage ? String(r.lineage) : ''],
      ['anchor', e.anchor ? h('span', null, expLink(r.agentId, e.anchor.expectationId), ' + ' + e.anchor.offset) : ''],
      ['after', e.after && e.after.length ? h('span', null, e.after.map((id, i) => [i ? ', ' : '', expLink(r.agentId, id)])) : ''],
      ['fact', r.satisfiedBy ? h('span', null, code(r.satisfiedBy.factKey), ' observed ' + fmtTime(r.satisfiedBy.observedAt) + ', source ', code(r.satisfiedBy.source || '')) : ''],
      ['lapse task', r.lapseTaskId ? code(r.lapseTaskId) : ''],
      ['acknowledged', r.ack ? 'by ' + r.ack.by + ' ' + fmtTime(r.ack.at) + (r.ack.note ? ': ' + r.ack.note : '') : ''],
      ['delivery', r.delivery ? [
        'messageId ', code(d.messageId || ''), ', attempts ' + (d.attempts || 0),
        d.deliveredAt ? ', delivered ' + fmtTime(d.deliveredAt) : '', d.deadLettered ? ', dead-lettered' : '', d.suppressed ? ', suppressed (agent keeps time)' : '',
        d.activated === false ? ', the agent did not echo the extension' : ''] : ''],
      ['last error', d.lastError ? (d.lastErrorClass ? '[' + d.lastErrorClass + '] ' : '') + d.lastError : ''],
      ['next attempt', d.nextAttemptAt && !d.deliveredAt && !d.deadLettered ? fmtTime(d.nextAttemptAt) + (d.waitingForProbe ? ' (the agent is down: waiting for its probe)' : '') +
        (d.failingSince ? '; failing since ' + fmtTime(d.failingSince) : '') : ''],
      ['withdrawn', r.withdrawnReason || ''],
      ['expires', r.expiresAt ? fmtTime(r.expiresAt) + ' (' + fmtRel(ms(r.expiresAt), now) + '; deleted then, as -retain-expectations says)' : ''],
    ]));
  return h('article', { class: 'card exp', 'data-id': e.expectationId, 'data-state': r.state },
    h('div', { class: 'exp-head' },
      h('a', { class: 'id', href: '#/agents/' + enc(r.agentId) + '/expectations/' + enc(e.expectationId) }, e.expectationId),
      badge(r.state), r.pastDue && r.state === 'open' ? badge('past due', 'warn') : null,
      r.late ? badge('late', 'warn') : null, d.deadLettered ? badge('dead letter', 'bad') : null,
      r.ack ? badge('acknowledged', 'kind') : null,
      h('span', null, code(e.kind)), h('span', { class: 'muted' }, e.subject.type + ' ' + e.subject.id),
      isFinite(next) ? h('span', { class: 'muted next' }, 'next ' + fmtRel(next, now)) : null),
    timeline(r, now), details);
}

async function loadAll(agent, state) {
  const out = [];
  let next = '';
  for (let i = 0; i < 10; i++) {
    const q = new URLSearchParams({ limit: '500' });
    if (state) q.set('state', state);
    if (next) q.set('nextToken', next);
    const page = await api('/v1/agents/' + enc(agent) + '/expectations?' + q);
    out.push(...page.records);
    next = page.nextToken || '';
    if (!next) break;
  }
  return out;
}

export async function expectationsPage(ctx) {
  const agent = ctx.params[0];
  const q = ctx.query;
  let card = null;
  try { card = await api('/v1/agents/' + enc(agent)); } catch (e) { if (e.status !== 404) throw e; }
  const params = extensionOf(card);
  const kinds = new Set(((params && params.kinds) || []).map(k => k.kind));
  const state = h('select', { id: 'f-state' }, ['', 'open', 'satisfied', 'lapsed', 'withdrawn'].map(s => h('option', { value: s }, s || 'any')));
  const kind = h('select', { id: 'f-kind' }, h('option', { value: '' }, 'any'));
  const subject = h('input', { id: 'f-subject', placeholder: 'type or id', size: 14 });
  const sort = h('select', { id: 'f-sort' }, h('option', { value: 'next' }, 'next instant'), h('option', { value: 'raised' }, 'newest raised'));
  const live = h('input', { id: 'f-live', type: 'checkbox', checked: true });
  state.value = q.get('state') || '';
  subject.value = q.get('subject') || '';
  sort.value = q.get('sort') || 'next';
  const list = h('div', { id: 'expectations' });
  const status = h('p', { class: 'muted', id: 'exp-count' });
  const opened = new Set();
  let records = [];
  let kindWanted = q.get('kind') || '';

  function keepQuery() {
    const p = new URLSearchParams();
    for (const [k, el] of [['state', state], ['kind', kind], ['subject', subject], ['sort', sort]]) if (el.value) p.set(k, el.value);
    history.replaceState(null, '', '#/agents/' + enc(agent) + '/expectations' + (p.toString() ? '?' + p : ''));
  }
  function draw() {
    const now = Date.now();
    for (const r of records) kinds.add(r.expectation.kind);
    const have = new Set(Array.from(kind.options).map(o => o.value));
    for (const k of Array.from(kinds).sort()) if (!have.has(k)) kind.append(h('option', { value: k }, k));
    if (kindWanted) { kind.value = kindWanted; kindWanted = ''; }
    const s = subject.value.trim().toLowerCase();
    let shown = records.filter(r => (!kind.value || r.expectation.kind === kind.value) &&
      (!s || (r.expectation.subject.type + ' ' + r.expectation.subject.id).toLowerCase().includes(s) || (r.expectation.subject.type + ':' + r.expectation.subject.id).toLowerCase() === s));
    shown = shown.slice().sort(sort.value === 'raised'
      ? (a, b) => ms(b.raisedAt) - ms(a.raisedAt)
      : (a, b) => (nextInstant(a) - nextInstant(b)) || (ms(b.raisedAt) - ms(a.raisedAt)));
    status.textContent = shown.length + ' of ' + records.length + ' expectations' + (live.checked ? ', refreshed every 2 s' : '');
    list.replaceChildren(...shown.map(r => article(r, now, opened.has(r.expectation.expectationId), (o) => o ? opened.add(r.expectation.expectationId) : opened.delete(r.expectation.expectationId))));
    if (!shown.length) list.append(h('p', { class: 'muted' }, 'No expectations match.'));
  }
  async function reload() {
    records = await loadAll(agent, state.value);
    draw();
  }
  const errBox = h('div');
  for (const el of [state]) el.addEventListener('change', () => { keepQuery(); reload().catch(e => errBox.replaceChildren(errorBox(e))); });
  for (const el of [kind, sort]) el.addEventListener('change', () => { keepQuery(); draw(); });
  subject.addEventListener('input', () => { keepQuery(); draw(); });
  await reload();
  ctx.render(
    h('h1', null, 'Expectations of ', code(agent)),
    card ? null : errorBox({ title: 'This agent has no card.' }),
    h('p', { class: 'toolbar' }, h('a', { href: '#/agents' }, '← agents'), h('a', { href: '#/agents/' + enc(agent) + '/anticipations' }, 'Anticipations')),
    h('div', { class: 'filters' },
      h('label', null, 'state', state), h('label', null, 'kind', kind), h('label', null, 'subject', subject), h('label', null, 'sort by', sort),
      h('label', { class: 'inline' }, 'live', live)),
    errBox, status, list);
  ctx.every(2000, () => {
    if (!live.checked) return;
    reload().then(() => errBox.replaceChildren()).catch(e => errBox.replaceChildren(errorBox(e)));
  });
}

export async function expectationPage(ctx) {
  const [agent, id] = ctx.params;
  const all = await loadAll(agent, '');
  let r = all.find(x => x.expectation.expectationId === id);
  if (!r) r = await api('/v1/agents/' + enc(agent) + '/expectations/' + enc(id));
  const supersededBy = all.filter(x => x.expectation.supersedes === id);
  const dependents = all.filter(x => (x.expectation.anchor && x.expectation.anchor.expectationId === id) || (x.expectation.after || []).includes(id));
  const holder = h('div');
  const links = h('div', { class: 'card' }, h('h3', null, 'Lineage and anchors'),
    kv([
      ['supersedes', r.expectation.supersedes ? expLink(agent, r.expectation.supersedes) : 'nothing'],
      ['superseded by', supersededBy.length ? supersededBy.map((x, i) => [i ? ', ' : '', expLink(agent, x.expectation.expectationId)]) : 'nothing'],
      ['anchored on', r.expectation.anchor ? h('span', null, expLink(agent, r.expectation.anchor.expectationId), ' + ' + r.expectation.anchor.offset) : 'nothing'],
      ['after', (r.expectation.after || []).length ? r.expectation.after.map((x, i) => [i ? ', ' : '', expLink(agent, x)]) : 'nothing'],
      ['dependents', dependents.length ? dependents.map((x, i) => [i ? ', ' : '', expLink(agent, x.expectation.expectationId)]) : 'none'],
    ]));
  // Acknowledge, beside the lapse: who (the token's principal), when and
  // a note go on the record, and the lapse's channels are told.
  const ackBox = h('div', { class: 'toolbar ack' });
  let ackShown = false; // built once, so the refresh keeps what is typed
  const drawAck = () => {
    if (!r.lapse || r.ack) { ackBox.replaceChildren(); ackShown = false; return; }
    if (ackShown) return;
    ackShown = true;
    const noteInput = h('input', { type: 'text', id: 'ack-note', placeholder: 'note (optional)', maxlength: '1000', 'aria-label': 'acknowledgement note' });
    const btn = h('button', { type: 'button', id: 'ack', onclick: async () => {
      btn.disabled = true;
      try {
        r = await api('/v1/agents/' + enc(agent) + '/expectations/' + enc(id) + '/ack', { method: 'POST', body: { note: noteInput.value } });
        draw();
      } catch (e) { btn.disabled = false; ackBox.append(errorBox(e)); }
    } }, 'Acknowledge');
    ackBox.replaceChildren(h('span', null, 'Lapsed: ' + r.lapse.lapse), noteInput, btn);
  };
  const draw = () => { holder.replaceChildren(article(r, Date.now(), true)); drawAck(); };
  draw();
  const notifications = notificationsCard(agent, id);
  ctx.render(h('h1', null, 'Expectation ', code(id)),
    h('p', { class: 'toolbar' }, h('a', { href: '#/agents/' + enc(agent) + '/expectations' }, '← expectations of ' + agent)),
    ackBox, holder, links, notifications);
  ctx.every(2000, async () => {
    try { r = await api('/v1/agents/' + enc(agent) + '/expectations/' + enc(id)); draw(); } catch (e) { /* shown on the next load */ }
    notifications.refresh();
  });
}
