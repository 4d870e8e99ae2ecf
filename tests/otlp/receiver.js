// The test's OTLP receiver, decoding with OpenTelemetry's own schema: the protobufjs
// root generated from opentelemetry-proto that @opentelemetry/otlp-transformer 0.52.x
// ships (build/src/generated/root.js), not ldscope's copy of the messages.
//
//   node receiver.js MODULES serve OUT.jsonl [STATUS]
//       Listens on 127.0.0.1 (an ephemeral port, printed as the first line of stdout)
//       for POST /PATH/v1/traces and /PATH/v1/logs; appends one JSON line per request
//       ({"path", "contentType", "request"}) to OUT.jsonl; answers STATUS (default 200)
//       with an empty protobuf response. Runs until killed.
//   node receiver.js MODULES decode-file FILE
//       Decodes `ldscope export --otlp FILE` (a varint-delimited ExportTraceServiceRequest
//       then ExportLogsServiceRequest) and prints the same JSON lines.
// MODULES: the node_modules directory holding @opentelemetry/otlp-transformer.
'use strict';
const fs = require('fs');
const http = require('http');
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

if (mode === 'serve') {
  const [out, status] = args;
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      let text;
      try {
        text = line(req.url, req.headers['content-type'], Buffer.concat(chunks));
      } catch (e) {
        text = JSON.stringify({path: req.url, error: String(e)});
      }
      fs.appendFileSync(out, text + '\n');
      res.writeHead(Number(status || 200), {'Content-Type': 'application/x-protobuf'});
      res.end();
    });
  });
  server.listen(0, '127.0.0.1', () => {
    process.stdout.write(`${server.address().port}\n`);
  });
} else if (mode === 'decode-file') {
  const buf = fs.readFileSync(args[0]);
  const reader = protobuf.Reader.create(buf);
  const len1 = reader.uint32();
  const traces = buf.subarray(reader.pos, reader.pos + len1);
  reader.skip(len1);
  const len2 = reader.uint32();
  const logs = buf.subarray(reader.pos, reader.pos + len2);
  reader.skip(len2);
  if (reader.pos !== buf.length) {
    console.error(`receiver.js: ${buf.length - reader.pos} bytes after the two requests`);
    process.exit(1);
  }
  process.stdout.write(line('/v1/traces', 'file', traces) + '\n');
  process.stdout.write(line('/v1/logs', 'file', logs) + '\n');
} else {
  console.error('usage: receiver.js MODULES serve OUT.jsonl [STATUS] | decode-file FILE');
  process.exit(2);
}
