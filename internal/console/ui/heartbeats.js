// An agent's heartbeats: each with its schedule and status, refreshed
// live, with pause and resume. Each period is an ordinary expectation,
// linked to its timeline.
import { h, api, table, badge, errorBox, fmtTime, code, enc } from './dom.js';

// The badge class of each status (style.css colours them).
const statusClass = { new: 'open', up: 'satisfied', started: 'open', late: 'warn', down: 'lapsed', paused: 'withdrawn' };

function schedule(b) {
  if (b.cron) return 'cron "' + b.cron + '" (' + (b.timezone || 'UTC') + ')';
  return 'every ' + b.every;
}

export async function heartbeatsPage(ctx) {
  const [agent] = ctx.params;
  const note = h('div');
  const holder = h('div');
  const path = '/v1/agents/' + enc(agent) + '/heartbeats';
  async function act(b, verb, btn) {
    btn.disabled = true;
    try {
      await api(path + '/' + enc(b.name) + '/' + verb, { method: 'POST' });
      note.replaceChildren(h('div', { class: 'notice', role: 'status' }, (verb === 'pause' ? 'Paused ' : 'Resumed ') + b.name + '.'));
      await load();
    } catch (e) { btn.disabled = false; note.replaceChildren(errorBox(e)); }
  }
  async function load() {
    const page = await api(path + '?limit=500');
    const rows = (page.heartbeats || []).map(b => {
      const btn = b.status === 'paused'
        ? h('button', { type: 'button', class: 'secondary resume', onclick: () => act(b, 'resume', btn) }, 'Resume')
        : h('button', { type: 'button', class: 'secondary pause', onclick: () => act(b, 'pause', btn) }, 'Pause');
      const period = b.expectationId
        ? h('a', { href: '#/agents/' + enc(agent) + '/expectations/' + enc(b.expectationId) }, b.expectationId)
        : '';
      return { attrs: { 'data-heartbeat': b.name, 'data-status': b.status }, cells: [
        code(b.name), badge(b.status, statusClass[b.status] || ''), schedule(b), b.grace || '', b.kind,
        fmtTime(b.lastPingAt), fmtTime(b.nextDueAt), period, btn] };
    });
    holder.replaceChildren(rows.length
      ? table(['heartbeat', 'status', 'schedule', 'grace', 'kind', 'last ping', 'next due', 'current period', ''], rows, { id: 'heartbeats' })
      : h('p', { class: 'muted', id: 'no-heartbeats' }, 'No heartbeats yet (PUT ' + path + '/{name}).'));
  }
  await load();
  ctx.render(h('h1', null, 'Heartbeats of ', code(agent)),
    h('p', { class: 'muted' }, 'A job pings at the end of each run (POST …/ping; …/ping/start when it starts, …/ping/fail when it fails). A period without a ping lapses like any expectation: its lapse task, alerts and timeline follow.'),
    note, holder,
    h('p', { class: 'toolbar' }, h('a', { href: '#/agents/' + enc(agent) + '/expectations' }, 'Expectations')));
  ctx.every(2000, () => load().catch(e => note.replaceChildren(errorBox(e))));
}
