// Review queues: a reviewer's inbox (the open items of every queue
// assigned to the signed-in principal, a form per criterion) and a
// queue's agreement page (Cohen's or Fleiss' kappa per criterion, and the
// judge's against people on calibration items).
import { h, api, kv, badge, table, errorBox, fmtTime, code, enc } from './dom.js';

export async function inboxPage(ctx) {
  const note = h('div');
  const list = h('div', { id: 'inbox' });
  async function load() {
    const { queues } = await api('/v1/review-queues');
    const sections = [];
    for (const q of queues) {
      const page = await api('/v1/review-queues/' + enc(q.queueId) + '/items?assignee=me&state=open');
      sections.push(queueSection(q, page.items));
    }
    if (!ctx.live()) return;
    list.replaceChildren(...(sections.length ? sections
      : [h('p', { class: 'muted', id: 'no-queues' }, 'No review queues yet (PUT /v1/review-queues/{queueId}).')]));
  }
  function queueSection(q, items) {
    return h('section', { class: 'card queue', 'data-queue': q.queueId, 'data-open': String(items.length) },
      h('div', { class: 'exp-head' }, h('span', { class: 'id' }, q.queueId),
        badge(items.length + ' for you', items.length ? 'open' : 'satisfied'),
        h('a', { href: '#/review-queues/' + enc(q.queueId) + '/agreement' }, 'Agreement')),
      kv([['reviewers', q.reviewers.join(', ')], ['reviews per item', String(q.reviewsPerItem)], ['due', q.due], ['resolve', q.resolve]]),
      items.length ? items.map(itemCard) : h('p', { class: 'muted' }, 'Nothing waits for you here.'));
  }
  function itemCard(it) {
    const mine = new Set(it.reviews.map(r => r.criterionId));
    return h('article', { class: 'item card', 'data-item': it.itemId, 'data-plan': it.planId },
      h('div', { class: 'exp-head' }, code(it.planId), badge(it.purpose, it.purpose === 'calibration' ? 'warn' : 'open'),
        h('span', { class: 'muted' }, 'due ' + fmtTime(it.dueAt)), h('span', { class: 'muted' }, it.reviewsIn + ' of ' + it.reviewsExpected + ' reviews in')),
      kv([['agent', code(it.agentId)], ['VERIFY', code(it.verificationId)],
        ['purpose', it.purpose === 'calibration' ? 'the judge graded this; your grade measures how it agrees with people' : 'your grades decide the VERIFY']]),
      it.criteria.map(c => mine.has(c.criterionId)
        ? h('p', { class: 'muted', 'data-reviewed': c.criterionId }, c.criterionId + ': reviewed')
        : reviewForm(it, c)));
  }
  function reviewForm(it, c) {
    const grade = h('select', { name: 'grade', 'aria-label': 'grade' },
      h('option', { value: 'PASS' }, 'PASS'), h('option', { value: 'FAIL' }, 'FAIL'), h('option', { value: 'score' }, 'a score…'));
    const score = h('input', { name: 'score', type: 'number', min: 0, max: 1, step: 0.01, placeholder: '0 to 1', 'aria-label': 'score', hidden: true });
    grade.addEventListener('change', () => { score.hidden = grade.value !== 'score'; });
    const comment = h('input', { name: 'comment', placeholder: 'comment (optional)', 'aria-label': 'comment' });
    const msg = h('div', { class: 'review-msg' });
    return h('form', { class: 'review stack', 'data-criterion': c.criterionId, onsubmit: async (ev) => {
      ev.preventDefault();
      msg.replaceChildren();
      const body = { criterionId: c.criterionId, grade: grade.value === 'score' ? Number(score.value) : grade.value };
      if (comment.value.trim()) body.comment = comment.value.trim();
      try {
        const out = await api('/v1/review-queues/' + enc(it.queueId) + '/items/' + enc(it.itemId) + '/reviews', { method: 'POST', body });
        note.replaceChildren(h('div', { class: 'notice', role: 'status' }, 'Reviewed ' + c.criterionId + ' of ' + it.planId +
          (out.state === 'done' ? ': every review is in.' : '.')));
        await load();
      } catch (e) { msg.replaceChildren(errorBox(e)); }
    } },
    h('h3', null, c.criterionId, ' ', h('span', { class: 'muted' }, c.category + (c.anti ? ' (passes only at 1)' : ''))),
    h('p', null, c.description), h('p', { class: 'muted' }, c.assertion),
    h('div', { class: 'toolbar' }, grade, score, comment, h('button', { type: 'submit' }, 'Submit')), msg);
  }
  await load();
  ctx.render(h('h1', null, 'Reviews'),
    h('p', { class: 'muted' }, 'The open items assigned to you, oldest first. Reviews are blind: the others\' grades show once an item is done.'),
    note, list);
  // Refreshed, but never under a reviewer's hands.
  ctx.every(10000, () => {
    const el = document.activeElement;
    if (!el || !el.closest || !el.closest('form.review')) load().catch(() => {});
  });
}

function num(x) { return x === null || x === undefined ? '–' : String(Math.round(x * 1000) / 1000); }
function pct(x) { return x === null || x === undefined ? '–' : (Math.round(x * 1000) / 10) + '%'; }

// strength reads a kappa as Landis and Koch do.
function strength(k) {
  if (k === null || k === undefined) return 'undefined (no variation to agree on)';
  if (k < 0) return 'poor';
  if (k <= 0.2) return 'slight';
  if (k <= 0.4) return 'fair';
  if (k <= 0.6) return 'moderate';
  if (k <= 0.8) return 'substantial';
  return 'almost perfect';
}

export async function agreementPage(ctx) {
  const [id] = ctx.params;
  const [q, ag] = await Promise.all([api('/v1/review-queues/' + enc(id)), api('/v1/review-queues/' + enc(id) + '/agreement')]);
  const rows = ag.criteria.map(c => ({ attrs: { 'data-criterion': c.criterionId }, cells: [
    code(c.criterionId), c.method || '–', num(c.kappa), c.method ? strength(c.kappa) : '–', pct(c.observed), String(c.items), String(c.skipped || 0),
    c.judge ? num(c.judge.kappa) : '–', c.judge ? pct(c.judge.observed) : '–', c.judge ? String(c.judge.items) : '–'] }));
  ctx.render(h('h1', null, 'Agreement in ', code(id)),
    h('p', { class: 'toolbar' }, h('a', { href: '#/reviews' }, '← reviews')),
    kv([['reviewers', q.reviewers.join(', ')], ['reviews per item', String(q.reviewsPerItem)], ['resolve', q.resolve], ['measured', fmtTime(ag.measuredAt)]]),
    rows.length ? table(['criterion', 'method', 'kappa', 'strength', 'observed', 'items', 'skipped', 'judge kappa', 'judge observed', 'judge items'], rows, { id: 'agreement' })
      : h('p', { class: 'muted', id: 'no-agreement' }, 'No done items yet.'),
    ag.truncated ? h('p', { class: 'muted' }, 'Measured over the oldest 10,000 done items.') : null,
    h('p', { class: 'muted' }, 'Labels are PASS and FAIL, as each review\'s score grades under the criterion\'s threshold. Cohen\'s kappa compares the first and second review of each item; Fleiss\' kappa any number of reviews per item. The judge\'s kappa compares its grade with the reviews\' resolved one on calibration items.'));
}
