// OCC Console script. Our own code, no libraries. Every read and write goes
// to the public API with fetch and the session cookie (same origin), so the
// API's admission, authorization and audit apply. Nothing is kept in browser
// storage, and no file content is ever put in a URL.
'use strict';

const MAX_FILE_BYTES = 16384;
const body = document.body;
const page = body.dataset.page;
const NS = body.dataset.ns;
const AGENT = body.dataset.agent;
const FILE = body.dataset.file;
const CAN = new Set((body.dataset.can || '').split(' ').filter(Boolean));

// Every form but a dialog's is the script's to send. One submitted before
// its page has attached its handler (Enter while the page's first reads
// are still loading, or after one failed) must not go out as a native POST
// to the page's own address, which answers a JSON error. A dialog's form
// (method="dialog") only closes its dialog, and must.
document.addEventListener('submit', (ev) => {
  if (ev.target.method !== 'dialog') { ev.preventDefault(); }
}, true);

const $ = (sel, root = document) => root.querySelector(sel);
const $$ = (sel, root = document) => Array.from(root.querySelectorAll(sel));
const enc = (s) => encodeURIComponent(s);

function status(msg) { $('#status').textContent = msg; if (msg) { $('#alert').textContent = ''; } }
function alertMsg(msg) { $('#alert').textContent = msg; if (msg) { $('#status').textContent = ''; } }
function errText(r) {
  if (r.status === 0) { return 'The server could not be reached.'; }
  const e = r.error || {};
  return (e.message || 'The request failed.') + (e.code ? ' (' + e.code + ')' : '');
}

// api sends one request and never retries. A 401 outside the sign-in page
// means the session ended: go to sign-in, unless opts.stay (the caller says
// so itself first). opts.raw is a body already encoded as JSON text, sent
// instead of payload as is.
async function api(method, path, payload, headers, opts) {
  const opt = { method, headers: Object.assign({}, headers), credentials: 'same-origin', cache: 'no-store' };
  if (opts && opts.raw !== undefined) {
    opt.headers['Content-Type'] = 'application/json';
    opt.body = opts.raw;
  } else if (payload !== undefined) {
    opt.headers['Content-Type'] = 'application/json';
    opt.body = JSON.stringify(payload);
  }
  let res;
  try {
    res = await fetch(path, opt);
  } catch (e) {
    return { status: 0, error: { code: 'NETWORK', message: 'The server could not be reached.' } };
  }
  let j = null;
  try { j = await res.json(); } catch (e) { j = null; }
  if (res.status === 401 && page !== 'sign-in' && !(opts && opts.stay)) {
    location.assign('/console/sign-in');
  }
  const etag = res.headers.get('ETag');
  return { status: res.status, data: j && j.data, error: j && j.error, etag: etag ? etag.replace(/^"|"$/g, '') : null,
    retryAfter: res.headers.get('Retry-After') };
}

// send is api for a form the user typed into. A 401 there means the session
// ended and admission refused the request, so nothing was done; going to
// sign-in would throw the typed text away. So it stays, says so (sign in
// again in another tab, then submit again: the text is still here) and
// answers null: the caller stops, and reloads nothing (a read would go to
// sign-in).
const SESSION_ENDED = 'Nothing was done: your session has ended. Your text is still here: sign in again in another tab, then submit again (or copy your text first, then sign in here).';
async function send(method, path, payload, opts) {
  const r = await api(method, path, payload, undefined, Object.assign({}, opts, { stay: true }));
  if (r.status === 401) { alertMsg(SESSION_ENDED); return null; }
  return r;
}

// retryAfter is the number of seconds a reply asks to wait (Retry-After, in
// seconds or as a date; else data.retryAfterSeconds), 0 when it says none.
function retryAfter(r) {
  const h = (r.retryAfter || '').trim();
  let s = 0;
  if (/^\d+$/.test(h)) {
    s = parseInt(h, 10);
  } else if (h) {
    const t = Date.parse(h);
    if (!isNaN(t)) { s = Math.ceil((t - Date.now()) / 1000); }
  }
  if (!(s > 0) && r.error && r.error.data && r.error.data.retryAfterSeconds > 0) { s = r.error.data.retryAfterSeconds; }
  return s > 0 ? s : 0;
}

// unsaved says whether the page holds typed text that leaving would
// discard (the create-Agent form, the file editor): leaving then asks (the
// browser's own prompt), and Sign out asks first. leave goes without
// asking: the text was sent, or the user said to discard it.
let unsaved = () => false;
let leaving = false;
window.addEventListener('beforeunload', (ev) => {
  if (!leaving && unsaved()) { ev.preventDefault(); ev.returnValue = ''; }
});
function leave(url) { leaving = true; location.assign(url); }

// apiAll reads every page of a paged list (at most 100 pages of 500),
// for the short lists a page shows whole; it answers like api, with all
// the items.
async function apiAll(path) {
  const items = [];
  let cursor = '';
  for (let i = 0; i < 100; i++) {
    const r = await api('GET', path + '?limit=500' + (cursor ? '&cursor=' + encodeURIComponent(cursor) : ''));
    if (r.status !== 200) { return r; }
    items.push(...r.data.items);
    cursor = r.data.nextCursor || '';
    if (!cursor) { break; }
  }
  return { status: 200, data: { items } };
}

