// One pending interaction (PROTOCOL.md's projection) as a form the operator answers.
// The form only reads the operator's choices; `send(method, params)` makes the call.

import { el } from './dom.js';

const TEXT_ROLES = new Set(['free_text', 'none_of_the_above']);
const OWN_TEXT = 'own-text';  // the operator's own-text row that no option lists (ids start opt_)
const DECISION_LABELS = { approve_once: 'Approve once', reject: 'Reject' };
const MODE_LABELS = {
  steer_current_turn: 'Steer the current turn',
  queue_next_turn: 'Queue for the next turn',
};
let serial = 0;

/** The form for `projection` (state pending). `send(method, params)` returns a promise of the
 *  call's result; it rejects with an RpcError whose message says what to do next. */
export function interactionForm(projection, send) {
  const name = `i${++serial}`;
  const form = el('form', {
    'data-testid': 'interaction-form',
    'data-interaction-id': projection.interaction_id,
    'data-kind': projection.kind,
    'aria-label': `Answer ${projection.kind || 'the question'}`,
    novalidate: true,
  });
  const questions = projection.questions || [];
  const step = projection.step;
  form.append(el('p', { class: 'meta' }, describe(projection.kind),
    step && step.total > 1 ? ` — step ${step.index} of ${step.total}` : ''));
  const permission = projection.kind === 'permission';
  const readers = [];
  const textRowUnlisted = Boolean(projection.capabilities && projection.capabilities.free_text);
  questions.forEach((question, index) => {
    const block = questionBlock(question, `${name}q${index}`, !permission, textRowUnlisted);
    form.append(block.node);
    readers.push(block.read);
  });
  if (!permission && !questions.length) {
    form.append(el('p', {}, 'The question is queued and not yet opened: sending opens it at the terminal.'));
  }
  let modes = null;
  if (!permission && (projection.delivery_modes || []).length) {
    modes = el('fieldset', { class: 'modes' }, el('legend', {}, 'Delivery'));
    projection.delivery_modes.forEach((mode, index) => {
      modes.append(choice('radio', `${name}mode`, mode, MODE_LABELS[mode] || mode, index === 0,
        `mode-${mode}`));
    });
    form.append(modes);
  }
  const buttons = el('div', { class: 'buttons' });
  if (permission) {
    for (const decision of projection.decisions || []) {
      buttons.append(el('button', {
        type: 'submit', value: decision, 'data-testid': `decision-${decision}`,
        class: decision === 'reject' ? 'danger' : 'primary',
      }, DECISION_LABELS[decision] || decision));
    }
    if (!(projection.decisions || []).length) {
      buttons.append(el('p', {}, 'No decision is offered here: answer it at the terminal.'));
    }
  } else {
    buttons.append(el('button', { type: 'submit', class: 'primary', 'data-testid': 'submit-answer' },
      questions.length ? 'Send answer' : 'Open the question'));
  }
  const result = el('p', { class: 'result', role: 'status', 'data-testid': 'answer-result' });
  form.append(buttons, result);

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    if (form.dataset.busy || form.dataset.sent) return;
    let method;
    let params;
    if (permission) {
      const decision = event.submitter && event.submitter.value;
      if (!decision) return;
      method = 'approve';
      params = { turn_id: projection.turn_id, decision };
    } else {
      const answers = [];
      for (const read of readers) {
        const answer = read();
        if (typeof answer === 'string') {
          say(result, answer, 'error');
          return;
        }
        if (answer) answers.push(answer);
      }
      method = 'respond_interaction';
      params = { interaction_id: projection.interaction_id, turn_id: projection.turn_id, answers };
      const mode = modes && modes.querySelector('input:checked');
      if (mode) params.delivery_mode = mode.value;
    }
    form.dataset.busy = 'yes';
    setDisabled(form, true);
    say(result, 'Sending…', 'busy');
    send(method, params).then((reply) => {
      form.dataset.sent = 'yes';
      const outcome = reply && reply.outcome ? reply.outcome : 'done';
      say(result, `Sent (${outcome}). The screen and this list update when the agent moves on.`, 'ok');
    }, (error) => {
      setDisabled(form, false);
      say(result, error.message + (error.reason ? ` (${error.reason})` : ''), 'error');
    }).finally(() => {
      delete form.dataset.busy;
    });
  });
  return form;
}

