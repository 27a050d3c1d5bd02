// The alerts page (channels, each agent's rules, each channel's dead
// letters with replay) and the notifications card of an expectation.
import { h, api, table, badge, errorBox, fmtTime, code, enc } from './dom.js';

// destination says where a channel sends, never a secret (the server
// answers none).
function destination(c) {
  switch (c.type) {
    case 'webhook': case 'pagerduty': return code(c.url || '');
    case 'email': return (c.to || []).join(', ');
    case 'eventbridge': return code(c.eventBusName || '');
    case 'slack': return h('span', { class: 'muted' }, 'incoming webhook (URL sealed)');
  }
  return '';
}

// silenceMatchers says what a silence holds back.
function silenceMatchers(s) {
  const m = s.matchers || {};
  const parts = [];
  parts.push(m.agentId ? 'agent ' + m.agentId : 'every agent');
  if ((m.kinds || []).length) parts.push('kinds ' + m.kinds.join(', '));
  if (m.subjectType) parts.push('subject type ' + m.subjectType);
  if (m.subjectIdPrefix) parts.push('subject ids ' + m.subjectIdPrefix + '…');
  if (s.lapseTasks) parts.push('lapse tasks too');
  return parts.join(' · ');
}

// silenceWhen says when a silence holds.
function silenceWhen(s) {
  if (s.cron) return 'every "' + s.cron + '" (' + s.timezone + ') for ' + s.duration;
  return fmtTime(s.startsAt) + ' → ' + fmtTime(s.endsAt);
}

function ruleText(r) {
  const parts = [(r.on || []).join(', '), '→ ' + (r.channels || []).join(', ')];
  if ((r.kinds || []).length) parts.push('kinds ' + r.kinds.join(', '));
  if ((r.lapses || []).length) parts.push('lapses ' + r.lapses.join(', '));
  if (r.cooldown) parts.push('cooldown ' + r.cooldown);
  if (r.before) parts.push('reminder ' + r.before + ' before due');
  if (r.repeat) parts.push('repeat every ' + r.repeat.every + ', at most ' + r.repeat.max);
  for (const st of r.escalate || []) parts.push('escalate after ' + st.after + ' → ' + st.channels.join(', '));
  return parts.join(' · ');
}

