// Anticipations (RFC-032 ANTICIPATE/VERIFY): sealing state, criteria, the
// execution's events with their digest chain, each VERIFY with its checks
// computed here, and the grading form for pending HUMAN and HEURISTIC
// criteria.
import { h, api, kv, badge, table, errorBox, fmtTime, code, enc } from './dom.js';
import { chainDigest, seal, verifyServerSignature } from './verify.js';

function check(state, text) {
  const sym = state === true ? '✓' : state === false ? '✗' : '?';
  const cls = state === true ? 'ok' : state === false ? 'bad' : 'unknown';
  return h('span', { class: 'check ' + cls, 'data-check': cls }, sym + ' ' + text);
}

export async function anticipationsPage(ctx) {
  const input = h('input', { id: 'ant-id', placeholder: 'anticipation_id', 'aria-label': 'anticipation id' });
  const form = h('form', { class: 'toolbar', onsubmit: (ev) => { ev.preventDefault(); if (input.value) location.hash = '#/anticipations/' + enc(input.value.trim()); } },
    input, h('button', { type: 'submit' }, 'Open'));
  const out = await api('/v1/agents?limit=500');
  ctx.render(h('h1', null, 'Anticipations'), form,
    h('p', { class: 'muted' }, 'Or choose an agent to list the anticipations declared for it:'),
    h('ul', null, out.agents.map(a => h('li', null, h('a', { href: '#/agents/' + enc(a.agentId) + '/anticipations' }, a.agentId)))));
}

export async function agentAnticipationsPage(ctx) {
  const agent = ctx.params[0];
  const out = await api('/v1/agents/' + enc(agent) + '/anticipations?limit=100');
  const rows = out.anticipations.map(a => {
    const m = a.anticipation || {};
    return { attrs: { 'data-id': m.anticipation_id }, cells: [
      h('a', { href: '#/agents/' + enc(agent) + '/anticipations/' + enc(m.anticipation_id) }, m.anticipation_id),
      m.plan_id ? code(m.plan_id) : h('span', { class: 'muted' }, 'scope ' + (m.scope_envelope_id || '')),
      a.sealed ? badge('sealed', 'good') : badge('not sealed', 'warn'), fmtTime(a.sealed_at), a.emitter, a.declared_by] };
  });
  ctx.render(h('h1', null, 'Anticipations of ', code(agent)),
    h('p', { class: 'toolbar' }, h('a', { href: '#/agents' }, '← agents'), h('a', { href: '#/agents/' + enc(agent) + '/expectations' }, 'Expectations')),
    rows.length ? table(['anticipation', 'plan', 'state', 'sealed at', 'emitter', 'declared by'], rows)
      : h('p', { class: 'muted' }, 'No anticipations declared for this agent.'),
    out.nextToken ? h('p', { class: 'muted' }, 'Showing the newest 100.') : null);
}

async function loadEvents(plan, agent) {
  const events = [];
  let execution = null;
  let next = '';
  for (let i = 0; i < 50; i++) {
    // Plan ids are per agent: name the anticipation's.
    const page = await api('/v1/executions/' + enc(plan) + '/events?limit=100&agent_id=' + enc(agent) + (next ? '&nextToken=' + enc(next) : ''));
    execution = page.execution;
    events.push(...page.events);
    next = page.nextToken || '';
    if (!next) break;
  }
  return { execution, events, truncated: !!next };
}

// chainChecks recomputes every event's digest from the previous one.
async function chainChecks(events) {
  let prev = '';
  const out = [];
  for (const e of events) {
    const want = await chainDigest(prev, e.event);
    out.push(e.prev === prev && e.digest === want);
    prev = want;
  }
  return { ok: out, head: prev };
}

function criteria(a) {
  const ex = a.expectations || {};
  const rows = [];
  for (const [cat, list] of [['outcome', ex.outcome_criteria], ['trajectory', ex.trajectory_criteria], ['anti', ex.anti_criteria]]) {
    for (const c of list || []) rows.push({ cells: [cat, code(c.criterion_id), c.measurement, String(c.weight), c.description, code(c.assertion)] });
  }
  return table(['category', 'criterion', 'measurement', 'weight', 'description', 'assertion'], rows);
}

