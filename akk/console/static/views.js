// The view's lists as DOM: terminals with their screens, Turns, Watches and sessions.

import { el, facts, fill, show } from './dom.js';
import { drawScreen } from './screen.js';

const AWAITING = new Set(['awaiting_input', 'awaiting_approval']);

function idPart(value) {
  return String(value).replace(/[^A-Za-z0-9_-]/g, '_');
}

/** The methods a record or pane offers now (their params are the ids shown beside them). */
function actions(list) {
  if (!list || !list.length) return '—';
  return el('ul', { class: 'actions' }, list.map((action) => el('li', {}, el('code', {}, action.method))));
}

/** A time the server sent as seconds since the epoch, in the operator's own locale. */
function when(seconds) {
  return typeof seconds === 'number' ? new Date(seconds * 1000).toLocaleString() : seconds;
}

/** A Turn's input-bearing steps, oldest first: what, how far it got, and for whom. */
function stages(list) {
  if (!list || !list.length) return '—';
  return el('ol', { class: 'stages' }, list.map((step) => el('li', {},
    el('code', {}, step.kind), ' ', badge(step.stage),
    ` ${step.controller_id || ''}${step.reason ? ` (${step.reason})` : ''}`)));
}

function badge(state) {
  return el('span', { class: 'badge', 'data-state': state || 'unknown' }, state || 'unknown');
}

/** A terminal's card; `old` (its previous card) is updated in place so the screen keeps
 *  its scroll position and focus. */
export function terminalCard(terminal, old) {
  const id = terminal.terminal_id;
  const card = old || el('article', { class: 'card terminal', 'data-testid': `terminal-${id}`,
    'aria-labelledby': `t-${idPart(id)}` });
  if (!old) {
    const pre = el('pre', { class: 'screen', 'data-testid': `screen-${id}`, tabindex: 0,
      'aria-label': `Screen of ${terminal.agent || 'terminal'} ${id}` });
    card.append(el('h3', { id: `t-${idPart(id)}` }), el('div', { class: 'body' }),
      el('details', { class: 'screen-box', open: true }, el('summary', {}, 'Screen'), pre));
  }
  card.dataset.state = terminal.activity_state || 'unknown';
  fill(card.querySelector('h3'), `${terminal.agent || 'agent'} ${terminal.version || '(version unknown)'} `,
    badge(terminal.activity_state), el('span', { class: 'sub' }, ` ${terminal.cwd || ''}`));
  const profile = terminal.profile
    ? terminal.profile
    : `none: ${terminal.profile_reason || 'no reason given'}`;
  const observation = terminal.observation || {};
  const pairs = [
    ['Profile', profile, 'profile'],
    ['State', terminal.activity_state, 'state'],
    ['cwd', terminal.cwd, 'cwd'],
  ];
  if (terminal.next_step) pairs.push(['Next step', terminal.next_step, 'next_step']);
  if (terminal.asks) pairs.push(['Asks', terminal.asks, 'asks']);
  if (observation.reason) pairs.push(['Observation', `${observation.state}: ${observation.reason}`, 'observation']);
  pairs.push(['Turn', terminal.turn_id, 'turn_id'], ['Session', terminal.session_id, 'session_id'],
    ['Pane', [terminal.tmux_socket, terminal.pane].filter(Boolean).join(' '), 'pane'],
    ['Actions', actions(terminal.available_actions), 'available_actions']);
  const body = card.querySelector('.body');
  fill(body, facts(pairs));
  if (AWAITING.has(terminal.activity_state) && !terminal.turn_id) {
    body.append(el('p', { class: 'note' },
      'No AKK Turn holds this pane, so the console cannot answer it: answer it at the terminal.'));
  }
  showScreen(card.querySelector('pre'), terminal.screen);
  return card;
}

/** Draw `screen` in its <pre> unless that is what it shows already. */
export function showScreen(pre, screen) {
  const json = JSON.stringify(screen || null);
  if (pre.akkScreen === json) return;
  pre.akkScreen = json;
  drawScreen(pre, screen);
}

const TURN_FIELDS = ['controller_id', 'terminal_id', 'session_id', 'backend', 'state', 'stages',
  'outcome', 'reason', 'round', 'evidence', 'usage', 'session_decision', 'final_message',
  'created_at', 'updated_at', 'settled_at', 'deadline_at'];
const LABELS = { controller_id: 'Controller', terminal_id: 'Terminal', session_id: 'Session',
  session_decision: 'Session decision', decision: 'Session decision', final_message: 'Final message',
  created_at: 'Created', updated_at: 'Updated', settled_at: 'Settled', deadline_at: 'Deadline',
  retired_at: 'Retired', retire_reason: 'Retired because', stages: 'Stages' };

function label(key) {
  return LABELS[key] || key.charAt(0).toUpperCase() + key.slice(1).replace(/_/g, ' ');
}

function decision(value) {
  if (!value || typeof value !== 'object') return value;
  return `${value.action || '?'}${value.reason ? ` (${value.reason})` : ''}`;
}

/** A Turn's, Watch's or session's card: `kind` is 'turn', 'watch' or 'session'. The main
 *  fields first; every other field the server sent under "All fields". */
export function recordCard(kind, record) {
  const id = record[`${kind}_id`] || '?';
  const headingId = `${kind}-${idPart(id)}`;
  const main = kind === 'session' ? ['scope', 'backend', 'controller_id', 'decision', 'history',
    'generation', 'created_at', 'retired_at', 'retire_reason'] : TURN_FIELDS;
  const pairs = [];
  for (const key of main) {
    const value = record[key];
    if (value === undefined || value === null) continue;
    let shown = value;
    if (key === 'session_decision' || key === 'decision') shown = decision(value);
    else if (key === 'stages') shown = stages(value);
    else if (key.endsWith('_at')) shown = when(value);
    pairs.push([label(key), shown, key]);
  }
  if (record.available_actions) pairs.push(['Actions', actions(record.available_actions), 'available_actions']);
  const rest = Object.keys(record).filter((key) => !main.includes(key) && key !== 'available_actions'
    && key !== `${kind}_id` && record[key] !== null && record[key] !== undefined);
  return el('article', { class: 'card record', 'data-testid': `${kind}-${id}`, 'aria-labelledby': headingId,
    'data-state': record.state || 'unknown' },
  el('h3', { id: headingId }, `${label(kind)} ${id} `, badge(record.state)),
  facts(pairs),
  rest.length ? el('details', {}, el('summary', {}, 'All fields'),
    facts(rest.map((key) => [key, record[key]]), 'facts small')) : null);
}

/** One event's list item (the newest goes first). */
export function eventItem(event) {
  const when = typeof event.created_at === 'number'
    ? new Date(event.created_at * 1000).toLocaleTimeString() : show(event.created_at);
  return el('li', { class: 'event', 'data-testid': `event-${event.event_id}`, 'data-kind': event.kind },
    el('span', { class: 'when' }, when), ' ', badge(event.kind), ' ',
    el('span', { class: 'who' }, `${event.controller_id || '—'} · ${event.terminal_id || 'no terminal'}`
      + (event.turn_id ? ` · ${event.turn_id}` : '') + (event.watch_id ? ` · ${event.watch_id}` : '')),
    el('span', { class: 'summary' }, event.summary || ''));
}
