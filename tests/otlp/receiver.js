// The test's OTLP receiver, decoding with OpenTelemetry's own schema: the protobufjs
// root generated from opentelemetry-proto that @opentelemetry/otlp-transformer 0.52.x
// ships (build/src/generated/root.js), not ldscope's copy of the messages.
//
//   node receiver.js MODULES serve OUT.jsonl [STATUS] [--fail-first N] [--retry-after V]
//                    [--tls KEY CERT]
//       Listens on 127.0.0.1 (an ephemeral port, printed as the first line of stdout)
//       for POST /PATH/v1/traces and /PATH/v1/logs; appends one JSON line per request
//       ({"path", "contentType", "request"}) to OUT.jsonl; answers STATUS (default 200)
//       with an empty protobuf response. --fail-first: the first N requests are answered
//       503 (with Retry-After: V when given) and not decoded. A gzip body
//       (Content-Encoding: gzip) is decompressed first. Each request's transport goes to
//       OUT.jsonl.meta: {"path", "status", "connection" (numbered in order of
//       acceptance), "ms" (since the server started), "headers"}. --tls: HTTPS with that
//       key and certificate (PEM files). Runs until killed.
//   node receiver.js MODULES read-jsonl TRACES.jsonl LOGS.jsonl
//       Reads the OTLP/JSON Lines files of `ldscope export --otlp DIR` (the file
//       exporter's format: a request per line, in the OTLP JSON encoding) with the same
//       schema: the hex ids to bytes as the OTLP JSON encoding says, every line converted
//       by the schema (fromObject), encoded as protobuf, decoded, and printed
//       as the same JSON lines as `serve` writes. A line that does not read back as it
//       was written (an unknown key, an enum by name, a base64 or uppercase id, a 64-bit
//       integer as a number) fails (status 1), naming the file, line and difference.
// MODULES: the node_modules directory holding @opentelemetry/otlp-transformer.
'use strict';
const fs = require('fs');
const http = require('http');
const https = require('https');
const zlib = require('zlib');
const path = require('path');

const [modulesArg, mode, ...args] = process.argv.slice(2);
const modules = path.resolve(modulesArg || '.');
const rootPath = path.join(modules, '@opentelemetry/otlp-transformer/build/src/generated/root.js');
if (!fs.existsSync(rootPath)) {
  console.error(`receiver.js: ${rootPath} is missing (scripts/setup installs ` +
                `@opentelemetry/otlp-transformer@0.52.1)`);
  process.exit(2);
}
const root = require(rootPath);
const pkg = JSON.parse(fs.readFileSync(path.join(modules, '@opentelemetry/otlp-transformer/package.json')));
const Trace = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;
const Logs = root.opentelemetry.proto.collector.logs.v1.ExportLogsServiceRequest;
const protobuf = require(path.join(modules, 'protobufjs/minimal'));

// Longs as decimal strings, bytes (ids) as lowercase hex, enums as names: the
// JSON is then exact and stable.
function toJson(Type, buf) {
  const msg = Type.decode(buf);
  const obj = Type.toObject(msg, {longs: String, enums: String, bytes: Array, defaults: false});
  return JSON.parse(JSON.stringify(obj, (k, v) =>
    Array.isArray(v) && /Id$/.test(k) ? Buffer.from(v).toString('hex') : v));
}

function line(p, contentType, buf) {
  const Type = /\/v1\/traces$/.test(p) ? Trace : /\/v1\/logs$/.test(p) ? Logs : null;
  if (Type === null) return JSON.stringify({path: p, error: 'unknown path'});
  return JSON.stringify({path: p, contentType, schema: `@opentelemetry/otlp-transformer@${pkg.version}`,
                         request: toJson(Type, buf)});
}

// JSON with its object keys sorted, for comparing two values.
function canonical(v) {
  if (Array.isArray(v)) return v.map(canonical);
  if (v !== null && typeof v === 'object')
    return Object.fromEntries(Object.keys(v).sort().map((k) => [k, canonical(v[k])]));
  return v;
}

