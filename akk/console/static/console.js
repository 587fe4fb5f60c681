// The operator console: follows akk serve's view and events over /ui/ws and answers
// pending interactions through the same calls as any controller.

import { el, fill, keyed } from './dom.js';
import { interactionForm } from './interaction.js';
import { Rpc } from './rpc.js';
import { eventItem, recordCard, showScreen, terminalCard } from './views.js';

const MAX_EVENTS = 500;
const AWAITING = new Set(['awaiting_input', 'awaiting_approval']);
const ASKING_EVENTS = new Set(['interaction_required', 'approval_required']);
const SETTLED = new Set(['done', 'failed', 'cancelled', 'stalled', 'timed_out', 'closed']);
const READ_AGAIN = new Set(['status_required', 'prompt_changed', 'offer_expired']);
const NOT_LOGGED_IN = 'Not logged in: run `akk ui --open` in a terminal for a one-time login link.';
const LOST = 'Connection to akk serve lost (is it still running? `akk serve` starts it).';

const $ = (testid) => document.querySelector(`[data-testid="${testid}"]`);
const byId = (id) => document.getElementById(id);

const page = {
  banner: $('state-banner'),
  conn: byId('conn'),
  server: byId('server-info'),
  main: byId('main'),
  announce: byId('announce'),
  pendingList: byId('pending-list'),
  pendingEmpty: byId('pending-empty'),
  terminals: byId('terminal-list'),
  terminalsEmpty: byId('terminals-empty'),
  turns: byId('turn-list'),
  watches: byId('watch-list'),
  sessions: byId('session-list'),
  events: $('event-list'),
  eventsEmpty: byId('events-empty'),
  filters: { controller: $('filter-controller'), terminal: $('filter-terminal'), kind: $('filter-kind') },
  logout: $('logout'),
};

const state = {
  connected: false,
  view: null,
  screens: new Map(), // terminal_id -> its screen, from console_follow and console_screen
  events: [],
  seen: { controller: new Set(), terminal: new Set(), kind: new Set() },
  pending: new Map(),
  dismissed: new Map(),
};

const rpc = new Rpc({ onState: connection, onNotify: notified });

function banner(kind, text, button) {
  page.banner.dataset.state = kind;
  page.banner.hidden = kind === 'ok';
  fill(page.banner, el('p', {}, text || ''), button || null);
}

function retryButton(label) {
  const button = el('button', { type: 'button', 'data-testid': 'reconnect' }, label);
  button.addEventListener('click', () => rpc.start());
  return button;
}

function connection(kind, seconds) {
  state.connected = kind === 'open';
  page.main.classList.toggle('stale', !state.connected && state.view !== null);
  page.main.setAttribute('aria-busy', String(!state.connected));
  page.conn.dataset.state = kind;
  if (kind === 'connecting') {
    page.conn.textContent = 'Connecting…';
    if (page.banner.dataset.state === 'loading') banner('loading', 'Connecting to akk serve…');
  } else if (kind === 'open') {
    page.conn.textContent = 'Live';
    page.logout.disabled = false;
    follow();
  } else if (kind === 'lost') {
    page.conn.textContent = 'Disconnected';
    banner('lost', `${LOST} Trying again in ${seconds} s.`, retryButton('Try again now'));
  } else if (kind === 'logged_out') {
    loggedOut(seconds);
  }
}

function loggedOut(seconds) {
  page.conn.textContent = 'Logged out';
  page.conn.dataset.state = 'logged_out';
  const later = seconds ? ` Trying again every ${seconds} s.` : '';
  banner('logged_out', NOT_LOGGED_IN + later, retryButton('I have logged in: try again'));
}