function cell(v) {
  const td = document.createElement('td');
  if (v instanceof Node) { td.appendChild(v); } else { td.textContent = v == null ? '' : String(v); }
  return td;
}
// fillTable replaces a table's rows. With a key (a string naming what the
// rows show), a table already showing that key is left alone, so that a
// page polling for changes does not rebuild it every time. When the focus
// was on a link or button of the old rows, it moves to the same control of
// the new rows (same name), else to the control in the same place (the next
// row's, once a row is gone), else to the table itself: never to <body>.
const tableKeys = new WeakMap();
function fillTable(sel, rows, empty, key) {
  const table = $(sel);
  const tb = $('tbody', table);
  if (key !== undefined && tableKeys.get(tb) === key) { return; }
  tableKeys.set(tb, key);
  const ae = document.activeElement;
  let was = null;
  if (ae && ae !== tb && tb.contains(ae)) {
    const td = ae.closest('td');
    was = { tag: ae.tagName, name: ae.getAttribute('aria-label') || ae.textContent, href: ae.getAttribute('href'),
      row: td ? td.parentElement.sectionRowIndex : 0, col: td ? td.cellIndex : 0 };
  }
  tb.replaceChildren();
  if (rows.length === 0) {
    const tr = document.createElement('tr');
    const td = cell(empty || 'None.');
    td.colSpan = $$('thead th', table).length;
    tr.appendChild(td);
    tb.appendChild(tr);
  } else {
    for (const r of rows) {
      const tr = document.createElement('tr');
      r.forEach((v) => tr.appendChild(cell(v)));
      tb.appendChild(tr);
    }
  }
  if (!was) { return; }
  const controls = $$('a, button', tb);
  let to = controls.find((c) => c.tagName === was.tag && (c.getAttribute('aria-label') || c.textContent) === was.name && c.getAttribute('href') === was.href);
  if (!to && tb.rows.length > 0) {
    const tr = tb.rows[Math.min(was.row, tb.rows.length - 1)];
    const td = tr.cells[Math.min(was.col, tr.cells.length - 1)];
    to = $('a, button', td) || $('a, button', tr);
  }
  if (!to || to.disabled) {
    table.tabIndex = -1;
    to = table;
  }
  to.focus();
}
function link(href, text) { const a = document.createElement('a'); a.href = href; a.textContent = text; return a; }
function button(text, label, onClick, cls) {
  const b = document.createElement('button');
  b.type = 'button';
  b.textContent = text;
  if (label) { b.setAttribute('aria-label', label); }
  if (cls) { b.className = cls; }
  b.addEventListener('click', onClick);
  return b;
}

// confirmDialog asks in a modal dialog (keyboard reachable, Escape cancels).
function confirmDialog(text) {
  const d = $('#confirm');
  $('#confirm-text').textContent = text;
  d.returnValue = '';
  return new Promise((resolve) => {
    d.addEventListener('close', () => resolve(d.returnValue === 'ok'), { once: true });
    d.showModal();
    $('#confirm-cancel').focus();
  });
}

// applyCan disables what the caller may not do (a hint from the server's
// authorization layer; the API decides).
function applyCan() {
  for (const el of $$('[data-needs]')) {
    if (CAN.has(el.dataset.needs)) { continue; }
    if (el.tagName === 'A') { el.hidden = true; continue; }
    if (el.tagName === 'BUTTON') { el.disabled = true; el.title = 'You may not do this.'; continue; }
    for (const c of $$('input, select, textarea, button', el)) { c.disabled = true; }
    const p = document.createElement('p');
    p.className = 'hint';
    p.textContent = 'Read-only: you do not have the permission for this.';
    el.prepend(p);
  }
}

function byteLength(s) { return new TextEncoder().encode(s).length; }
function wellFormed(s) {
  if (typeof s.isWellFormed === 'function') { return s.isWellFormed(); }
  return !/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?:[^\uD800-\uDBFF]|^)[\uDC00-\uDFFF]/.test(s);
}
// contentProblem mirrors the API's content rule.
function contentProblem(s) {
  if (s.indexOf('\u0000') >= 0) { return 'contains a NUL character'; }
  if (!wellFormed(s)) { return 'is not well-formed Unicode'; }
  if (byteLength(s) > MAX_FILE_BYTES) { return 'is longer than 16,384 bytes'; }
  return '';
}
function lf(s) { return s.replace(/\r\n?/g, '\n'); }
// counter shows a text's size against the limit. It is not a live region
// (it would speak on every keystroke): crossing the limit, either way, is
// announced once in the page's #count-live region, naming the text.
function counter(el, value, name) {
  const n = byteLength(value);
  const p = contentProblem(value);
  el.textContent = n.toLocaleString('en-US') + ' / 16,384 bytes' + (p ? ': ' + p : '');
  const was = el.classList.contains('over');
  el.classList.toggle('over', p !== '');
  const live = $('#count-live');
  if (live && was !== (p !== '')) {
    live.textContent = p ? name + ' ' + p + '.' : name + ' is within the limit again.';
  }
  return p;
}
async function sha256(s) {
  if (!(window.crypto && crypto.subtle)) { return null; }
  const b = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(s));
  return Array.from(new Uint8Array(b), (x) => x.toString(16).padStart(2, '0')).join('');
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// --- chrome ---

async function chrome() {
  const so = $('#sign-out');
  if (so) {
    let busy = false;
    so.addEventListener('click', async () => {
      if (busy) { return; }
      busy = true;
      // Signing out leaves the page: ask first when that discards typed
      // text (after the sign-out, it could not be sent any more).
      if (unsaved() && !(await confirmDialog('Sign out and discard the text you have not saved?'))) { busy = false; return; }
      const r = await api('POST', '/api/auth/sign-out');
      busy = false;
      // A 401 means the session had already ended; api goes to sign-in.
      if (r.status === 200 || r.status === 401) { leave('/console/sign-in'); return; }
      // Anything else: the session may still be valid. Stay, and say so.
      alertMsg('Sign-out failed: ' + errText(r) + ' You may still be signed in: try again.');
    });
    const r = await api('GET', '/api/auth/session');
    if (r.status === 200) {
      $('#whoami').textContent = r.data.user ? r.data.user.email : r.data.subject.id;
    }
  }
}

