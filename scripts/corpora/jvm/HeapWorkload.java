// SPDX-License-Identifier: MIT
// A JVM program holding a few hundred MB of live objects, the kind an order-management service
// keeps: a HashMap of orders (boxed keys, Strings, small arrays, nested objects) plus an index by
// customer. Prints READY <pid> when the heap is built, then idles so it can be captured.
//
//   java -Xmx1g HeapWorkload.java [ORDERS]
import java.util.*;

public class HeapWorkload {
    record Line(String sku, int qty, long priceCents) {}

    static final class Order {
        final long id;
        final String customer;
        final String status;
        final long createdMillis;
        final double total;
        final List<Line> lines;
        final Map<String, String> attributes;

        Order(long id, String customer, String status, long created, double total,
              List<Line> lines, Map<String, String> attributes) {
            this.id = id; this.customer = customer; this.status = status;
            this.createdMillis = created; this.total = total; this.lines = lines;
            this.attributes = attributes;
        }
    }

    public static void main(String[] args) throws Exception {
        int n = args.length > 0 ? Integer.parseInt(args[0]) : 250_000;
        Random rnd = new Random(42);
        String[] statuses = {"NEW", "PAID", "SHIPPED", "DELIVERED", "RETURNED", "CANCELLED"};
        String[] regions = {"eu-west", "eu-central", "us-east", "us-west", "ap-south"};
        Map<Long, Order> orders = new HashMap<>();
        Map<String, List<Long>> byCustomer = new HashMap<>();
        long t0 = 1_700_000_000_000L;
        for (int i = 0; i < n; i++) {
            long id = 10_000_000L + i * 7L;
            String customer = "customer-" + (rnd.nextInt(n / 4) + 1);
            int nl = 1 + rnd.nextInt(4);
            List<Line> lines = new ArrayList<>(nl);
            double total = 0;
            for (int k = 0; k < nl; k++) {
                long price = 99 + rnd.nextInt(20_000);
                int qty = 1 + rnd.nextInt(3);
                lines.add(new Line("SKU-" + (100_000 + rnd.nextInt(50_000)), qty, price));
                total += qty * price / 100.0;
            }
            Map<String, String> attrs = new HashMap<>();
            attrs.put("region", regions[rnd.nextInt(regions.length)]);
            if (rnd.nextInt(3) == 0) attrs.put("coupon", "SAVE" + rnd.nextInt(50));
            Order o = new Order(id, customer, statuses[rnd.nextInt(statuses.length)],
                    t0 + rnd.nextInt(1_000_000_000), total, lines, attrs);
            orders.put(id, o);
            byCustomer.computeIfAbsent(customer, c -> new ArrayList<>()).add(id);
        }
        System.gc();
        long used = Runtime.getRuntime().totalMemory() - Runtime.getRuntime().freeMemory();
        System.out.println("READY " + ProcessHandle.current().pid() + " orders=" + orders.size()
                + " customers=" + byCustomer.size() + " heap_used_mb=" + (used >> 20));
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