async function follow() {
  banner('loading', 'Loading the view from akk serve…');
  try {
    const hello = await rpc.call('hello', { name: 'console' });
    page.server.dataset.version = hello.server_version || '';
    const followed = await rpc.call('console_follow', {});
    state.events = [];
    state.pending.clear();
    state.dismissed.clear();
    page.pendingList.replaceChildren();
    page.pendingList.akkKeyed = null;
    state.screens = new Map(Object.entries(followed.screens || {}));
    for (const event of followed.events || []) addEvent(event, false);
    drawEvents();
    showView(followed.view);
    for (const event of [...state.events].reverse()) askedBy(event);
  } catch (error) {
    if (state.connected) banner('error', `akk serve refused the console: ${error.message}`, retryButton('Try again'));
  }
}

function notified(method, params) {
  if (method === 'console_view') showView(params);
  else if (method === 'console_screen') screenChanged(params);
  else if (method === 'console_event') {
    addEvent(params, true);
    askedBy(params);
  }
  // `event` notifications belong to the CLI's own stream: neither shown nor acked here.
}

// --- the view ---------------------------------------------------------------------------

function showView(view) {
  if (!view) return;
  state.view = view;
  page.main.classList.remove('stale');
  const server = view.server || {};
  const sockets = (server.tmux || []).map((t) => `tmux ${t.socket}: ${t.state}${t.detail ? ` (${t.detail})` : ''}`);
  page.server.textContent = [`akk serve ${server.version || page.server.dataset.version || ''}`.trim(), ...sockets].join(' · ');
  const terminals = (view.terminals || []).map(withScreen);
  const live = new Set(terminals.map((t) => t.terminal_id));
  for (const id of [...state.screens.keys()]) if (!live.has(id)) state.screens.delete(id);
  keyed(page.terminals, terminals, (t) => t.terminal_id, terminalCard);
  page.terminalsEmpty.hidden = terminals.length > 0;
  const older = view.older || {};
  section(page.turns, 'turn', view.turns, older.turns);
  section(page.watches, 'watch', view.watches, older.watches);
  section(page.sessions, 'session', view.sessions);
  const tmux = server.tmux || [];
  if (tmux.length && !tmux.some((t) => t.state === 'running')) {
    const detail = tmux.map((t) => `${t.socket}: ${t.state}${t.detail ? `, ${t.detail}` : ''}`).join('; ');
    banner('no_tmux', `No tmux server is running (${detail}). Start tmux, run \`claude\` or \`codex\` in a pane, and it shows up here.`);
  } else if (!terminals.length) {
    banner('no_agents', 'No Claude Code or Codex pane found in tmux. Start `claude` or `codex` in a tmux pane and it shows up here.');
  } else {
    banner('ok', '');
  }
  followPending();
}

/** A terminal row with its screen: the row's own (if the server sends it inline) or the
 *  last one console_follow or console_screen brought. */
function withScreen(terminal) {
  if ('screen' in terminal) {
    state.screens.set(terminal.terminal_id, terminal.screen);
    return terminal;
  }
  return { ...terminal, screen: state.screens.get(terminal.terminal_id) ?? null };
}

function screenChanged({ terminal_id: terminalId, screen }) {
  state.screens.set(terminalId, screen);
  const pre = document.querySelector(`[data-testid="screen-${CSS.escape(terminalId)}"]`);
  if (pre) showScreen(pre, screen);
}

/** One list of records; `older` settled ones the server left out say so after it. */
function section(container, kind, records, older = 0) {
  const list = records || [];
  keyed(container, list, (r) => r[`${kind}_id`] ?? JSON.stringify(r), (r) => recordCard(kind, r));
  container.nextElementSibling.hidden = list.length > 0;
  let note = container.parentElement.querySelector('.older');
  if (!note) {
    note = el('p', { class: 'older empty' });
    container.parentElement.append(note);
  }
  note.hidden = !older;
  note.textContent = older ? `${older} older settled ${kind}s are not shown here; \`akk list\` shows them all.` : '';
}

// --- pending interactions ---------------------------------------------------------------

function turnRecord(turnId) {
  return ((state.view && state.view.turns) || []).find((t) => t.turn_id === turnId) || null;
}

function terminalOf(turnId) {
  return ((state.view && state.view.terminals) || []).find((t) => t.turn_id === turnId) || null;
}