// --- pages ---

const pages = {};

pages['sign-in'] = () => {
  $('#sign-in-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    status('Signing in…');
    const r = await api('POST', '/api/auth/sign-in/email', { email: $('#email').value, password: $('#password').value });
    if (r.status === 200) { location.assign('/console/namespaces'); return; }
    // One message for every wrong credential (401): the page never says
    // whether an account exists. Other refusals are not about the
    // credentials (an untrusted origin, a throttled account or address, a
    // server fault): the server's own message says which, and when to try
    // again.
    let msg;
    if (r.status === 0) {
      msg = errText(r);
    } else if (r.status === 401) {
      msg = 'Sign-in failed: the email or password is not correct.';
    } else {
      msg = 'Sign-in failed: ' + errText(r);
      const wait = retryAfter(r);
      if (wait) { msg += ' Try again in ' + wait + (wait === 1 ? ' second.' : ' seconds.'); }
    }
    alertMsg(msg);
    $('#password').value = '';
    $('#password').focus();
  });
};

// pager follows a paged list's nextCursor with First page / Next page
// buttons (ids prefix-first, prefix-next): path(base) is the list URL of
// the current page, seen(r) records the reply's nextCursor and enables
// Next page while one exists.
const pager = (prefix, reload) => {
  let cur = '';
  let next = '';
  $('#' + prefix + '-first').addEventListener('click', () => { cur = ''; reload(); });
  $('#' + prefix + '-next').addEventListener('click', () => { if (next) { cur = next; reload(); } });
  return {
    path: (base) => base + (cur ? '?cursor=' + encodeURIComponent(cur) : ''),
    seen: (r) => { next = r.data.nextCursor || ''; $('#' + prefix + '-next').disabled = !next; },
  };
};

pages.namespaces = async () => {
  const pg = pager('ns', () => load());
  const load = async () => {
    const path = pg.path('/namespaces');
    const r = await api('GET', path);
    if (r.status !== 200) { alertMsg(errText(r)); return false; }
    pg.seen(r);
    // Keyed by what the rows show: the polling below rebuilds the table
    // (and its buttons) only when something changed.
    const key = JSON.stringify([path, r.data.items.map((n) => [n.id, n.name, n.status])]);
    fillTable('#namespaces', r.data.items.map((n) => [
      link('/console/namespaces/' + enc(n.id), n.name), n.status, n.id,
      button('Delete', 'Delete Namespace ' + n.name, async () => {
        if (!(await confirmDialog('Delete the Namespace ' + n.name + '? Only an empty Namespace can be deleted.'))) { return; }
        const d = await api('DELETE', '/namespaces/' + enc(n.id));
        if (d.status === 202) { status('Deleting Namespace ' + n.name + '.'); } else { alertMsg(errText(d)); }
        follow();
      }, 'danger'),
    ]), 'No Namespaces yet.', key);
    return r.data.items.some((n) => n.status === 'provisioning' || n.status === 'deleting');
  };
  $('#ns-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const r = await send('POST', '/namespaces', { name: $('#ns-name').value });
    if (!r) { return; }
    if (r.status === 201) { status('Created Namespace ' + r.data.name + '.'); $('#ns-name').value = ''; } else { alertMsg(errText(r)); }
    follow();
  });
  // Follow transitional states for at most two minutes, one follower at a
  // time (a second call only reloads; the running one goes on while
  // anything is transitional).
  let following = false;
  const follow = async () => {
    if (following) { await load(); return; }
    following = true;
    try {
      for (let i = 0; i < 120; i++) {
        if (!(await load())) { return; }
        await sleep(1000);
      }
    } finally {
      following = false;
    }
  };
  follow();
};

pages.agents = async () => {
  const ns = await api('GET', '/namespaces/' + enc(NS));
  if (ns.status !== 200) { alertMsg(errText(ns)); return; }
  $('#ns-name').textContent = ns.data.name;
  const pg = pager('agents', () => loadAgents());
  const loadAgents = async () => {
    const r = await api('GET', pg.path('/namespaces/' + enc(NS) + '/agents'));
    if (r.status !== 200) { alertMsg(errText(r)); return; }
    pg.seen(r);
    fillTable('#agents', r.data.items.map((a) => [
      link('/console/namespaces/' + enc(NS) + '/agents/' + enc(a.id), a.name), a.desiredRuntimeState, a.status, a.activeRevisionId || '–',
    ]), 'No Agents yet.');
  };
  const loadCfgs = async () => {
    const r = await apiAll('/namespaces/' + enc(NS) + '/configurations');
    if (r.status !== 200) { fillTable('#configurations', [], errText(r)); return; }
    fillTable('#configurations', r.data.items.map((c) => [c.name, c.generation, c.id]), 'No Configurations yet: create one before the first Agent.');
  };
  $('#cfg-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    // The document is sent as typed: parsing and re-encoding it would round
    // large integers, drop duplicate keys (which the API refuses) and
    // respell numbers. JSON.parse only checks it; a text that passes is one
    // JSON value, so it can stand as the body's document member.
    const raw = $('#cfg-doc').value;
    let doc;
    try { doc = JSON.parse(raw); } catch (e) { alertMsg('The document is not valid JSON.'); return; }
    if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) { alertMsg('The document must be a JSON object.'); return; }
    if (!wellFormed(raw)) { alertMsg('The document is not well-formed Unicode.'); return; }
    const r = await send('POST', '/namespaces/' + enc(NS) + '/configurations', undefined,
      { raw: '{"name":' + JSON.stringify($('#cfg-name').value) + ',"kind":"agent","document":' + raw + '}' });
    if (!r) { return; }
    if (r.status === 201) { status('Created Configuration ' + r.data.name + '.'); $('#cfg-name').value = ''; } else { alertMsg(errText(r)); }
    loadCfgs();
  });
  $('#ns-delete').addEventListener('click', async () => {
    if (!(await confirmDialog('Delete the Namespace ' + ns.data.name + '?'))) { return; }
    const r = await api('DELETE', '/namespaces/' + enc(NS));
    if (r.status === 202) { location.assign('/console/namespaces'); } else { alertMsg(errText(r)); }
  });
  loadAgents();
  loadCfgs();
};

