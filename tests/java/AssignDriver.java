/*
 * Test driver for kops: runs Kafka's own org.apache.kafka.admin.AdminUtils.assignReplicasToBrokers
 * (Kafka 3.6+, server-common jar) on many cases in one JVM, so that kops' Python re-implementation
 * can be compared with it (tests/cluster/test_kafka_assign_differential.py) and timed against it
 * (bench/bench_assign.py). Written for kops; only calls Kafka's public API.
 *
 * Compile:  javac -cp '<kafka libs>/*' -d OUT tests/java/AssignDriver.java
 *
 * Mode "cases" (default): one case per stdin line, tab-separated:
 *     caseId  nPartitions  replicationFactor  fixedStartIndex  startPartitionId  seed  brokers
 *   seed: "-" to leave Kafka's static Random alone, else a long given to RAND.setSeed(seed)
 *   brokers: comma-separated; "7" = broker 7 without a rack, "7=6869" = broker 7 with the rack
 *            whose UTF-8 bytes are hex 68 69 ("hi"); "" (empty field) = no brokers
 *   One output line per case:
 *     caseId OK p:r,r,r;p:r,r,r;...        (partitions in ascending order)
 *     caseId ERR <exception simple class name> <message>
 *
 * Mode "bench BROKERS RACKS PARTITIONS RF START REPEAT": broker i in rack "rack<i % RACKS>",
 *   times REPEAT calls inside the JVM and prints one line per call:
 *     bench <wall ms (System.nanoTime)> <CPU ms of the calling thread> <digest>
 *   digest = over partitions ascending and their replicas, h = h * 31 + value (Java long).
 */

import org.apache.kafka.admin.AdminUtils;
import org.apache.kafka.admin.BrokerMetadata;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.io.BufferedWriter;
import java.io.OutputStreamWriter;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.TreeMap;

public class AssignDriver {

    public static void main(String[] args) throws Exception {
        if (args.length > 0 && args[0].equals("bench")) {
            bench(args);
            return;
        }
        Field f = AdminUtils.class.getDeclaredField("RAND");
        f.setAccessible(true);
        Random rand = (Random) f.get(null);

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintWriter out = new PrintWriter(new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8)));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) continue;
            String[] c = line.split("\t", -1);
            String id = c[0];
            int nPartitions = Integer.parseInt(c[1]);
            int rf = Integer.parseInt(c[2]);
            int fixedStart = Integer.parseInt(c[3]);
            int startPartition = Integer.parseInt(c[4]);
            if (!c[5].equals("-")) rand.setSeed(Long.parseLong(c[5]));
            List<BrokerMetadata> brokers = new ArrayList<>();
            if (!c[6].isEmpty()) {
                for (String b : c[6].split(",")) {
                    int eq = b.indexOf('=');
                    if (eq < 0) {
                        brokers.add(new BrokerMetadata(Integer.parseInt(b), Optional.empty()));
                    } else {
                        brokers.add(new BrokerMetadata(Integer.parseInt(b.substring(0, eq)),
                            Optional.of(unhex(b.substring(eq + 1)))));
                    }
                }
            }
            StringBuilder sb = new StringBuilder(id);
            try {
                Map<Integer, List<Integer>> result =
                    AdminUtils.assignReplicasToBrokers(brokers, nPartitions, rf, fixedStart, startPartition);
                sb.append(" OK ");
                boolean firstPartition = true;
                for (Map.Entry<Integer, List<Integer>> e : new TreeMap<>(result).entrySet()) {
                    if (!firstPartition) sb.append(';');
                    firstPartition = false;
                    sb.append(e.getKey()).append(':');
                    List<Integer> replicas = e.getValue();
                    for (int i = 0; i < replicas.size(); i++) {
                        if (i > 0) sb.append(',');
                        sb.append(replicas.get(i));
                    }
                }
            } catch (RuntimeException e) {
                sb.append(" ERR ").append(e.getClass().getSimpleName()).append(' ')
                  .append(String.valueOf(e.getMessage()).replace('\n', ' '));
            }
            out.println(sb);
        }
        out.flush();
    }

    private static String unhex(String hex) {
        byte[] bytes = new byte[hex.length() / 2];
        for (int i = 0; i < bytes.length; i++)
            bytes[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
        return new String(bytes, StandardCharsets.UTF_8);
    }

    private static void bench(String[] args) {
        int nBrokers = Integer.parseInt(args[1]);
        int nRacks = Integer.parseInt(args[2]);
        int nPartitions = Integer.parseInt(args[3]);
        int rf = Integer.parseInt(args[4]);
        int start = Integer.parseInt(args[5]);
        int repeat = Integer.parseInt(args[6]);
        List<BrokerMetadata> brokers = new ArrayList<>();
        for (int i = 0; i < nBrokers; i++)
            brokers.add(new BrokerMetadata(i, nRacks > 0 ? Optional.of("rack" + (i % nRacks)) : Optional.empty()));
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        for (int r = 0; r < repeat; r++) {
            long c0 = threads.getCurrentThreadCpuTime();
            long t0 = System.nanoTime();
            Map<Integer, List<Integer>> result = AdminUtils.assignReplicasToBrokers(brokers, nPartitions, rf, start, 0);
            long t1 = System.nanoTime();
            long c1 = threads.getCurrentThreadCpuTime();
            long h = 0;
            for (int p = 0; p < nPartitions; p++) {
                h = h * 31 + p;
                for (int b : result.get(p)) h = h * 31 + b;
            }
            System.out.println("bench " + String.format("%.1f", (t1 - t0) / 1e6) + " "
                + String.format("%.1f", (c1 - c0) / 1e6) + " " + h);
            System.out.flush();
        }
    }
}
