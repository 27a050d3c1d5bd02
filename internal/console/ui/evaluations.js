// Evaluations (re-grading stored executions): a form to start one or open
// one by id, and an evaluation's page: its progress (refreshed while it
// runs), summary, per-criterion pass rates and its results beside each
// plan's original verdict.
import { h, api, kv, badge, table, errorBox, fmtTime, code, enc } from './dom.js';

const example = JSON.stringify([
  { criterion_id: 'few-steps', description: 'at most five steps', measurement: 'DETERMINISTIC', assertion: 'step_count <= 5', weight: 1 },
], null, 2);

// An agent's evaluations, newest first (GET /v1/agents/{id}/evaluations).
export async function agentEvaluationsPage(ctx) {
  const [agent] = ctx.params;
  const out = await api('/v1/agents/' + enc(agent) + '/evaluations?limit=100');
  const rows = out.evaluations.map(ev => ({ attrs: { 'data-id': ev.evaluationId, 'data-state': ev.state }, cells: [
    h('a', { href: '#/evaluations/' + enc(ev.evaluationId) }, ev.evaluationId),
    badge(ev.state, ev.state === 'done' ? 'satisfied' : ev.state === 'failed' ? 'lapsed' : 'open'),
    ev.progress.done + ' of ' + ev.progress.total, pct(ev.summary.passRate), String(ev.summary.changedCount),
    fmtTime(ev.createdAt), ev.startedBy] }));
  ctx.render(h('h1', null, 'Evaluations of ', code(agent)),
    h('p', { class: 'toolbar' }, h('a', { href: '#/agents' }, '← agents'), h('a', { href: '#/evaluations' }, 'Start one')),
    rows.length ? table(['evaluation', 'state', 'progress', 'pass rate', 'changed', 'started', 'by'], rows, { id: 'agent-evaluations' })
      : h('p', { class: 'muted' }, 'No evaluations of this agent\'s plans.'),
    out.nextToken ? h('p', { class: 'muted' }, 'Showing the newest 100.') : null);
}

export async function evaluationsPage(ctx) {
  const id = h('input', { id: 'eval-id', placeholder: 'evl-…', 'aria-label': 'evaluation id' });
  const open = h('form', { class: 'toolbar', onsubmit: (ev) => { ev.preventDefault(); if (id.value) location.hash = '#/evaluations/' + enc(id.value.trim()); } },
    id, h('button', { type: 'submit', class: 'secondary' }, 'Open'));
  const agent = h('input', { id: 'eval-agent', placeholder: 'agent id', required: true, 'aria-label': 'agent id' });
  const from = h('input', { id: 'eval-from', placeholder: 'from (RFC 3339, optional)', 'aria-label': 'from' });
  const to = h('input', { id: 'eval-to', placeholder: 'to (RFC 3339, optional)', 'aria-label': 'to' });
  const criteria = h('textarea', { id: 'eval-criteria', rows: 8, 'aria-label': 'criteria (JSON array)' }, example);
  const policy = h('textarea', { id: 'eval-policy', rows: 3, 'aria-label': 'grading policy (JSON, optional)', placeholder: '{"grader_type": "CODE", "passing_threshold": 0.8, "weighted_scoring": true, "fail_on_any_anti_criteria": true} (empty: each plan\'s own)' });
  const msg = h('div', { class: 'eval-msg' });
  const start = h('form', { class: 'stack card', id: 'start-evaluation', onsubmit: async (ev) => {
    ev.preventDefault();
    msg.replaceChildren();
    const body = { filter: { agentId: agent.value.trim() } };
    if (from.value.trim()) body.filter.from = from.value.trim();
    if (to.value.trim()) body.filter.to = to.value.trim();
    try {
      body.criteria = JSON.parse(criteria.value);
      if (policy.value.trim()) body.gradingPolicy = JSON.parse(policy.value);
    } catch (e) {
      msg.replaceChildren(errorBox({ title: 'Not JSON: ' + e.message }));
      return;
    }
    try {
      const out = await api('/v1/evaluations', { method: 'POST', body });
      location.hash = '#/evaluations/' + enc(out.evaluationId);
    } catch (e) { msg.replaceChildren(errorBox(e)); }
  } },
  h('h2', null, 'Re-grade stored executions'),
  h('p', { class: 'muted' }, 'Grades the agent\'s completed plans (PLAN_COMPLETE within from–to) against these criteria, as VERIFY would. Their VERIFYs do not change: each result is a signed record of its own.'),
  h('label', { for: 'eval-agent' }, 'Agent'), agent,
  h('div', { class: 'toolbar' }, from, to),
  h('label', { for: 'eval-criteria' }, 'Criteria (as an ANTICIPATE declares them; "category": outcome, trajectory or anti)'), criteria,
  h('label', { for: 'eval-policy' }, 'Grading policy'), policy,
  h('button', { type: 'submit' }, 'Start'), msg);
  ctx.render(h('h1', null, 'Evaluations'), open, start);
}