pages['agent-new'] = async () => {
  const form = $('#agent-form');
  const areas = $$('textarea.wsfile');
  const check = () => {
    let bad = '';
    for (const t of areas) {
      const p = counter($('#count-' + CSS.escape(t.dataset.name)), lf(t.value), t.dataset.name);
      if (p && !bad) { bad = t.dataset.name + ' ' + p + '.'; }
    }
    return bad;
  };
  areas.forEach((t) => t.addEventListener('input', check));
  const [cfgs, defs] = await Promise.all([
    apiAll('/namespaces/' + enc(NS) + '/configurations'),
    api('GET', '/workspace-defaults'),
  ]);
  if (cfgs.status !== 200) { alertMsg(errText(cfgs)); return; }
  if (defs.status !== 200) { alertMsg(errText(defs)); return; }
  const sel = $('#agent-cfg');
  for (const c of cfgs.data.items) {
    const o = document.createElement('option');
    o.value = c.id;
    o.textContent = c.name;
    sel.appendChild(o);
  }
  if (cfgs.data.items.length === 0) { alertMsg('This Namespace has no Configuration: create one on the Agents page first.'); }
  $('#defaults-id').value = defs.data.id;
  for (const t of areas) { t.value = lf(defs.data.files[t.dataset.name] || ''); }
  check();
  if (!CAN.has('create-agent')) {
    $$('input, select, textarea, button', form).forEach((c) => { c.disabled = true; });
    alertMsg('Read-only: you may not create Agents in this Namespace.');
    return;
  }
  // Leaving (or signing out) asks while a file differs from its default:
  // up to four files of typed text would be lost.
  unsaved = () => areas.some((t) => lf(t.value) !== lf(defs.data.files[t.dataset.name] || ''));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const bad = check();
    if (bad) { alertMsg('Not submitted: ' + bad); return; }
    const files = {};
    for (const t of areas) { files[t.dataset.name] = lf(t.value); }
    status('Creating…');
    const r = await send('POST', '/namespaces/' + enc(NS) + '/agents', {
      name: $('#agent-name').value, configurationId: sel.value,
      initialWorkspaceFiles: files, workspaceDefaultsId: $('#defaults-id').value,
    });
    if (!r) { return; }
    if (r.status === 201) {
      leave('/console/namespaces/' + enc(NS) + '/agents/' + enc(r.data.id));
      return;
    }
    if (r.status === 409 && r.error && /defaults/i.test(r.error.message || '')) {
      // The typed text stays in the form.
      alertMsg('The workspace defaults changed: reload the page to create the Agent. Your text is kept below; copy what you need first.');
      return;
    }
    alertMsg(errText(r));
  });
};

function describeDeployment(d) {
  let s = 'Revision ' + d.revision + ': ' + d.status;
  if (d.status === 'failed' && d.error) { s += ' (' + d.error.code + ': ' + d.error.message + ')'; }
  const p = d.progress;
  if (p && (d.status === 'running' || d.status === 'queued')) {
    if (p.attempts) { s += ', attempt ' + p.attempts; }
    if (p.lastAttempt) { s += ', last: ' + p.lastAttempt.code + ' ' + p.lastAttempt.message; }
  }
  return s + '.';
}

pages.agent = async () => {
  const base = '/namespaces/' + enc(NS) + '/agents/' + enc(AGENT);
  let agent = null;
  const facts = async () => {
    const r = await api('GET', base);
    if (r.status !== 200) { alertMsg(errText(r)); return false; }
    agent = r.data;
    document.title = agent.name + ' · OCC';
    $('h1').textContent = 'Agent ' + agent.name;
    const dl = $('#agent-facts');
    dl.replaceChildren();
    for (const [k, v] of [['Id', agent.id], ['Desired state', agent.desiredRuntimeState], ['Status', agent.status],
      ['Configuration', agent.configurationId], ['Active revision', agent.activeRevisionId || 'none']]) {
      const dt = document.createElement('dt'); dt.textContent = k;
      const dd = document.createElement('dd'); dd.textContent = v;
      dl.append(dt, dd);
    }
    const live = agent.activeRevisionId && agent.status === 'active';
    $('#files').hidden = !live;
    $('#files-note').textContent = live
      ? (agent.desiredRuntimeState === 'running' ? 'Edit a live file:' : 'The Agent is stopped: its files are read-only until it runs again.')
      : 'No active revision yet: deploy the Agent to read and edit its files.';
    return true;
  };
  let following = '';
  const follow = async (depID) => {
    if (following === depID) { return; }
    following = depID;
    // Bounded: at most 15 minutes of polling.
    for (let i = 0; i < 900 && following === depID; i++) {
      const r = await api('GET', base + '/deployments/' + enc(depID));
      if (r.status !== 200) { $('#deployment').textContent = errText(r); break; }
      $('#deployment').textContent = describeDeployment(r.data);
      if (r.data.status === 'succeeded' || r.data.status === 'failed') {
        status('Deployment of revision ' + r.data.revision + ' ' + r.data.status + '.');
        await facts();
        await revisions();
        break;
      }
      await sleep(1000);
    }
    if (following === depID) { following = ''; }
  };
  const revisions = async () => {
    const r = await apiAll(base + '/revisions');
    if (r.status !== 200) { fillTable('#revisions', [], errText(r)); return; }
    const items = r.data.items.slice().sort((a, b) => b.revision - a.revision).slice(0, 10);
    const deps = await Promise.all(items.map((v) => api('GET', base + '/deployments/' + enc(v.id))));
    fillTable("#revisions", items.map((v, i) => [v.revision, v.id, v.configurationGeneration, v.createdAt,
      deps[i].status === 200 ? deps[i].data.status : errText(deps[i])]), 'No revisions: the Agent was never deployed.');
    const latest = deps[0];
    if (latest && latest.status === 200 && (latest.data.status === 'queued' || latest.data.status === 'running')) {
      follow(items[0].id);
    }
  };
  const deployBtn = $('#deploy');
  deployBtn.addEventListener('click', async () => {
    // Off while the request is out: a double click must not make two
    // revisions. Disabling a focused button sends focus to <body>: give
    // it back.
    if (deployBtn.disabled) { return; }
    const focused = document.activeElement === deployBtn;
    deployBtn.disabled = true;
    const r = await api('POST', base + '/deploy');
    deployBtn.disabled = false;
    if (focused && (document.activeElement === body || !document.activeElement)) { deployBtn.focus(); }
    if (r.status !== 202) { alertMsg(errText(r)); return; }
    status('Deployment of revision ' + r.data.revision + ' queued.');
    await revisions();
    follow(r.data.id);
  });
  $('#stop').addEventListener('click', async () => {
    if (!(await confirmDialog('Stop the Agent ' + (agent ? agent.name : '') + '? Its gateway stops serving.'))) { return; }
    const r = await api('POST', base + '/stop');
    if (r.status === 202) { status('Stopping.'); } else { alertMsg(errText(r)); }
    facts();
  });
  $('#delete').addEventListener('click', async () => {
    if (!(await confirmDialog('Delete the Agent ' + (agent ? agent.name : '') + ' and its workspace? This cannot be undone.'))) { return; }
    const r = await api('DELETE', base);
    if (r.status === 202) { location.assign('/console/namespaces/' + enc(NS)); } else { alertMsg(errText(r)); }
  });
  if (await facts()) { revisions(); }
};

