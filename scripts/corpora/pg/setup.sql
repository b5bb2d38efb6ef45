-- SPDX-License-Identifier: MIT
-- The table the PostgreSQL workload aggregates: sales rows with a high-cardinality customer key.
CREATE TABLE sales AS
SELECT g AS id,
       'customer-' || (hashint4(g) & 262143) AS customer,
       (hashint4(g * 7) & 65535) / 100.0 AS amount,
       timestamp '2024-01-01' + (hashint4(g * 13) & 31535999) * interval '1 second' AS ts,
       (ARRAY['web','store','phone','partner'])[1 + (g % 4)] AS channel
FROM generate_series(1, 1000000) AS g;
ANALYZE sales;
