// The costgate admin console: plain DOM, no framework, nothing from the
// network but this origin's admin API. Every value from the API is put in
// the page as text (textContent), never as HTML: usernames and keys in
// top are whatever clients sent.
'use strict';

const TOKEN = 'costgate-admin-token';
const REFRESH_MS = 3000;
const PARTS = ['tenant', 'api_key', 'ip', 'username'];
let timer = null;

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('data-')) e.setAttribute(k, v);
    else if (k === 'onclick') e.addEventListener('click', v);
    else e[k] = v;
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(c == null ? '' : String(c)));
  return e;
}

function status(text, kind) {
  const s = $('status');
  s.textContent = text;
  s.className = kind || '';
}

async function api(method, path, body) {
  const opts = { method, headers: { Authorization: 'Bearer ' + sessionStorage.getItem(TOKEN) } };
  if (body !== undefined) {
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  const res = await fetch(path, opts);
  let data = null;
  try { data = await res.json(); } catch (e) { data = null; }
  if (res.status === 401) {
    signOut();
    throw new Error((data && data.message) || 'unauthorized');
  }
  if (!res.ok) throw new Error((data && data.message) || ('HTTP ' + res.status));
  return data;
}

function identity() {
  const id = {};
  const policy = $('f-policy').value;
  if (policy) id.policy = policy;
  for (const p of PARTS) {
    const v = $('f-' + p).value.trim();
    if (v) id[p] = v;
  }
  return id;
}

function setIdentity(policy, entry) {
  $('f-policy').value = policy;
  // The tenant goes alone only for an entry of a policy keyed by tenant:
  // beside a key it is the key's, and an anonymous caller has none.
  for (const p of PARTS) $('f-' + p).value = p === 'tenant' ? '' : (entry[p] || '');
  if (!entry.api_key && !entry.ip && !entry.username) $('f-tenant').value = entry.tenant || '';
}

function table(head, rows, empty) {
  if (rows.length === 0) return el('p', { class: 'empty' }, empty);
  return el('table', {}, el('thead', {}, el('tr', {}, ...head.map((h) => el('th', {}, h)))), el('tbody', {}, ...rows));
}

function renderTop(data) {
  const box = $('top');
  box.replaceChildren();
  const select = $('f-policy');
  const chosen = select.value;
  select.replaceChildren(el('option', { value: '' }, 'every policy'));
  for (const p of data.policies) {
    select.append(el('option', { value: p.policy }, p.policy));
    const rows = p.entries.map((e) => el('tr', { class: 'top-row', 'data-policy': p.policy },
      el('td', { class: 'num' }, e.denied), el('td', {}, e.tenant), el('td', {}, e.api_key || ''),
      el('td', {}, e.ip || ''), el('td', {}, e.username || ''),
      el('td', {},
        el('button', { type: 'button', class: 'act-state', onclick: () => { setIdentity(p.policy, e); lookUp(false); } }, 'State'), ' ',
        el('button', { type: 'button', class: 'act-reset', onclick: () => { setIdentity(p.policy, e); reset(); } }, 'Reset'))));
    box.append(el('h3', {}, p.policy), table(['denied', 'tenant', 'api key', 'ip', 'username', ''], rows, 'nothing denied'));
  }
  select.value = chosen;
  $('refreshed').textContent = 'refreshed ' + new Date().toLocaleTimeString();
}

function renderOverrides(data) {
  const rows = data.overrides.map((o) => el('tr', { class: 'override-row', 'data-name': o.name },
    el('td', {}, o.name), el('td', {}, o.policy || 'every policy'),
    el('td', {}, Object.entries(o.target).map(([k, v]) => k + '=' + v).join(' ')),
    el('td', {}, o.action + (o.multiplier ? ' ×' + o.multiplier : o.limit ? ' ' + o.limit + (o.burst ? '/' + o.burst : '') : '')),
    el('td', {}, new Date(o.expires).toLocaleString()), el('td', {}, o.by || ''),
    el('td', {}, el('button', { type: 'button', class: 'act-delete', onclick: () => unoverride(o.name) }, 'Delete'))));
  $('overrides').replaceChildren(table(['name', 'policy', 'target', 'action', 'expires', 'by', ''], rows, 'no override in effect'));
}

function renderState(data) {
  const rows = data.policies.map((p) => el('tr', { class: 'state-row', 'data-policy': p.policy },
    el('td', {}, p.policy), el('td', {}, p.algorithm), el('td', { class: 'num' }, p.limit), el('td', { class: 'num' }, p.burst),
    el('td', { class: 'num remaining' }, p.error ? '?' : p.remaining), el('td', { class: 'num' }, p.reset_after_sec + ' s'),
    el('td', { class: p.denying ? 'denying' : 'admitting' }, p.denying ? 'denying' : 'admitting'),
    el('td', {}, p.overrides.map((o) => o.name + (o.applies ? ' (applies)' : '')).join(', ')),
    el('td', {}, p.deny_cache ? 'until ' + new Date(p.deny_cache.until).toLocaleTimeString() : ''),
    el('td', {}, p.lease ? p.lease.used + ' of ' + p.lease.lease : ''),
    el('td', {}, p.error || '')));
  $('state').replaceChildren(el('p', {}, 'tenant ' + data.identity.tenant + ', plan ' + data.identity.plan),
    table(['policy', 'algorithm', 'limit', 'burst', 'remaining', 'full in', 'now', 'overrides', 'deny cache', 'lease', ''], rows, 'no policy'));
}

async function refresh() {
  try {
    const [top, overrides] = await Promise.all([api('GET', '/v1/admin/top'), api('GET', '/v1/admin/overrides')]);
    renderTop(top);
    renderOverrides(overrides);
  } catch (e) {
    status(e.message, 'error');
  }
}

function query(id) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(id)) q.set(k, v);
  return q.toString();
}