/** What changes whenever the turn's question may have: its terminal's row (less the
 *  screen) and its record. */
function signature(turnId, extra = '') {
  const terminal = terminalOf(turnId);
  const row = terminal ? { ...terminal, screen: undefined } : null; // a screen alone asks nothing new
  return JSON.stringify([row, turnRecord(turnId), extra]);
}

function followPending() {
  const wanted = new Set();
  for (const terminal of (state.view && state.view.terminals) || []) {
    if (AWAITING.has(terminal.activity_state) && terminal.turn_id) wanted.add(terminal.turn_id);
  }
  for (const [turnId, entry] of state.pending) if (entry.fromEvent) wanted.add(turnId);
  for (const turnId of wanted) track(turnId, signature(turnId, state.pending.get(turnId)?.eventId || ''));
  for (const turnId of [...state.pending.keys()]) if (!wanted.has(turnId)) dropPending(turnId);
}

function askedBy(event) {
  if (!ASKING_EVENTS.has(event.kind) || !event.turn_id) return;
  const record = turnRecord(event.turn_id);
  if (record && SETTLED.has(record.state)) return;
  const entry = pendingEntry(event.turn_id);
  entry.fromEvent = true;
  entry.eventId = event.event_id;
  state.dismissed.delete(event.turn_id);
  track(event.turn_id, signature(event.turn_id, event.event_id));
}

function pendingEntry(turnId) {
  let entry = state.pending.get(turnId);
  if (!entry) {
    entry = { turnId, sig: null, fetching: false, again: false, json: null, interactionId: null,
      fromEvent: false, eventId: '', notice: '', node: pendingCard(turnId) };
    state.pending.set(turnId, entry);
    page.pendingList.append(entry.node);
    page.pendingEmpty.hidden = true;
  }
  return entry;
}

function track(turnId, sig) {
  if (state.dismissed.get(turnId) === sig) return;
  const entry = pendingEntry(turnId);
  if (entry.sig === sig) return;
  entry.sig = sig;
  readStatus(entry);
}

function dropPending(turnId) {
  const entry = state.pending.get(turnId);
  if (!entry) return;
  state.pending.delete(turnId);
  entry.node.remove();
  page.pendingEmpty.hidden = state.pending.size > 0;
}

async function readStatus(entry) {
  if (entry.fetching) {
    entry.again = true;
    return;
  }
  entry.fetching = true;
  try {
    const result = await rpc.call('status', { turn_id: entry.turnId });
    if (state.pending.get(entry.turnId) !== entry) return;
    const interaction = result && result.interaction;
    if (!interaction) {
      state.dismissed.set(entry.turnId, entry.sig);
      dropPending(entry.turnId);
    } else {
      showProjection(entry, interaction);
    }
  } catch (error) {
    if (error.reason === 'not_found') dropPending(entry.turnId);
    else notice(entry, `Could not read the question: ${error.message}`);
  } finally {
    entry.fetching = false;
    if (entry.again && state.pending.get(entry.turnId) === entry) {
      entry.again = false;
      readStatus(entry);
    }
  }
}

function pendingCard(turnId) {
  const headingId = `p-${turnId.replace(/[^A-Za-z0-9_-]/g, '_')}`;
  const refresh = el('button', { type: 'button', class: 'quiet' }, 'Read the question again');
  const card = el('article', { class: 'card pending', 'data-testid': `pending-${turnId}`, 'aria-labelledby': headingId },
    el('h3', { id: headingId }, `Turn ${turnId}`),
    el('p', { class: 'notice', role: 'status', hidden: true }),
    el('div', { class: 'slot' }, el('p', { class: 'meta' }, 'Reading the question…')),
    refresh);
  refresh.addEventListener('click', () => {
    const entry = state.pending.get(turnId);
    if (entry) readStatus(entry);
  });
  return card;
}

function notice(entry, text) {
  const node = entry.node.querySelector('.notice');
  node.textContent = text;
  node.hidden = !text;
}