function pct(x) { return x === null || x === undefined ? '–' : (Math.round(x * 1000) / 10) + '%'; }
function num(x) { return x === null || x === undefined ? '–' : String(Math.round(x * 1000) / 1000); }

export async function evaluationPage(ctx) {
  const [id] = ctx.params;
  const note = h('div');
  const head = h('div');
  const results = h('div');
  let shown = [];
  let next = '';
  const more = h('button', { type: 'button', class: 'secondary', id: 'more-results', hidden: true, onclick: () => page().catch(e => note.replaceChildren(errorBox(e))) }, 'More results');
  function renderResults() {
    const rows = shown.map(r => {
      const changed = r.verdict && r.originalVerdict && r.verdict !== r.originalVerdict;
      return { attrs: { 'data-plan': r.planId, 'data-verdict': r.verdict || 'ERROR', 'data-changed': changed ? 'yes' : 'no' }, cells: [
        code(r.planId), r.agentId, r.originalVerdict ? badge(r.originalVerdict, r.originalVerdict) : '–',
        r.error ? h('span', { class: 'muted' }, 'not graded: ' + r.error) : badge(r.verdict, r.verdict), num(r.score),
        changed ? badge('changed', 'warn') : '',
        (r.criteria || []).map(c => c.criterion_id + ' ' + c.status).join(', ')] };
    });
    results.replaceChildren(rows.length
      ? table(['plan', 'agent', 'was', 'now', 'score', '', 'criteria'], rows, { id: 'eval-results' })
      : h('p', { class: 'muted', id: 'no-results' }, 'No results yet.'));
    more.hidden = !next;
  }
  async function page() {
    const out = await api('/v1/evaluations/' + enc(id) + '?limit=100' + (next ? '&nextToken=' + enc(next) : ''));
    shown.push(...out.results);
    next = out.nextToken || '';
    renderResults();
  }
  async function load() {
    const ev = await api('/v1/evaluations/' + enc(id) + '?limit=1');
    const s = ev.summary;
    const crit = Object.keys(s.perCriterion || {}).sort().map(k => {
      const c = s.perCriterion[k];
      return { attrs: { 'data-criterion': k }, cells: [code(k), pct(c.passRate), num(c.meanScore), c.passed, c.failed, c.errors, c.pending] };
    });
    head.replaceChildren(...[
      kv([['state', badge(ev.state, ev.state === 'done' ? 'satisfied' : ev.state === 'failed' ? 'lapsed' : 'open')],
        ['progress', h('span', { id: 'eval-progress' }, ev.progress.done + ' of ' + ev.progress.total + ' plans')],
        ['pass rate', h('span', { id: 'eval-pass-rate' }, pct(s.passRate))], ['mean score', num(s.meanScore)],
        ['graded', s.graded + ' (' + s.passed + ' passed, ' + s.pending + ' pending; ' + s.errors + ' not graded)'],
        ['verdicts changed', h('span', { id: 'eval-changed' }, String(s.changedCount))],
        ['judge calls', String(ev.judgeCalls)], ['started', fmtTime(ev.createdAt) + ' by ' + ev.startedBy], ['finished', fmtTime(ev.finishedAt)],
        ['filter', code(JSON.stringify(ev.filter))]]),
      ev.error ? errorBox({ title: ev.error }) : null,
      crit.length ? h('h2', null, 'Per criterion') : null,
      crit.length ? table(['criterion', 'pass rate', 'mean score', 'pass', 'fail', 'error', 'pending'], crit, { id: 'eval-criteria-summary' }) : null,
    ].filter(Boolean));
    head.dataset.state = ev.state;
    return ev;
  }
  const ev = await load();
  await page();
  ctx.render(h('h1', null, 'Evaluation ', code(id)),
    h('p', { class: 'toolbar' }, h('a', { href: '#/evaluations' }, '← evaluations')),
    note, head, h('h2', null, 'Results'), results, more);
  if (ev.state === 'running') {
    // Until it is done: the head refreshes, and the first page of results
    // grows; once done, the results are read once more and left alone (so
    // pages read with "More results" stay).
    let running = true;
    ctx.every(2000, async () => {
      if (!running) return;
      try {
        const now = await load();
        running = now.state === 'running';
        if (!running || (shown.length < now.progress.done && shown.length < 100)) {
          shown = []; next = '';
          await page();
        }
      } catch (e) { note.replaceChildren(errorBox(e)); }
    });
  }
}

