-- SPDX-License-Identifier: MIT
-- A large in-memory hash aggregate held open by a cursor: after the first FETCH the whole hash
-- table (about 250 000 groups with their transition states) is built in the backend's
-- private memory and stays there until the cursor closes.
SET work_mem = '2GB';
SET hash_mem_multiplier = 2;
SET max_parallel_workers_per_gather = 0;
SET enable_sort = off;
BEGIN;
DECLARE c CURSOR FOR
  SELECT customer, count(*), sum(amount), avg(amount), min(ts), max(ts),
         array_agg(channel)
  FROM sales GROUP BY customer;
FETCH 1 FROM c;
SELECT 'READY ' || pg_backend_pid();
