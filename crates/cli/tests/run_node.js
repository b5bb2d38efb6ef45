// SPDX-License-Identifier: MIT
const crypto = require('crypto');
const m = new Map();
for (let i = 0; i < 100000; i++) m.set('k' + i, { i, s: 'v'.repeat(i % 40) + i, a: [i, i * 2, i * 3] });
let h = crypto.createHash('sha256');
for (const [k, v] of m) if (v.i % 7 === 0) h.update(k + v.s + v.a.join(','));
console.log(m.size, h.digest('hex').slice(0, 16));