// An agent's online evaluators, each with the VERIFYs it made of plans
// that declared no ANTICIPATE (GET /v1/agents/{id}/evaluators and
// /evaluators/{name}/verifications).
export async function agentEvaluatorsPage(ctx) {
  const [agent] = ctx.params;
  const out = await api('/v1/agents/' + enc(agent) + '/evaluators');
  const sections = [];
  for (const ev of out.evaluators) {
    const page = await api('/v1/agents/' + enc(agent) + '/evaluators/' + enc(ev.name) + '/verifications?limit=100');
    const rows = page.verifications.map(v => ({ attrs: { 'data-plan': v.plan_id, 'data-verdict': v.verdict }, cells: [
      code(v.plan_id), badge(v.verdict, v.verdict), num(v.score), fmtTime(v.timestamp), code(v.verification_id)] }));
    const f = ev.filter || {};
    sections.push(h('section', { class: 'card evaluator', 'data-evaluator': ev.name },
      h('div', { class: 'exp-head' }, h('span', { class: 'id' }, ev.name), badge('sample ' + pct(ev.sample), 'open')),
      kv([['criteria', ev.criteria.map(c => c.criterion_id + ' (' + c.measurement + ')').join(', ')],
        ['plans', (f.planIdPrefix ? 'ids starting ' + f.planIdPrefix : 'every plan') + (f.scopeEnvelopeId ? ' under ' + f.scopeEnvelopeId : '') + ' that declared no ANTICIPATE'],
        ['updated', fmtTime(ev.updatedAt)]]),
      h('p', { class: 'muted' }, 'Sampled VERIFYs: graded with criteria configured here, after the run; nothing was declared before it, so they carry no anticipation_digest.'),
      rows.length ? table(['plan', 'verdict', 'score', 'graded', 'verification'], rows, { class: 'sampled' })
        : h('p', { class: 'muted' }, 'No plan sampled yet.'),
      page.nextToken ? h('p', { class: 'muted' }, 'Showing the first 100.') : null));
  }
  ctx.render(h('h1', null, 'Online evaluators of ', code(agent)),
    h('p', { class: 'toolbar' }, h('a', { href: '#/agents' }, '← agents')),
    sections.length ? h('div', { id: 'evaluators' }, sections)
      : h('p', { class: 'muted', id: 'no-evaluators' }, 'No evaluators (PUT /v1/agents/{agentId}/evaluators/{name}).'));
}