function describe(kind) {
  return {
    questionnaire: 'Questionnaire',
    permission: 'Permission request',
    async_question: 'Question',
    confirmation: 'Confirmation',
  }[kind] || `Prompt (${kind || 'unknown kind'})`;
}

function say(node, text, tone) {
  node.textContent = text;
  node.dataset.tone = tone;
}

function setDisabled(form, disabled) {
  for (const control of form.querySelectorAll('button, input, textarea')) control.disabled = disabled;
}

/** A radio or checkbox whose label is exactly the option's label; a description is
 *  tied to the input with aria-describedby. */
function choice(type, name, value, label, checked, testid, description) {
  const hintId = description ? `${name}-${++serial}` : null;
  return el('div', { class: 'choice' },
    el('label', {}, el('input', { type, name, value, checked, 'data-testid': testid,
      'aria-describedby': hintId }), el('span', {}, label)),
    description ? el('span', { class: 'hint', id: hintId }, description) : null);
}

/** One question's fieldset and a reader returning its answer, null (left out) or a
 *  sentence saying what is missing. `answerable`: false for a permission's rows, shown only.
 *  `freeText`: the prompt takes the operator's own text; a select question with no row of
 *  its own for it (Claude's "Type something." is not an option) gets one after its options. */
function questionBlock(question, name, answerable, freeText) {
  const kind = question.response_kind;
  const legend = [question.header, question.prompt].filter(Boolean).join(': ') || 'Question';
  const node = el('fieldset', { class: 'question', 'data-question-id': question.question_id },
    el('legend', {}, legend));
  if (question.detail) node.append(el('p', { class: 'detail' }, question.detail));
  if (!answerable) {
    const rows = (question.options || []).map((o) => el('li', {}, o.label));
    if (rows.length) node.append(el('ul', { class: 'shown-options' }, rows));
    return { node, read: () => null };
  }
  const required = question.required !== false;
  let text = null;
  if (kind === 'free_text') {
    text = el('textarea', { rows: 3, name: `${name}text`, 'data-testid': `text-${question.question_id}` });
    node.append(el('label', { class: 'text' }, el('span', {}, 'Your answer'), text));
  } else {
    const type = kind === 'multi_select' ? 'checkbox' : 'radio';
    const options = [...(question.options || [])];
    const select = kind === 'single_select' || kind === 'multi_select';
    if (freeText && select && !options.some((o) => TEXT_ROLES.has(o.role))) {
      options.push({ option_id: OWN_TEXT, label: 'Your own text', role: 'free_text' });
    }
    for (const option of options) {
      node.append(choice(type, name, option.option_id, option.label, false,
        `option-${option.option_id}`, option.description));
      if (TEXT_ROLES.has(option.role)) {
        text = el('input', { type: 'text', name: `${name}text`, 'data-testid': `text-${question.question_id}` });
        node.append(el('label', { class: 'text', hidden: true, 'data-for-option': option.option_id },
          el('span', {}, 'Your text for “', option.label, '”'), text));
      }
    }
    node.addEventListener('change', () => {
      for (const box of node.querySelectorAll('[data-for-option]')) {
        const picked = node.querySelector(`input[value="${CSS.escape(box.dataset.forOption)}"]`);
        box.hidden = !(picked && picked.checked);
      }
    });
  }
  const read = () => {
    if (kind === 'free_text') {
      if (!text.value.trim()) return required ? `Type an answer for “${legend}”.` : null;
      return { question_id: question.question_id, response_kind: 'free_text', text: text.value };
    }
    const picked = [...node.querySelectorAll('input[type=radio]:checked, input[type=checkbox]:checked')];
    if (!picked.length) return required ? `Choose an option for “${legend}”.` : null;
    const wantsText = picked.find((input) => {
      const option = (question.options || []).find((o) => o.option_id === input.value);
      return input.value === OWN_TEXT || (option && TEXT_ROLES.has(option.role));
    });
    if (wantsText) {
      if (!text.value.trim()) return `Type your text for “${legend}”.`;
      return { question_id: question.question_id, response_kind: 'free_text', text: text.value };
    }
    return {
      question_id: question.question_id,
      response_kind: kind,
      selected_option_ids: picked.map((input) => input.value),
    };
  };
  return { node, read };
}