// One line of an OTLP/JSON Lines file: the protobuf encoding of its request, or what is
// wrong with it. Ids (keys in sizes) are hex of their size in bytes; the OTLP JSON
// encoding's other rules are protobuf's JSON mapping, which fromObject reads, with enums
// as integers: the request, converted back with those rules, must equal the line.
function readLine(Type, jsonText, sizes) {
  let obj;
  try { obj = JSON.parse(jsonText); } catch (e) { return `not JSON: ${e.message}`; }
  const badIds = [];
  const withBytes = JSON.parse(jsonText, function (k, v) {
    if (!(k in sizes) || Array.isArray(this)) return v;
    if (typeof v !== 'string' || !new RegExp(`^[0-9a-f]{${2 * sizes[k]}}$`).test(v)) badIds.push(`${k} ${JSON.stringify(v)}`);
    return Buffer.from(v, 'hex');
  });
  if (badIds.length) return `ids not lowercase hex of their size: ${badIds.slice(0, 3).join(', ')}`;
  // (verify() would refuse 64-bit integers as strings, which the JSON mapping requires:
  // fromObject reads them, and the comparison below catches whatever it did not read.)
  let msg;
  try { msg = Type.fromObject(withBytes); } catch (e) { return `the schema rejects it: ${e.message}`; }
  const wire = Type.encode(msg).finish();
  const back = Type.toObject(Type.decode(wire), {longs: String, bytes: Array, defaults: false});
  const backJson = JSON.parse(JSON.stringify(back, (k, v) =>
    Array.isArray(v) && k in sizes ? Buffer.from(v).toString('hex') : v));
  const a = JSON.stringify(canonical(obj)), b = JSON.stringify(canonical(backJson));
  if (a !== b) {
    let at = 0;
    while (at < a.length && a[at] === b[at]) ++at;
    return `does not read back as written: ...${a.slice(Math.max(0, at - 60), at + 60)}... ` +
           `read back as ...${b.slice(Math.max(0, at - 60), at + 60)}...`;
  }
  return Buffer.from(wire);
}

if (mode === 'serve') {
  const [out, ...rest] = args;
  const opt = {status: 200, failFirst: 0, retryAfter: null, tls: null};
  for (let i = 0; i < rest.length; ++i) {
    if (rest[i] === '--fail-first') opt.failFirst = Number(rest[++i]);
    else if (rest[i] === '--retry-after') opt.retryAfter = rest[++i];
    else if (rest[i] === '--tls') opt.tls = {key: fs.readFileSync(rest[++i]), cert: fs.readFileSync(rest[++i])};
    else opt.status = Number(rest[i]);
  }
  const started = Date.now();
  let connections = 0, requests = 0;
  const handler = (req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const failing = requests++ < opt.failFirst;
      const status = failing ? 503 : opt.status;
      fs.appendFileSync(out + '.meta', JSON.stringify({path: req.url, status, connection: req.socket.ldscopeId,
                                                       ms: Date.now() - started, headers: req.headers}) + '\n');
      if (!failing) {
        let text;
        try {
          let body = Buffer.concat(chunks);
          if (req.headers['content-encoding'] === 'gzip') body = zlib.gunzipSync(body);
          text = line(req.url, req.headers['content-type'], body);
        } catch (e) {
          text = JSON.stringify({path: req.url, error: String(e)});
        }
        fs.appendFileSync(out, text + '\n');
      }
      const headers = {'Content-Type': 'application/x-protobuf'};
      if (failing && opt.retryAfter !== null) headers['Retry-After'] = opt.retryAfter;
      res.writeHead(status, headers);
      res.end();
    });
  };
  const server = opt.tls ? https.createServer(opt.tls, handler) : http.createServer(handler);
  server.on(opt.tls ? 'secureConnection' : 'connection', (socket) => { socket.ldscopeId = ++connections; });
  if (opt.tls) server.on('tlsClientError', (e) => fs.appendFileSync(out + '.meta', JSON.stringify({tlsError: e.code || String(e)}) + '\n'));
  server.listen(0, '127.0.0.1', () => {
    process.stdout.write(`${server.address().port}\n`);
  });
} else if (mode === 'read-jsonl') {
  const [tracesFile, logsFile] = args;
  let ok = true;
  for (const [file, p, Type, sizes] of [[tracesFile, '/v1/traces', Trace, {traceId: 16, spanId: 8, parentSpanId: 8}],
                                        [logsFile, '/v1/logs', Logs, {traceId: 16, spanId: 8}]]) {
    const text = fs.readFileSync(file, 'utf8');
    if (text !== '' && !text.endsWith('\n')) { console.error(`${file}: the last line has no \\n`); ok = false; }
    text.split('\n').forEach((jsonText, i) => {
      if (jsonText === '' && i === text.split('\n').length - 1) return;
      const problem = readLine(Type, jsonText, sizes);
      if (typeof problem === 'string') { console.error(`${file}:${i + 1}: ${problem}`); ok = false; return; }
      process.stdout.write(line(p, 'file', problem) + '\n');
    });
  }
  process.exit(ok ? 0 : 1);
} else {
  console.error('usage: receiver.js MODULES serve OUT.jsonl [STATUS] [--fail-first N] [--retry-after V] ' +
                '[--tls KEY CERT] | read-jsonl TRACES LOGS');
  process.exit(2);
}