export async function anticipationPage(ctx) {
  // #/agents/<agent>/anticipations/<id>, or #/anticipations/<id> when the
  // token's agents declared the id only once (anticipation ids are per agent).
  const [owner, id] = ctx.params.length > 1 ? ctx.params : [null, ctx.params[0]];
  const of = owner ? '?agent_id=' + enc(owner) : '';
  const rec = await api('/v1/anticipations/' + enc(id) + of);
  const a = rec.anticipation;
  const vs = (await api('/v1/anticipations/' + enc(id) + '/verifications' + of)).verifications;
  let key = null, keyError = null;
  try { key = (await api('/v1/keys/verify')).public_key; } catch (e) { keyError = e; }
  const plan = (vs[0] && vs[0].plan_id) || a.plan_id;
  let ev = null, evError = null;
  if (plan) { try { ev = await loadEvents(plan, a.agent_id); } catch (e) { evError = e; } }
  const chain = ev ? await chainChecks(ev.events) : null;
  const antSeal = await seal(a);

  const head = h('section', { class: 'card' },
    h('div', { class: 'exp-head' }, h('span', { class: 'id' }, id), rec.sealed ? badge('sealed', 'good') : badge('not sealed', 'warn')),
    kv([['agent', h('a', { href: '#/agents/' + enc(a.agent_id) + '/anticipations' }, a.agent_id)],
      ['plan', a.plan_id ? code(a.plan_id) : ''], ['scope', a.scope_envelope_id ? code(a.scope_envelope_id) : ''],
      ['sealed at', fmtTime(rec.sealed_at)], ['emitter', rec.emitter], ['declared by', rec.declared_by],
      ['expires', rec.expires_at ? fmtTime(rec.expires_at) + ' (with its plan\'s evidence, as -retain-evidence says)' : ''],
      ['digest', h('span', null, code(rec.digest), ' ', check(a.d_dna_signature === antSeal && rec.digest === antSeal, 'd_dna_signature recomputed here'))],
      ['grading policy', a.grading_policy ? code(JSON.stringify(a.grading_policy)) : '']]));

  const evSection = h('section', { class: 'card', id: 'events' }, h('h2', null, 'Execution ', plan ? code(plan) : ''));
  if (evError) evSection.append(errorBox(evError));
  else if (!ev) evSection.append(h('p', { class: 'muted' }, 'No plan bound yet.'));
  else {
    evSection.append(
      kv([['state', ev.execution.completed ? 'completed' : 'running'], ['events', String(ev.events.length) + (ev.truncated ? ' (first 5,000 shown)' : '')],
        ['chain head', h('span', null, code(chain.head || '(empty)'), ' ', check(chain.ok.every(Boolean), 'every link recomputed here'))]]),
      table(['seq', 'type', 'event id', 'timestamp', 'digest', 'chain'], ev.events.map((e, i) => ({ attrs: { 'data-seq': e.seq }, cells: [
        String(e.seq), e.message_type, code(e.event_id), fmtTime(e.event.timestamp), code(e.digest), check(chain.ok[i], chain.ok[i] ? 'links' : 'broken')] }))));
  }

  const vSection = h('div', { id: 'verifications' });
  async function drawVerify(v, holder, msg) {
    let sigState = null, sigText = 'no server_signature';
    if (v.server_signature) {
      if (!key) { sigText = 'cannot check: ' + (keyError ? keyError.message : 'no key'); }
      else {
        try { sigState = await verifyServerSignature(v, key); sigText = sigState ? 'server signature verifies (Ed25519, WebCrypto)' : 'server signature does NOT verify'; }
        catch (e) { sigText = 'cannot check: ' + e.message; }
      }
    }
    const sealOK = (await seal(v)) === v.d_dna_signature;
    const rows = v.results.map(r => {
      const cells = [code(r.criterion_id), r.category, r.measurement, String(r.weight), badge(r.status), r.score === null ? '—' : String(r.score),
        h('span', { class: 'evidence' }, r.evidence || ''), r.graded_by ? code(r.graded_by) : '', r.rationale || ''];
      if (r.status === 'PENDING' && (r.measurement === 'HUMAN' || r.measurement === 'HEURISTIC')) cells[8] = gradeForm(v, r, holder, msg);
      return { attrs: { 'data-criterion': r.criterion_id, 'data-status': r.status }, cells };
    });
    holder.replaceChildren(
      h('div', { class: 'exp-head' }, h('span', { class: 'id' }, v.verification_id), h('span', { class: 'verdict' }, badge(v.verdict)),
        h('span', null, 'score ' + v.score + ' / threshold ' + v.passing_threshold)),
      kv([['timestamp', fmtTime(v.timestamp)], ['plan', code(v.plan_id)],
        ['anti criteria failed', (v.anti_criteria_failed || []).join(', ') || 'none'],
        ['anticipation_digest', h('span', null, code(v.anticipation_digest), ' ', check(v.anticipation_digest === rec.digest, 'matches the ANTICIPATE'))],
        ['execution_digest', h('span', null, code(v.execution_digest), ' ', chain ? check(v.execution_digest === chain.head, 'matches the chain head') : check(null, 'events not read'))],
        ['d_dna_signature', h('span', null, code(v.d_dna_signature), ' ', check(sealOK, 'recomputed here'))],
        ['server_signature', h('span', { class: 'sig' }, code(v.server_signature || ''), ' ', check(sigState, sigText))]]),
      table(['criterion', 'category', 'measurement', 'weight', 'status', 'score', 'evidence', 'graded by', 'rationale / grade'], rows));
  }
  for (const v of vs) {
    const holder = h('div');
    const msg = h('div', { class: 'grade-msg' });
    const sec = h('section', { class: 'card verify', 'data-id': v.verification_id }, h('h2', null, 'VERIFY'), msg, holder);
    vSection.append(sec);
    await drawVerify(v, holder, msg);
  }
  if (!vs.length) vSection.append(h('p', { class: 'muted card' }, 'No VERIFY yet: it runs when the plan completes.'));

  function gradeForm(v, r, holder, msg) {
    const score = h('input', { type: 'number', min: '0', max: '1', step: '0.01', required: true, placeholder: '0–1', 'aria-label': 'score for ' + r.criterion_id, name: 'score' });
    const why = h('input', { type: 'text', placeholder: 'rationale', 'aria-label': 'rationale for ' + r.criterion_id, name: 'rationale' });
    const btn = h('button', { type: 'submit' }, 'Grade');
    return h('form', { class: 'grade', 'data-criterion': r.criterion_id, onsubmit: async (e) => {
      e.preventDefault();
      btn.disabled = true;
      msg.replaceChildren();
      try {
        const nv = await api('/v1/verifications/' + enc(v.verification_id) + '/grades', { method: 'POST', body: { criterion_id: r.criterion_id, score: Number(score.value), rationale: why.value || undefined } });
        msg.append(h('div', { class: 'notice', role: 'status' }, 'Graded ' + r.criterion_id + ': verdict ' + nv.verdict + '.'));
        await drawVerify(nv, holder, msg);
      } catch (err) {
        btn.disabled = false;
        msg.append(errorBox(err));
        msg.scrollIntoView({ block: 'nearest' });
        if (err.status === 409) {
          try { await drawVerify(await api('/v1/verifications/' + enc(v.verification_id)), holder, msg); } catch (e2) { /* keep the form */ }
        }
      }
    } }, score, why, btn);
  }

  ctx.render(h('h1', null, 'Anticipation ', code(id)),
    h('p', { class: 'toolbar' }, h('a', { href: '#/agents/' + enc(a.agent_id) + '/anticipations' }, '← anticipations of ' + a.agent_id)),
    head, h('section', { class: 'card' }, h('h2', null, 'Criteria'), criteria(a)), vSection, evSection);
}
