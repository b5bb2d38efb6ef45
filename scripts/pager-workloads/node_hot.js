// SPDX-License-Identifier: MIT
// Node.js with a skewed working set: a Map of 300k objects, lookups that mostly hit a hot
// 10 % of the keys, and a full iteration every 100k lookups (victim selection).
const crypto = require('crypto');
const n = Number(process.argv[2] || 300000);
const lookups = Number(process.argv[3] || 400000);
const m = new Map();
for (let i = 0; i < n; i++) m.set('k' + i, { i, s: 'v'.repeat(i % 40) + i, a: [i, i * 2, i * 3] });
let x = 12345;
const rnd = () => { x = (x * 1103515245 + 12345) % 2147483648; return x / 2147483648; };
const h = crypto.createHash('sha256');
for (let q = 0; q < lookups; q++) {
  const i = rnd() < 0.9 ? Math.floor(rnd() * n / 10) : Math.floor(rnd() * n);
  const v = m.get('k' + i);
  if (q % 97 === 0) h.update(v.s);
  if (q % 100000 === 99999) { let s = 0; for (const [, o] of m) s += o.a[1]; h.update(String(s)); }
}
console.log(m.size, h.digest('hex').slice(0, 16));