pages.file = async () => {
  const path = '/namespaces/' + enc(NS) + '/agents/' + enc(AGENT) + '/workspace/files/' + enc(FILE);
  const ed = $('#editor');
  const save = $('#save');
  const reload = $('#reload');
  const hint = $('#file-hint');
  const defaultHint = hint.textContent;
  // base is the content as read (raw: it may hold CR or CRLF), hash its
  // ETag (null: the file did not exist), unknown the text of a save whose
  // outcome is unknown until a reload settles it. late is set when a reload
  // settled an unknown outcome by finding no file: that save was not
  // applied so far but may still be, so creating the file (a write without
  // If-Match, which nothing could refuse) asks first. Only a load that
  // finds the file, or a save, clears it.
  const st = { loaded: false, base: '', hash: null, pending: false, loading: false, unknown: null, running: false, late: false };
  const canOperate = CAN.has('operate');
  // The textarea turns CR and CRLF into LF: compare with the base as the
  // textarea holds it, or a file with CRs would look edited right away.
  const dirty = () => st.loaded && lf(ed.value) !== lf(st.base);
  const busy = () => st.pending || st.loading;
  const controls = [save, reload, $('#discard'), $('#take-theirs'), $('#take-yours')];
  const refresh = () => {
    const focused = document.activeElement;
    const p = counter($('#file-count'), lf(ed.value), FILE);
    save.disabled = !(st.loaded && !busy() && st.unknown === null && st.running && canOperate && dirty() && !p);
    // No reload while a save is out: it could show the old content under
    // the hash the save is about to make current.
    reload.disabled = busy();
    $('#discard').disabled = !dirty() || busy();
    // Keeping yours is a save: not while one is in flight or after an
    // unknown outcome, which only a reload settles.
    $('#take-yours').disabled = busy() || st.unknown !== null;
    $('#take-theirs').disabled = busy();
    $('#file-hash').textContent = st.hash ? 'Loaded version sha256:' + st.hash : (st.loaded ? 'The file does not exist yet.' : '');
    // Saving writes LF line endings: say so when the file has CRs. (Empty
    // when not: the editor's description names this line.)
    const cr = st.loaded && /\r/.test(st.base);
    const eol = $('#file-eol');
    eol.textContent = cr ? 'This file has CR or CRLF line endings: the editor shows them as LF, and saving writes LF line endings.' : '';
    eol.hidden = !cr;
    let why = '';
    if (!canOperate) { why = 'Read-only: you do not have operate on this Agent.'; } else if (!st.running) { why = 'Read-only: the Agent is not running.'; } else if (st.unknown !== null) { why = 'Saving is blocked until you reload: the last save has an unknown outcome.'; } else if (st.late && !st.hash) { why = 'The file does not exist, but an earlier save of unknown outcome may still create it: saving asks first.'; }
    save.title = why;
    hint.textContent = why && st.loaded ? why : defaultHint;
    // Disabling the focused control sends focus to <body>: the editor
    // takes it instead.
    if (controls.includes(focused) && focused.disabled) { ed.focus(); }
  };
  // showConflict puts theirs (the current file) beside yours; the editor
  // keeps your text, and the next save applies against their version.
  // Yours is the editor's text, kept equal to it while shown (the editor
  // stays editable, and the hint invites editing): Keep yours saves
  // exactly what it shows.
  const showConflict = (heading, theirs) => {
    $('#conflict-h').textContent = heading;
    $('#theirs').value = theirs;
    $('#yours').value = lf(ed.value);
    $('#conflict').hidden = false;
  };
  ed.addEventListener('input', () => {
    if (!$('#conflict').hidden) { $('#yours').value = lf(ed.value); }
    refresh();
  });
  // hideConflict hides it; focus inside it (or already lost) goes to the
  // editor.
  const hideConflict = () => {
    const c = $('#conflict');
    if (c.hidden) { return; }
    const ae = document.activeElement;
    const lost = !ae || ae === body || c.contains(ae);
    c.hidden = true;
    if (lost) { ed.focus(); }
  };
  const agent = await api('GET', '/namespaces/' + enc(NS) + '/agents/' + enc(AGENT));
  if (agent.status === 200) {
    const a = agent.data;
    st.running = a.status === 'active' && a.desiredRuntimeState === 'running' && !!a.activeRevisionId;
    $('#back').textContent = a.name;
  }
  const load = async () => {
    st.loading = true;
    refresh();
    status('Loading…');
    const r = await api('GET', path);
    st.loading = false;
    if (r.status === 200 || r.status === 404) {
      const content = r.status === 200 ? r.data.content : '';
      st.loaded = true;
      st.base = content;
      st.hash = r.status === 200 ? r.etag : null;
      ed.disabled = false;
      ed.readOnly = !(st.running && canOperate);
      if (st.unknown !== null) {
        // Settle the unknown outcome, keeping the user's text: it stays in
        // the editor and beside the current file, never resent by itself.
        const sent = st.unknown;
        st.unknown = null;
        const h = await sha256(sent);
        const applied = r.status === 200 && (h === null ? content === sent : h === st.hash);
        // No file: the save was not applied so far, but it may still be
        // (a write in flight when the answer was lost).
        st.late = r.status === 404;
        const mine = lf(ed.value);
        if (st.late) {
          showConflict('Your earlier save has not been applied so far: the file does not exist', content);
          status('The file does not exist: your earlier save has not been applied so far, but it may still be. Your text is kept: saving it creates the file, after you confirm.');
        } else if (mine === lf(content)) {
          ed.value = content;
          hideConflict();
          status(applied ? 'Your earlier save was applied: the file holds what you sent.'
            : 'Your earlier save was not applied, but the file holds the same text now.');
        } else {
          showConflict(applied ? 'Your earlier save was applied; your later edits are not saved'
            : 'Your earlier save was not applied', content);
          status(applied
            ? 'Your earlier save was applied: the file holds what you sent. Your edits since are kept below and in the editor: keep yours to save them, or take theirs.'
            : 'Your earlier save was not applied (or someone changed the file since). The current content is shown beside your text: keep yours to save it against the current version, or take theirs.');
        }
      } else {
        if (r.status === 200) { st.late = false; }
        ed.value = content;
        hideConflict();
        status(r.status === 200 ? 'Loaded.' : (st.late ? 'The file does not exist yet; an earlier save of unknown outcome may still create it, so saving asks first.' : 'The file does not exist yet; saving creates it.'));
      }
    } else {
      alertMsg('The file could not be loaded: ' + errText(r));
    }
    refresh();
  };
  reload.addEventListener('click', async () => {
    if (busy()) { return; }
    // After an unknown outcome the reload keeps your text: nothing to
    // discard, nothing to ask.
    if (st.unknown === null && dirty() && !(await confirmDialog('Discard your unsaved changes and reload?'))) { return; }
    load();
  });
  $('#discard').addEventListener('click', () => { ed.value = st.base; status('Changes discarded.'); refresh(); });
  // conflict shows the file as now read (cur: a GET's answer, 200 or 404)
  // beside the text that was not saved, and makes it the base.
  const conflict = (cur, content, why) => {
    const theirs = cur.status === 200 ? cur.data.content : '';
    st.base = theirs;
    st.hash = cur.status === 200 ? cur.etag : null;
    showConflict('The file changed since you loaded it' + (cur.status === 200 ? '' : ': it no longer exists'), theirs);
    alertMsg(why + ' Compare below, then take theirs, keep yours, or edit and save again.');
  };
  const save1 = async (content) => {
    if (!st.hash) {
      // The file did not exist when read, so there is no hash to send,
      // and the API has no create-only precondition: read it again, and
      // write only if it is still missing. (Someone creating it between
      // this read and the write is still overwritten: docs/console.md.)
      const cur = await api('GET', path);
      if (cur.status === 200) {
        conflict(cur, content, 'Not saved: someone created the file since you loaded it.');
        return;
      }
      if (cur.status !== 404) {
        alertMsg('Not saved: whether someone created the file meanwhile could not be checked (' + errText(cur) + '). Nothing was written.');
        return;
      }
    }
    const r = await api('PUT', path, { content }, st.hash ? { 'If-Match': '"' + st.hash + '"' } : {}, { stay: true });
    if (r.status === 200) {
      st.base = content;
      st.hash = r.etag;
      st.late = false;
      hideConflict();
      status('Saved.');
    } else if (r.status === 412) {
      const cur = await api('GET', path);
      if (cur.status !== 200 && cur.status !== 404) {
        // Their version could not be read: keep the hash we had, so that
        // a save stays a compare-and-swap (and is refused again) rather
        // than a write over a change nobody has seen.
        hideConflict();
        alertMsg('Not saved: someone changed the file since you loaded it, and reading their version failed (' + errText(cur) + '). Reload to compare.');
        return;
      }
      conflict(cur, content, 'Not saved: someone changed the file since you loaded it.');
    } else if (r.status === 401) {
      // Refused at admission: the session ended, nothing was written.
      alertMsg('Not saved: your session has ended, so nothing was written. Sign in again (leaving this page asks first, so that you can copy your text).');
      location.assign('/console/sign-in');
    } else if ([400, 403, 404, 409, 413, 429].includes(r.status) || (r.status === 503 && r.error && r.error.code === 'DEPENDENCY_UNAVAILABLE')) {
      alertMsg('Not saved: ' + errText(r));
    } else {
      // UNKNOWN_OUTCOME, a lost connection or anything unexpected: the write
      // may have been applied. Never retried; reload to find out.
      st.unknown = content;
      hideConflict();
      alertMsg('The outcome of the save is unknown: it may or may not have been applied. Reload to see which; your text is kept.');
    }
  };
  const doSave = async () => {
    if (busy() || st.unknown !== null) { return; }
    const p = contentProblem(lf(ed.value));
    if (p) { alertMsg('Not saved: the content ' + p + '.'); return; }
    st.pending = true;
    refresh();
    try {
      // Creating the file writes without If-Match: nothing would refuse
      // it, and an earlier save of unknown outcome that lands later would
      // silently replace it. Say so, and write only if told to.
      if (st.late && !st.hash && !(await confirmDialog('Create ' + FILE + ' now? Your earlier save had an unknown outcome and may still be applied later: it would then replace what you save now, and nothing would warn you.'))) {
        status('Not saved: nothing was written.');
        return;
      }
      status('Saving…');
      // The text at the moment of sending (it may have been edited while
      // the question was open).
      await save1(lf(ed.value));
    } finally {
      st.pending = false;
      refresh();
    }
  };
  $('#file-form').addEventListener('submit', (ev) => { ev.preventDefault(); if (!save.disabled) { doSave(); } });
  $('#take-theirs').addEventListener('click', () => {
    if (busy()) { return; }
    ed.value = st.base;
    hideConflict();
    status('Took their version.');
    refresh();
  });
  // Keep yours saves the editor's text, which Yours shows: edits made after
  // the conflict appeared are part of it, never replaced by an older copy.
  $('#take-yours').addEventListener('click', () => {
    if (busy() || st.unknown !== null) { return; }
    ed.focus();
    refresh();
    doSave();
  });
  unsaved = dirty;
  load();
};

