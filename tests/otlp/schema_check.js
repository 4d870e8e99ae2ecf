// Checks ldscope's declarations of the OTLP messages (proto/opentelemetry/...) against
// OpenTelemetry's own generated schema (root.js of @opentelemetry/otlp-transformer):
// every message ldscope declares exists there under the same full name, and every field
// of it, set alone to a sample value and encoded with ldscope's declaration, decodes
// with OpenTelemetry's to the same field name and value (same number, same wire type).
// Enum values are compared by name and number. opentelemetry-proto 1.1.0 added
// Span.flags and Span.Link.flags after the version that package was generated from
// (ldscope declares them, never sets them): that they decode to nothing is expected.
//
//   node schema_check.js MODULES PROTO_DIR
'use strict';
const path = require('path');
const fs = require('fs');

const modules = path.resolve(process.argv[2]);
const protoDir = path.resolve(process.argv[3]);
const protobuf = require(path.join(modules, 'protobufjs'));
const theirs = require(path.join(modules, '@opentelemetry/otlp-transformer/build/src/generated/root.js'));

const files = [];
(function walk(d) {
  for (const e of fs.readdirSync(d, {withFileTypes: true})) {
    const p = path.join(d, e.name);
    if (e.isDirectory()) walk(p);
    else if (e.name.endsWith('.proto')) files.push(p);
  }
})(path.join(protoDir, 'opentelemetry'));
const ours = new protobuf.Root();
ours.resolvePath = (origin, target) => (path.isAbsolute(target) ? target : path.join(protoDir, target));
ours.loadSync(files, {keepCase: false});
ours.resolveAll();

const newer = new Set(['.opentelemetry.proto.trace.v1.Span.flags',
                       '.opentelemetry.proto.trace.v1.Span.Link.flags']);
const errors = [];
let fields = 0, messages = 0, enums = 0;
function lookupTheirs(fullName) {
  let node = theirs;
  for (const part of fullName.replace(/^\./, '').split('.')) {
    node = node && node[part];
  }
  return node;
}
function sample(f) {
  if (f.resolvedType instanceof protobuf.Enum) {
    const vals = Object.values(f.resolvedType.values);
    return vals[vals.length - 1];
  }
  if (f.resolvedType instanceof protobuf.Type) return {};
  switch (f.type) {
    case 'string': return 'x';
    case 'bool': return true;
    case 'bytes': return Buffer.from([1, 2, 3]);
    case 'double': return 1.5;
    default: return 7;
  }
}
function check(ns) {
  for (const nested of ns.nestedArray || []) {
    if (nested instanceof protobuf.Type) {
      ++messages;
      const T = lookupTheirs(nested.fullName);
      if (!T || typeof T.decode !== 'function') {
        errors.push(`${nested.fullName}: not in OpenTelemetry's schema`);
      } else {
        for (const f of nested.fieldsArray) {
          ++fields;
          let v = sample(f);
          const obj = {[f.name]: f.repeated ? [v] : v};
          const buf = nested.encode(nested.fromObject(obj)).finish();
          const back = T.toObject(T.decode(buf), {longs: Number, enums: Number, bytes: Array});
          const got = back[f.name];
          const want = f.repeated ? [v] : v;
          const norm = (x) => x === undefined ? 'nothing' :
              JSON.stringify(x).replace(/{"type":"Buffer","data":(\[[^\]]*\])}/g, '$1');
          if (newer.has(`${nested.fullName}.${f.name}`) && got === undefined) continue;
          if (norm(got) !== norm(want))
            errors.push(`${nested.fullName}.${f.name} (= ${f.id}): OpenTelemetry's schema decodes ` +
                        `${norm(got)}, expected ${norm(want)}`);
        }
      }
    } else if (nested instanceof protobuf.Enum) {
      ++enums;
      const E = lookupTheirs(nested.fullName);
      if (!E) errors.push(`${nested.fullName}: not in OpenTelemetry's schema`);
      else
        for (const [name, id] of Object.entries(nested.values))
          if (E[name] !== id) errors.push(`${nested.fullName}.${name} = ${id}: theirs is ${E[name]}`);
    }
    if (nested.nestedArray) check(nested);
  }
}
check(ours);
if (errors.length) {
  console.error(errors.join('\n'));
  process.exit(1);
}
console.log(`${messages} messages, ${fields} fields, ${enums} enums: as in OpenTelemetry's schema`);