function showProjection(entry, projection) {
  const json = JSON.stringify(projection);
  if (json === entry.json) return;
  const fresh = projection.interaction_id !== entry.interactionId;
  entry.json = json;
  entry.interactionId = projection.interaction_id;
  const terminal = terminalOf(entry.turnId);
  const where = terminal ? ` — ${terminal.agent} in ${terminal.cwd || terminal.terminal_id}` : '';
  fill(entry.node.querySelector('h3'), `Turn ${entry.turnId}${where}`);
  let body;
  if (projection.state === 'manual_required') {
    const why = projection.manual_reason || projection.reason || 'AKK does not answer this prompt';
    body = el('p', { class: 'manual', 'data-testid': 'manual-required' },
      `A person is needed: ${why}. Answer it at the terminal${projection.terminal_id ? ` (${projection.terminal_id})` : ''}.`);
  } else if (projection.state === 'pending') {
    body = interactionForm(projection, (method, params) => answer(entry, method, params));
  } else {
    body = el('p', { class: 'meta' }, `The prompt is ${projection.state}.`);
  }
  fill(entry.node.querySelector('.slot'), body);
  if (fresh) {
    const first = (projection.questions || [])[0];
    const asked = first ? first.prompt : projection.kind;
    page.announce.textContent = `New ${projection.kind || 'question'} for turn ${entry.turnId}${where}: ${asked}`;
  }
}

async function answer(entry, method, params) {
  notice(entry, '');
  try {
    return await rpc.call(method, params);
  } catch (error) {
    if (READ_AGAIN.has(error.reason)) {
      notice(entry, `${error.message} The question was read again below; check it and answer again.`);
      readStatus(entry);
    }
    throw error;
  }
}

// --- events -----------------------------------------------------------------------------

function addEvent(event, live) {
  state.events.unshift(event);
  if (state.events.length > MAX_EVENTS) state.events.length = MAX_EVENTS;
  let grew = false;
  for (const [name, value] of [['controller', event.controller_id], ['terminal', event.terminal_id], ['kind', event.kind]]) {
    const key = value || '';
    if (!state.seen[name].has(key)) {
      state.seen[name].add(key);
      grew = true;
    }
  }
  if (grew) drawFilters();
  if (!live) return;
  if (matches(event)) {
    page.events.prepend(eventItem(event));
    while (page.events.children.length > MAX_EVENTS) page.events.lastElementChild.remove();
  }
  page.eventsEmpty.hidden = page.events.children.length > 0;
  page.eventsEmpty.textContent = 'No event matches these filters.';
}

function matches(event) {
  const f = page.filters;
  return (!f.controller.value || f.controller.value === (event.controller_id || '-'))
    && (!f.terminal.value || f.terminal.value === (event.terminal_id || '-'))
    && (!f.kind.value || f.kind.value === event.kind);
}

function drawFilters() {
  const none = { controller: 'no controller', terminal: 'no terminal', kind: 'no kind' };
  for (const [name, select] of Object.entries(page.filters)) {
    const chosen = select.value;
    fill(select, el('option', { value: '' }, 'All'),
      [...state.seen[name]].sort().map((v) => el('option', { value: v || '-' }, v || none[name])));
    select.value = chosen;
  }
}

function drawEvents() {
  fill(page.events, state.events.filter(matches).map(eventItem));
  page.eventsEmpty.hidden = page.events.children.length > 0;
  page.eventsEmpty.textContent = state.events.length ? 'No event matches these filters.' : 'No events yet.';
}

for (const select of Object.values(page.filters)) select.addEventListener('change', drawEvents);

page.logout.addEventListener('click', async () => {
  page.logout.disabled = true;
  try {
    await fetch('/ui/logout', { method: 'POST', credentials: 'same-origin' });
  } catch {
    // The server is gone: the session ends with it; the page shows logged out all the same.
  }
  rpc.stop();
  connection('closed');
  loggedOut(0);
});

rpc.start();
