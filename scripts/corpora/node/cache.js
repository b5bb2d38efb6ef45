// SPDX-License-Identifier: MIT
// A Node.js process holding an in-memory cache of JSON-like records (a Map of objects with
// strings, numbers, nested arrays), as an API server's cache does. Prints READY <pid> when built.
//
//   node --max-old-space-size=2048 cache.js [RECORDS]
'use strict';
const n = Number(process.argv[2] || 400000);
let seed = 42;
function rnd(k) { seed = (seed * 1103515245 + 12345) & 0x7fffffff; return seed % k; }
const tags = ['new', 'sale', 'popular', 'clearance', 'limited', 'eco', 'imported'];
const cache = new Map();
for (let i = 0; i < n; i++) {
  const id = 'product:' + (100000 + i);
  const rec = {
    id,
    title: 'Product ' + i + ' ' + tags[rnd(tags.length)],
    priceCents: 99 + rnd(50000),
    stock: rnd(1000),
    rating: rnd(50) / 10,
    tags: [tags[rnd(tags.length)], tags[rnd(tags.length)]],
    vendor: { id: rnd(5000), name: 'vendor-' + rnd(5000), country: ['DE', 'FR', 'US', 'JP'][rnd(4)] },
    updatedAt: new Date(1700000000000 + rnd(1e9)).toISOString(),
    history: Array.from({ length: rnd(8) }, () => rnd(10000)),
  };
  cache.set(id, rec);
}
if (global.gc) global.gc();
const m = process.memoryUsage();
console.log(`READY ${process.pid} records=${cache.size} heap_used_mb=${m.heapUsed >> 20}`);
setInterval(() => { cache.get('product:' + (100000 + rnd(n))); }, 1000);