pages.audit = async () => {
  const stack = [];
  let next = '';
  // shown is the query of the page on screen (without its cursor): First
  // page and Next page keep it; only Apply filters reads the inputs.
  let shown = '';
  const query = () => {
    const q = new URLSearchParams();
    for (const f of ['namespaceId', 'resourceKind', 'resourceId', 'actorId', 'action', 'kind', 'outcome', 'limit']) {
      const v = $('#f-' + f).value.trim();
      if (v) { q.set(f, v); }
    }
    // since and until are typed in local time and sent as RFC 3339 (UTC).
    for (const f of ['since', 'until']) {
      const v = $('#f-' + f).value;
      if (!v) { continue; }
      const d = new Date(v);
      if (isNaN(d.getTime())) { return null; }
      q.set(f, d.toISOString());
    }
    if ($('#f-withoutOutcome').checked) { q.set('withoutOutcome', 'true'); }
    return q.toString();
  };
  // Only the latest load fills the table: Apply filters or First page while
  // another load is out supersedes it, and its reply is dropped when it
  // comes. Next page is off while a load is out: the cursor it holds
  // belongs to the page being replaced, and would be sent with the new
  // filters. Its focus, when it had it, comes back once it is on again.
  let seq = 0;
  const nextBtn = $('#audit-next');
  const load = async (cursor) => {
    const mine = ++seq;
    const hadFocus = document.activeElement === nextBtn;
    next = '';
    nextBtn.disabled = true;
    const q = new URLSearchParams(shown);
    if (cursor) { q.set('cursor', cursor); }
    const r = await api('GET', '/audit-events?' + q.toString());
    if (mine !== seq) { return; }
    const refocus = () => {
      if (hadFocus && (document.activeElement === body || !document.activeElement)) { (nextBtn.disabled ? $('#audit-first') : nextBtn).focus(); }
    };
    if (r.status !== 200) { alertMsg(errText(r)); fillTable('#audit', [], 'Not available.'); refocus(); return; }
    fillTable('#audit', r.data.items.map((e) => [e.occurredAt, e.kind, e.action,
      e.resource.kind + ' ' + (e.resource.id || ''), e.actorId, e.outcome + (e.reasonCode ? ' ' + e.reasonCode : ''),
      e.details ? Object.entries(e.details).map(([k, v]) => k + '=' + v).join(', ') : '']), 'No events match.');
    next = r.data.nextCursor || '';
    nextBtn.disabled = !next;
    refocus();
    status(r.data.items.length + ' events' + (stack.length ? ', page ' + (stack.length + 1) : '') + '.');
  };
  const apply = () => {
    const q = query();
    if (q === null) { alertMsg('Since and until must be dates and times.'); return; }
    shown = q;
    stack.length = 0;
    load('');
  };
  $('#audit-form').addEventListener('submit', (ev) => { ev.preventDefault(); apply(); });
  $('#audit-first').addEventListener('click', () => { stack.length = 0; load(''); });
  $('#audit-next').addEventListener('click', () => { if (next) { stack.push(next); load(next); } });
  apply();
};