// lookUp shows the identity's state; keep leaves the status line as it is
// (after a reset, which it reports).
async function lookUp(keep) {
  try {
    renderState(await api('GET', '/v1/admin/state?' + query(identity())));
    if (keep !== true) status('', '');
  } catch (e) {
    status(e.message, 'error');
  }
}

async function reset() {
  try {
    const r = await api('POST', '/v1/admin/reset', identity());
    status('reset ' + r.reset.join(', ') + ' on ' + r.scope, 'ok');
    await lookUp(true);
    await refresh();
  } catch (e) {
    status(e.message, 'error');
  }
}

async function override(ev) {
  ev.preventDefault();
  const body = identity();
  body.action = $('o-action').value;
  body.expires = $('o-expires').value.trim();
  for (const k of ['limit', 'burst']) {
    const v = $('o-' + k).value.trim();
    if (v) body[k] = Number.parseInt(v, 10);
  }
  const m = $('o-multiplier').value.trim();
  if (m) body.multiplier = Number.parseFloat(m);
  try {
    const r = await api('PUT', '/v1/admin/overrides/' + encodeURIComponent($('o-name').value.trim()), body);
    status('override ' + r.override.name + ' in effect until ' + new Date(r.override.expires).toLocaleString(), 'ok');
    await refresh();
  } catch (e) {
    status(e.message, 'error');
  }
}

async function unoverride(name) {
  try {
    await api('DELETE', '/v1/admin/overrides/' + encodeURIComponent(name));
    status('override ' + name + ' deleted', 'ok');
    await refresh();
  } catch (e) {
    status(e.message, 'error');
  }
}

function signedIn() {
  $('login').hidden = true;
  $('app').hidden = false;
  $('signout').hidden = false;
  refresh();
  if (timer === null) timer = setInterval(refresh, REFRESH_MS);
}

function signOut() {
  sessionStorage.removeItem(TOKEN);
  if (timer !== null) clearInterval(timer);
  timer = null;
  $('login').hidden = false;
  $('app').hidden = true;
  $('signout').hidden = true;
}

async function signIn(ev) {
  ev.preventDefault();
  sessionStorage.setItem(TOKEN, $('token').value.trim());
  $('token').value = '';
  try {
    await api('GET', '/v1/admin/overrides');
    status('signed in', 'ok');
    signedIn();
  } catch (e) {
    status(e.message, 'error');
  }
}

document.addEventListener('DOMContentLoaded', () => {
  $('login-form').addEventListener('submit', signIn);
  $('signout').addEventListener('click', () => { signOut(); status('signed out', ''); });
  $('identity-form').addEventListener('submit', (ev) => { ev.preventDefault(); lookUp(false); });
  $('reset-btn').addEventListener('click', reset);
  $('override-form').addEventListener('submit', override);
  if (sessionStorage.getItem(TOKEN)) signedIn();
});
