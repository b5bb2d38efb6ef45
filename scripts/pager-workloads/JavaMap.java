// SPDX-License-Identifier: MIT
// A JVM with a large, uniformly read heap: a HashMap of N strings, then PASSES x N random
// gets; prints a checksum, identical with and without a pager. docs/benchmarks/run.md.
// Usage: java -Xmx512m JavaMap.java N PASSES   (or javac it once and run the class)
import java.util.HashMap;
import java.util.Random;

public class JavaMap {
    public static void main(String[] args) {
        int n = Integer.parseInt(args[0]);
        int passes = Integer.parseInt(args[1]);
        HashMap<Integer, String> m = new HashMap<>();
        for (int i = 0; i < n; i++) {
            m.put(i, "value-" + i + "-" + (i * 2654435761L));
        }
        long sum = 0;
        Random r = new Random(42);
        for (int p = 0; p < passes; p++) {
            for (int i = 0; i < n; i++) {
                String s = m.get(r.nextInt(n));
                sum += s.length() + s.charAt(s.length() - 1);
            }
        }
        System.out.println("sum " + sum + " size " + m.size());
    }
}