pages.iam = async () => {
  if (!CAN.has('administer')) {
    $$('main input, main select, main textarea, main form button').forEach((c) => { c.disabled = true; });
    alertMsg('Read-only: identity and access administration needs installation administer.');
  }
  const opt = (v) => (v ? v : undefined);
  const del = (label, path, reload) => {
    const b = button('Delete', 'Delete ' + label, async () => {
      if (!(await confirmDialog('Delete ' + label + '?'))) { return; }
      const r = await api('DELETE', path);
      if (r.status === 200) { status('Deleted ' + label + '.'); } else { alertMsg(errText(r)); }
      reload();
    }, 'danger');
    if (!CAN.has('administer')) { b.disabled = true; b.title = 'You may not do this.'; }
    return b;
  };
  const scope = (x) => [x.namespaceId ? 'namespace ' + x.namespaceId : 'installation', x.resourceKind ? x.resourceKind + ' ' + (x.resourceId || '') : ''].filter(Boolean).join(', ');
  const sps = async () => {
    const r = await apiAll('/iam/service-principals');
    if (r.status !== 200) { fillTable('#sps', [], errText(r)); return; }
    fillTable('#sps', r.data.items.map((s) => [s.name, s.id, s.namespaceId || '–', s.agentId ? 'Agent-owned' : del('service principal ' + s.name, '/iam/service-principals/' + enc(s.id), sps)]));
  };
  const roles = async () => {
    const r = await apiAll('/iam/roles');
    if (r.status !== 200) { fillTable('#roles', [], errText(r)); return; }
    fillTable('#roles', r.data.items.map((x) => [x.name, x.id, x.permissions.map((p) => p.action + ' ' + p.resourceKind).join(', '),
      x.builtin ? 'built-in' : del('role ' + x.name, '/iam/roles/' + enc(x.id), roles)]));
  };
  const bindings = async () => {
    const r = await apiAll('/iam/access-bindings');
    if (r.status !== 200) { fillTable('#bindings', [], errText(r)); return; }
    fillTable('#bindings', r.data.items.map((b) => [b.subjectId, b.roleId, scope(b), del('binding ' + b.id, '/iam/access-bindings/' + enc(b.id), bindings)]));
  };
  const restrictions = async () => {
    const r = await apiAll('/iam/restrictions');
    if (r.status !== 200) { fillTable('#restrictions', [], errText(r)); return; }
    fillTable('#restrictions', r.data.items.map((x) => [x.subjectId, x.action + ' ' + x.resourceKind, scope(x), del('restriction ' + x.id, '/iam/restrictions/' + enc(x.id), restrictions)]));
  };
  const submit = (sel, fn) => $(sel).addEventListener('submit', async (ev) => { ev.preventDefault(); await fn(); });
  submit('#user-form', async () => {
    const r = await send('POST', '/iam/users', { email: $('#user-email').value, password: $('#user-password').value });
    if (!r) { return; }
    $('#user-password').value = '';
    if (r.status === 201) { status('Created user ' + r.data.email + ' (' + r.data.id + ').'); $('#user-email').value = ''; } else { alertMsg(errText(r)); }
  });
  submit('#sp-form', async () => {
    const r = await send('POST', '/iam/service-principals', { name: $('#sp-name').value, namespaceId: opt($('#sp-ns').value) });
    if (!r) { return; }
    if (r.status === 201) { status('Created service principal ' + r.data.name + ' (' + r.data.id + ').'); } else { alertMsg(errText(r)); }
    sps();
  });
  submit('#key-form', async () => {
    const days = parseInt($('#key-days').value, 10) || 30;
    const r = await send('POST', '/api/auth/service-keys', { servicePrincipalId: $('#key-sp').value, name: $('#key-name').value,
      namespaceId: opt($('#key-ns').value), expiresIn: days * 86400 });
    if (!r) { return; }
    if (r.status !== 201) { alertMsg(errText(r)); return; }
    // Shown once, in this page only; never stored.
    $('#key-value').value = r.data.key;
    $('#key-once').hidden = false;
    $('#key-value').focus();
    $('#key-value').select();
    status('Issued key ' + r.data.id + '. Copy it now: it is shown once.');
  });
  $('#key-copy').addEventListener('click', async () => {
    const v = $('#key-value').value;
    try {
      await navigator.clipboard.writeText(v);
    } catch (e) {
      $('#key-value').select();
      document.execCommand('copy');
    }
    status('Key copied to the clipboard.');
  });
  submit('#revoke-form', async () => {
    const r = await send('DELETE', '/api/auth/service-keys/' + enc($('#revoke-id').value));
    if (!r) { return; }
    if (r.status === 200) { status('Revoked key ' + r.data.id + '.'); } else { alertMsg(errText(r)); }
  });
  submit('#role-form', async () => {
    const perms = $('#role-perms').value.split('\n').map((l) => l.trim()).filter(Boolean).map((l) => {
      const [action, resourceKind] = l.split(/\s+/);
      return { action, resourceKind };
    });
    const r = await send('POST', '/iam/roles', { name: $('#role-name').value, permissions: perms });
    if (!r) { return; }
    if (r.status === 201) { status('Created role ' + r.data.name + ' (' + r.data.id + ').'); } else { alertMsg(errText(r)); }
    roles();
  });
  submit('#binding-form', async () => {
    const r = await send('POST', '/iam/access-bindings', { subjectId: $('#bnd-subject').value, roleId: $('#bnd-role').value,
      namespaceId: opt($('#bnd-ns').value), resourceKind: opt($('#bnd-kind').value), resourceId: opt($('#bnd-res').value) });
    if (!r) { return; }
    if (r.status === 201) { status('Created binding ' + r.data.id + '.'); } else { alertMsg(errText(r)); }
    bindings();
  });
  submit('#restriction-form', async () => {
    const r = await send('POST', '/iam/restrictions', { subjectId: $('#rst-subject').value, action: $('#rst-action').value,
      resourceKind: $('#rst-kind').value, namespaceId: opt($('#rst-ns').value), resourceId: opt($('#rst-res').value) });
    if (!r) { return; }
    if (r.status === 201) { status('Created restriction ' + r.data.id + '.'); } else { alertMsg(errText(r)); }
    restrictions();
  });
  if (CAN.has('administer')) { sps(); roles(); bindings(); restrictions(); } else { sps(); }
};

// ready marks the page's controls as live (their handlers attached).
function ready() { body.dataset.ready = '1'; }

chrome();
applyCan();
// A page's function resolves once its handlers are attached (its polling
// goes on without being awaited).
Promise.resolve(pages[page] ? pages[page]() : undefined).finally(ready);
