// A DNS server for the OTLP tests: names resolve without /etc/hosts, as a cluster's
// service names do through its DNS.
//
//   node dns.js NAME=IPV4...
//       Answers UDP queries on 127.0.0.1 (an ephemeral port, printed as the first line of
//       stdout): an A query for a NAME with its address, an AAAA query for a NAME with no
//       address, any other name with NXDOMAIN. Appends nothing; runs until killed.
'use strict';
const dgram = require('dgram');

const names = new Map();
for (const arg of process.argv.slice(2)) {
  const [name, ip] = arg.split('=');
  names.set(name.toLowerCase(), ip.split('.').map(Number));
}

const server = dgram.createSocket('udp4');
server.on('message', (msg, rinfo) => {
  if (msg.length < 12) return;
  // The question: labels up to a zero length, then QTYPE and QCLASS.
  let pos = 12;
  const labels = [];
  while (pos < msg.length && msg[pos] !== 0) {
    labels.push(msg.subarray(pos + 1, pos + 1 + msg[pos]).toString('latin1'));
    pos += 1 + msg[pos];
  }
  const qtype = msg.readUInt16BE(pos + 1);
  const question = msg.subarray(12, pos + 5);
  const ip = names.get(labels.join('.').toLowerCase());
  const header = Buffer.alloc(12);
  msg.copy(header, 0, 0, 2);                            // the id
  header.writeUInt16BE(0x8180 | (ip ? 0 : 3), 2);       // a response, recursion; NXDOMAIN
  header.writeUInt16BE(1, 4);                           // one question
  const answer = ip && qtype === 1;
  header.writeUInt16BE(answer ? 1 : 0, 6);
  const parts = [header, question];
  if (answer) {
    const rr = Buffer.alloc(16);
    rr.writeUInt16BE(0xc00c, 0);                        // the name: the question's
    rr.writeUInt16BE(1, 2);                             // A
    rr.writeUInt16BE(1, 4);                             // IN
    rr.writeUInt32BE(60, 6);                            // TTL
    rr.writeUInt16BE(4, 10);
    Buffer.from(ip).copy(rr, 12);
    parts.push(rr);
  }
  server.send(Buffer.concat(parts), rinfo.port, rinfo.address);
});
server.bind(0, '127.0.0.1', () => process.stdout.write(`${server.address().port}\n`));
