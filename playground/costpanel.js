// costgate's cost panel, a GraphiQL plugin (docs/graphql.md, "Dry runs and debugging").
// Before a run it prices the document in the editor with a dry run
// (Costgate-Dry-Run: 1 charges nothing and executes nothing) and shows the
// per-field breakdown (Costgate-Cost-Debug: 1), costliest paths first; after
// each run it shows the requested and actual cost and the budget left, read
// from the response's extensions.cost by the wrapped fetcher.
// Plain JS with React.createElement: the page has no bundler.
function costgateCostPanel(GraphiQL, React, url, fetcherHeaders) {
  const h = React.createElement;
  const debounceMs = 400;

  // The last run's outcome, written by the fetcher wrapper, read by the panel
  // (which may be closed, or not yet mounted, when a run ends).
  const lastRun = { value: null, listeners: new Set() };
  function recordRun(response) {
    const cost = response && response.extensions && response.extensions.cost;
    if (!cost) return;
    const errors = response.errors || [];
    const code = errors.length && errors[0].extensions ? errors[0].extensions.code : '';
    lastRun.value = { cost: cost, code: code || '', message: errors.length ? errors[0].message : '' };
    lastRun.listeners.forEach(function (f) { f(lastRun.value); });
  }

  // recordChunks passes a stream of results (createFetcher answers even a
  // plain query as one, for @defer) through, recording each.
  async function* recordChunks(stream) {
    for await (const chunk of stream) {
      recordRun(chunk);
      yield chunk;
    }
  }

  function recordResult(res) {
    if (res && typeof res[Symbol.asyncIterator] === 'function') return recordChunks(res);
    recordRun(res);
    return res;
  }

  // wrapFetcher captures extensions.cost of every response to a run;
  // GraphiQL's own schema introspection is left out.
  function wrapFetcher(fetcher) {
    return function (params, opts) {
      const out = fetcher(params, opts);
      if (params && params.operationName === 'IntrospectionQuery') return out;
      if (out && typeof out.then === 'function') return out.then(recordResult);
      return out; // an observable (a subscription): passed through as is
    };
  }

  function parseJSON(text, what) {
    if (!text || !text.trim()) return { value: null };
    try {
      const v = JSON.parse(text);
      if (v !== null && typeof v === 'object' && !Array.isArray(v)) return { value: v };
    } catch (e) { /* reported below */ }
    return { error: what + ' are not a JSON object' };
  }

  // dryRun prices what the editors hold, with the headers a run would send.
  async function dryRun(queryEditor, variableEditor, headerEditor, signal) {
    const query = queryEditor.getValue();
    if (!/[{]/.test(query.replace(/#.*$/gm, ''))) return { state: 'empty' };
    const vars = parseJSON(variableEditor && variableEditor.getValue(), 'Variables');
    if (vars.error) return { state: 'error', message: vars.error };
    const hdrs = parseJSON(headerEditor && headerEditor.getValue(), 'Headers');
    if (hdrs.error) return { state: 'error', message: hdrs.error };
    const body = { query: query };
    if (vars.value) body.variables = vars.value;
    if (queryEditor.operationName) body.operationName = queryEditor.operationName;
    const headers = Object.assign({ 'content-type': 'application/json' }, fetcherHeaders, hdrs.value,
      { 'Costgate-Dry-Run': '1', 'Costgate-Cost-Debug': '1' });
    const res = await fetch(url, { method: 'POST', headers: headers, body: JSON.stringify(body), signal: signal });
    const json = await res.json();
    const errors = json.errors || [];
    const cost = json.extensions && json.extensions.cost;
    if (!cost) return { state: 'error', message: errors.length ? errors[0].message : 'the answer has no extensions.cost (HTTP ' + res.status + ')' };
    return {
      state: 'priced', cost: cost,
      code: errors.length && errors[0].extensions ? errors[0].extensions.code || '' : '',
      message: errors.length ? errors[0].message : '',
    };
  }

  // useDryRun prices the document again each time an editor changes, once
  // the typing has paused; an answer to an older document is dropped.
  function useDryRun() {
    const ctx = GraphiQL.React.useEditorContext({ nonNull: true });
    const q = ctx.queryEditor, v = ctx.variableEditor, hd = ctx.headerEditor;
    const [estimate, setEstimate] = React.useState({ state: 'waiting' });
    React.useEffect(function () {
      if (!q) return undefined;
      let timer = null, seq = 0, aborter = null;
      function price() {
        const mine = ++seq;
        if (aborter) aborter.abort();
        aborter = new AbortController();
        dryRun(q, v, hd, aborter.signal).then(
          function (r) { if (mine === seq) setEstimate(r); },
          function (e) { if (mine === seq && e.name !== 'AbortError') setEstimate({ state: 'error', message: String(e.message || e) }); });
      }
      function schedule() { clearTimeout(timer); timer = setTimeout(price, debounceMs); }
      const editors = [q, v, hd].filter(Boolean);
      editors.forEach(function (e) { e.on('change', schedule); });
      price();
      return function () {
        clearTimeout(timer);
        if (aborter) aborter.abort();
        editors.forEach(function (e) { e.off('change', schedule); });
      };
    }, [q, v, hd]);
    return estimate;
  }

  function useLastRun() {
    const [run, setRun] = React.useState(lastRun.value);
    React.useEffect(function () {
      lastRun.listeners.add(setRun);
      return function () { lastRun.listeners.delete(setRun); };
    }, []);
    return run;
  }

  const muted = { color: 'hsla(var(--color-neutral), var(--alpha-secondary))' };
  const cell = { padding: '2px 0 2px 12px', textAlign: 'right', fontVariantNumeric: 'tabular-nums' };

  function number(n) { return typeof n === 'number' ? n.toLocaleString('en-US') : '–'; }

  function budget(cost, name) {
    const t = cost && cost.throttleStatus;
    if (!t) return null;
    return h('div', { 'data-costgate': name },
      h('span', { 'data-costgate': name + '-available' }, number(t.currentlyAvailable)), ' of ',
      h('span', { 'data-costgate': name + '-maximum' }, number(t.maximumAvailable)),
      h('span', { style: muted }, ' available' + (t.restoreRate > 0 ? ', restoring ' + t.restoreRate + '/s' : '')));
  }

  function problem(r) {
    if (!r.message) return null;
    return h('div', { 'data-costgate': 'problem', style: { color: 'hsl(var(--color-error))', margin: '4px 0' } },
      (r.code ? r.code + ': ' : '') + r.message);
  }

  // breakdown lists the fields, costliest first (ties by path, so that a
  // parent comes before its children).
  function breakdown(fields) {
    if (!fields || !fields.length) return null;
    const rows = fields.slice().sort(function (a, b) {
      return b.requestedTotal - a.requestedTotal || (a.path < b.path ? -1 : a.path > b.path ? 1 : 0);
    });
    return h('table', { 'data-costgate': 'breakdown', style: { borderCollapse: 'collapse', width: '100%', marginTop: '8px' } },
      h('thead', null, h('tr', { style: muted },
        h('th', { style: { textAlign: 'left', fontWeight: 'normal' } }, 'Path'),
        h('th', { style: Object.assign({}, cell, { fontWeight: 'normal' }), title: 'the weight the schema gives the field' }, 'Weight'),
        h('th', { style: Object.assign({}, cell, { fontWeight: 'normal' }), title: 'what the field adds to the cost, lists multiplied in' }, 'Total'))),
      h('tbody', null, rows.map(function (f) {
        return h('tr', { key: f.path, 'data-path': f.path },
          h('td', { style: { padding: '2px 0', fontFamily: 'var(--font-family-mono)', wordBreak: 'break-all' } }, f.path),
          h('td', { style: cell }, number(f.definedWeight)),
          h('td', { style: cell }, number(f.requestedTotal)));
      })));
  }

  function estimateSection(r) {
    let body;
    switch (r.state) {
      case 'waiting': body = h('div', { style: muted }, 'Pricing…'); break;
      case 'empty': body = h('div', { style: muted }, 'No operation to price.'); break;
      case 'error': body = h('div', { 'data-costgate': 'problem' }, r.message); break;
      default:
        body = h(React.Fragment, null,
          h('div', { style: { fontSize: '1.6em' } },
            h('span', { 'data-costgate': 'estimate' }, number(r.cost.requestedQueryCost || 0)),
            h('span', { style: Object.assign({ fontSize: '0.6em' }, muted) }, ' points if run now')),
          problem(r), budget(r.cost, 'estimate-budget'), breakdown(r.cost.fields));
    }
    return h('section', { 'data-costgate': 'estimate-section' },
      h('h3', null, 'Before you run'),
      h('div', { style: Object.assign({ marginBottom: '4px' }, muted) }, 'A dry run as you type: nothing runs, nothing is charged.'),
      body);
  }

  function runSection(run) {
    if (!run) {
      return h('section', { 'data-costgate': 'run-section' }, h('h3', null, 'Last run'),
        h('div', { style: muted }, 'Run the operation to see what it cost.'));
    }
    const c = run.cost;
    return h('section', { 'data-costgate': 'run-section' },
      h('h3', null, 'Last run'),
      h('table', { style: { borderCollapse: 'collapse' } }, h('tbody', null,
        h('tr', null, h('td', { style: muted }, 'Requested'), h('td', { style: cell, 'data-costgate': 'run-requested' }, number(c.requestedQueryCost))),
        h('tr', null, h('td', { style: muted }, 'Actual'), h('td', { style: cell, 'data-costgate': 'run-actual' },
          c.actualQueryCost == null ? 'not run' : number(c.actualQueryCost))))),
      problem(run),
      h('div', { style: Object.assign({ marginTop: '4px' }, muted) }, 'Budget left'),
      budget(c, 'run-budget'));
  }

  function CostPanel() {
    const estimate = useDryRun();
    const run = useLastRun();
    return h('div', { className: 'costgate-cost-panel', 'data-costgate': 'panel', style: { display: 'flex', flexDirection: 'column', gap: '16px' } },
      h('div', { className: 'graphiql-doc-explorer-title' }, 'Cost'),
      estimateSection(estimate), runSection(run));
  }

  function CostIcon() {
    return h('svg', { width: '1em', height: '1em', viewBox: '0 0 24 24', fill: 'none', stroke: 'currentColor', strokeWidth: 1.5, 'aria-hidden': 'true' },
      h('path', { d: 'M4 17a8 8 0 1 1 16 0' }),
      h('path', { d: 'M12 17l4-6' }),
      h('circle', { cx: 12, cy: 17, r: 1.2 }));
  }

  return { plugin: { title: 'Cost', icon: CostIcon, content: CostPanel }, wrapFetcher: wrapFetcher };
}
