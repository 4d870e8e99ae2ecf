// Checks and normalises what receiver.js decoded, for golden files.
//
//   node normalise.js [--keep NAME=PATH]... FILE.jsonl...
//
// Checks, failing (status 1) with a message: every request decoded; ids are well formed
// (16-byte trace ids, 8-byte span ids, never zero, span ids unique); every parent span
// id and every log record's span id names a span that was sent; a span starts before it
// ends and its events lie inside it; all spans and records share one trace id.
// Then prints one JSON document: the resources of all trace requests in process start
// order, then those of all log requests, with what differs between machines and runs
// taken out: ids numbered in order of appearance, times "T", pids, thread ids, sequence
// numbers and event counts "N", the host "HOST", build-ids, "+12.3 ms" in messages,
// each --keep PATH as ${NAME}, the Python version as X, its standard library directory
// as ${PYTHONLIB}. Span events (loads: their object), dlopen and import spans are kept
// only when they name a --keep path (or, for imports, a relative *.py source file): the
// system's own libraries and the standard library's imports differ between machines.
'use strict';
const fs = require('fs');

const keep = [];
const files = [];
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; ++i) {
  if (argv[i] === '--keep') {
    const [name, p] = argv[++i].split(/=(.*)/s);
    keep.push({name, path: p});
  } else {
    files.push(argv[i]);
  }
}
keep.sort((a, b) => b.path.length - a.path.length);  // the longest path first

const errors = [];
const resourceSpans = [], resourceLogs = [];
for (const f of files) {
  for (const text of fs.readFileSync(f, 'utf8').split('\n')) {
    if (text === '') continue;
    const line = JSON.parse(text);
    if (line.error) { errors.push(`${line.path}: ${line.error}`); continue; }
    if (/\/v1\/traces$/.test(line.path)) resourceSpans.push(...(line.request.resourceSpans || []));
    else resourceLogs.push(...(line.request.resourceLogs || []));
  }
}

const attr = (list, key) => ((list || []).find((a) => a.key === key) || {}).value;
const spans = new Map();
const traceIds = new Set();
for (const rs of resourceSpans)
  for (const ss of rs.scopeSpans || [])
    for (const s of ss.spans || []) {
      if (!/^[0-9a-f]{32}$/.test(s.traceId) || /^0+$/.test(s.traceId)) errors.push(`bad trace id ${s.traceId}`);
      if (!/^[0-9a-f]{16}$/.test(s.spanId) || /^0+$/.test(s.spanId)) errors.push(`bad span id ${s.spanId}`);
      if (spans.has(s.spanId)) errors.push(`span id ${s.spanId} sent twice`);
      spans.set(s.spanId, s);
      traceIds.add(s.traceId);
      const start = BigInt(s.startTimeUnixNano), end = BigInt(s.endTimeUnixNano);
      if (start > end) errors.push(`span ${s.name} ends before it starts`);
      for (const e of s.events || []) {
        const t = BigInt(e.timeUnixNano);
        if (t < start || t > end) errors.push(`event ${e.name} of ${s.name} outside its span`);
      }
    }
for (const s of spans.values())
  if (s.parentSpanId && !spans.has(s.parentSpanId)) errors.push(`span ${s.name}: parent ${s.parentSpanId} never sent`);
for (const rl of resourceLogs)
  for (const sl of rl.scopeLogs || [])
    for (const r of sl.logRecords || []) {
      if (!spans.has(r.spanId)) errors.push(`log record ${r.body && r.body.stringValue}: span ${r.spanId} never sent`);
      traceIds.add(r.traceId);
    }
if (traceIds.size > 1) errors.push(`${traceIds.size} trace ids`);
if (errors.length) {
  console.error(errors.join('\n'));
  process.exit(1);
}

const firstStart = (rs) => BigInt(rs.scopeSpans[0].spans[0].startTimeUnixNano);
resourceSpans.sort((a, b) => (firstStart(a) < firstStart(b) ? -1 : firstStart(a) > firstStart(b) ? 1 : 0));
const firstTime = (rl) => BigInt(rl.scopeLogs[0].logRecords[0].timeUnixNano);
resourceLogs.sort((a, b) => (firstTime(a) < firstTime(b) ? -1 : firstTime(a) > firstTime(b) ? 1 : 0));

function replacePaths(s) {
  for (const k of keep) s = s.split(k.path).join('${' + k.name + '}');
  return s.replace(/(\/[\w.+-]+)*\/lib\/python3\.[0-9]+\//g, '${PYTHONLIB}/')
      .replace(/python3\.[0-9]+/g, 'python3.X').replace(/cpython-3[0-9]+/g, 'cpython-3X')
      .replace(/\+[0-9]+\.[0-9] ms/g, '+T ms');
}
const mentionsKept = (v) => JSON.stringify(v).split('"').some((s) => keep.some((k) => s.startsWith(k.path)));

// Filtering, on the raw values (before paths are replaced).
for (const rs of resourceSpans)
  for (const ss of rs.scopeSpans) {
    const processSpan = ss.spans[0];
    ss.spans = ss.spans.filter((s) => {
      if (s === processSpan) return true;
      if (/^import /.test(s.name)) {
        const file = attr(s.attributes, 'code.file.path');
        return file !== undefined && (/^[\w.-][\w./-]*\.py$/.test(file.stringValue) || mentionsKept(file));
      }
      return mentionsKept(s.name) || mentionsKept(s.attributes);
    });
    for (const s of ss.spans)
      if (s.events)
        s.events = s.events.filter((e) => {
          if (e.name === 'dlopen failed') return true;
          const object = attr(e.attributes, 'ldscope.object.path');  // loads, unloads: the object
          return object !== undefined ? mentionsKept(object) : mentionsKept(e.attributes);
        });
  }

const ids = new Map();
const counters = {trace: 0, span: 0};
const idOf = (kind, hex) => {
  if (!ids.has(hex)) ids.set(hex, `${kind}-${++counters[kind]}`);
  return ids.get(hex);
};
const numbered = new Set(['process.pid', 'process.parent_pid', 'thread.id', 'ldscope.seq',
                          'ldscope.process.events', 'ldscope.process.stream']);
const machine = new Set(['ldscope.process.glibc_version', 'ldscope.python.version']);
function walk(v, key) {
  if (Array.isArray(v)) return v.map((x) => walk(x, key));
  if (v !== null && typeof v === 'object') {
    if (typeof v.key === 'string' && v.value) {
      if (v.key === 'host.name') return {key: v.key, value: {stringValue: 'HOST'}};
      if (numbered.has(v.key)) return {key: v.key, value: {intValue: 'N'}};
      if (machine.has(v.key)) return {key: v.key, value: {stringValue: 'X'}};
      if (v.key === 'ldscope.object.build_id') return {key: v.key, value: {stringValue: 'BUILD-ID'}};
    }
    const out = {};
    for (const [k, x] of Object.entries(v)) out[k] = walk(x, k);
    return out;
  }
  if (typeof v === 'string') {
    if (key === 'traceId') return idOf('trace', v);
    if (key === 'spanId' || key === 'parentSpanId') return idOf('span', v);
    if (/UnixNano$/.test(key)) return 'T';
    return replacePaths(v);
  }
  return v;
}
process.stdout.write(JSON.stringify(walk({resourceSpans, resourceLogs}), null, 1) + '\n');