export async function alertsPage(ctx) {
  const note = h('div');
  const channels = (await api('/v1/channels')).channels || [];
  const silences = (await api('/v1/silences').catch(() => ({ silences: [] }))).silences || [];
  const agents = ((await api('/v1/agents?limit=100')).agents || []).map(a => a.agentId);
  const rules = await Promise.all(agents.map(a => api('/v1/agents/' + enc(a) + '/alerts').catch(() => ({ agentId: a, rules: [] }))));
  const deadHolder = h('div');
  async function loadDead() {
    const rows = [];
    // A shared channel the token does not own shows no owners, and its
    // dead letters are the operator's.
    for (const c of channels.filter(c => c.owners)) {
      const page = await api('/v1/channels/' + enc(c.channelId) + '/deadletters');
      for (const n of page.notifications || []) rows.push(n);
    }
    deadHolder.replaceChildren(rows.length ? table(['channel', 'agent', 'event', 'attempts', 'reason', ''], rows.map(n => {
      const btn = h('button', { type: 'button', class: 'replay', onclick: async () => {
        btn.disabled = true;
        try {
          await api('/v1/channels/' + enc(n.channelId) + '/deadletters/' + enc(n.id) + '/replay?agentId=' + enc(n.agentId), { method: 'POST' });
          note.replaceChildren(h('div', { class: 'notice', role: 'status' }, 'Replayed ' + n.id + ' (same webhook-id).'));
          await loadDead();
        } catch (e) { btn.disabled = false; note.replaceChildren(errorBox(e)); }
      } }, 'Replay');
      return { attrs: { 'data-id': n.id }, cells: [code(n.channelId), code(n.agentId), n.event.type, String(n.attempts || 0), h('span', { class: 'reason' }, (n.lastErrorClass ? '[' + n.lastErrorClass + '] ' : '') + (n.lastError || '')), btn] };
    })) : h('p', { class: 'muted', id: 'no-notification-deadletters' }, 'No dead notifications.'));
  }
  await loadDead();
  const withRules = rules.filter(r => (r.rules || []).length);
  ctx.render(h('h1', null, 'Alerts'),
    h('p', { class: 'muted' }, 'Channels tell people of lapses, recoveries, dead lapse tasks and failed VERIFYs; each agent\'s rules say which events go where. Secrets are never shown.'),
    note,
    h('h2', null, 'Channels'),
    channels.length ? table(['channel', 'type', 'destination', 'owners', 'updated'], channels.map(c => ({ attrs: { 'data-channel': c.channelId },
      cells: [h('span', null, code(c.channelId), c.name ? ' ' + c.name : '', c.shared ? ' ' : '', c.shared ? badge('shared', 'kind') : ''),
        badge(c.type, 'kind'), c.owners ? destination(c) : h('span', { class: 'muted' }, 'the operator\'s (shared)'), (c.owners || []).join(', '), c.updatedAt ? fmtTime(c.updatedAt) : ''] })))
      : h('p', { class: 'muted', id: 'no-channels' }, 'No channels (PUT /v1/channels/{channelId}).'),
    h('h2', null, 'Silences'),
    silences.length ? table(['silence', 'matches', 'when', 'comment', 'by'], silences.map(s => ({ attrs: { 'data-silence': s.silenceId },
      cells: [code(s.silenceId), silenceMatchers(s), silenceWhen(s), s.comment || '', s.createdBy || ''] })))
      : h('p', { class: 'muted', id: 'no-silences' }, 'No silences (PUT /v1/silences/{silenceId}).'),
    h('h2', null, 'Rules'),
    withRules.length ? table(['agent', 'rules'], withRules.map(r => ({ attrs: { 'data-agent': r.agentId },
      cells: [code(r.agentId), h('ul', { class: 'rules' }, r.rules.map(x => h('li', null, ruleText(x))))] })))
      : h('p', { class: 'muted', id: 'no-rules' }, 'No agent has alert rules (PUT /v1/agents/{agentId}/alerts).'),
    h('h2', null, 'Dead notifications'), deadHolder);
  ctx.every(5000, () => loadDead().catch(() => {}));
}

// notificationsCard lists the notifications sent about one expectation.
export function notificationsCard(agent, id) {
  const body = h('div', null, h('p', { class: 'muted' }, 'Loading…'));
  const card = h('div', { class: 'card', id: 'notifications' }, h('h3', null, 'Notifications'), body);
  card.refresh = async () => {
    try {
      const out = await api('/v1/agents/' + enc(agent) + '/notifications?expectationId=' + enc(id));
      const ns = out.notifications || [];
      const d = n => n.event.data || {};
      const what = n => n.event.type + (d(n).repeat ? ' (repeat ' + d(n).repeat + ')' : '') + (d(n).escalation ? ' (escalation ' + d(n).escalation + ')' : '');
      const state = n => n.deliveredAt ? badge('delivered', 'satisfied') : n.deadLettered ? badge('dead', 'lapsed') :
        n.skipped ? h('span', null, badge('skipped', 'withdrawn'), ' ' + n.skipped) : n.condition ? badge('waiting until ' + fmtTime(n.nextAttemptAt), 'open') : badge('pending', 'open');
      body.replaceChildren(ns.length ? table(['event', 'channel', 'state', 'attempts', 'at'], ns.map(n => ({ attrs: { 'data-id': n.id },
        cells: [what(n), code(n.channelId), state(n),
          String(n.attempts || 0), fmtTime(n.deliveredAt || n.deadLetteredAt || n.skippedAt || n.createdAt)] })))
        : h('p', { class: 'muted' }, 'No notification sent about this expectation.'));
    } catch (e) {
      body.replaceChildren(e.status === 503 ? h('p', { class: 'muted' }, 'This server sends no notifications.') : errorBox(e));
    }
  };
  card.refresh();
  return card;
}

