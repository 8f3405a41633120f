// The Java KafkaConsumer of aiogroup's consumer benchmarks (bench/bench_consumer.py, and
// bench/bench_latency.py). Compiled with javac against the pinned kafka-clients 4.1.1 jars by
// aiogroup.testing.peers.java_command (bench/consumer_clients.py: peer_program("java")); run on
// the JVM's own defaults. The consumer has kafka-clients' defaults (classic group protocol,
// max.poll.records 500, fetch.max.bytes 50 MiB, max.partition.fetch.bytes 1 MiB: a larger
// batch is returned anyway, KIP-74), ByteArrayDeserializer, auto.offset.reset as below and
// enable.auto.commit=false; --tuned adds fetch.max.wait.ms=10 (librdkafka's low-latency advice,
// for the latency mode; with fetch.min.bytes=1 it changes nothing while records flow).
//
// Throughput mode (bench_consumer.py):
//
//   BenchConsumer --mode throughput --bootstrap B --topic T --group G --expected JSON
//                 --warmup N --timed M --idle S [--client NAME] [--tuned]
//
//   --expected is {"partition": records, ...}. Reads from the earliest offsets until it has N
//   records (poll() returns up to max.poll.records, 500), then M more, timed (wall clock;
//   process CPU of every thread from OperatingSystemMXBean); then stops calling poll() for S
//   seconds (VmRSS then is idle_rss_mb), then reads the rest until every expected record is
//   in; checks each partition's offsets are 0..n-1, each once, in order. Prints ONE JSON line:
//   {"client", "seconds", "records", "timed_records", "rate", "cpu_seconds", "verdict",
//   "peak_rss_mb", "idle_rss_mb"} ("rate" = timed_records/seconds, peak RSS = VmHWM), then
//   closes the consumer. (The classic KafkaConsumer fetches only inside poll(): it prefetches
//   nothing while the application does not call it.)
//
// Latency mode (bench_latency.py):
//
//   BenchConsumer --mode latency --bootstrap B --topic T --group G --records N [--tuned]
//                 [--offset-reset earliest|latest] [--client NAME]
//
//   Prints {"event": "ready", "client": ...} once partitions are assigned (produce after it),
//   then reads N records (or fewer: a line on stdin stops it, for a client fallen behind): the
//   first 8 bytes of each value are the producer's time.time_ns() as a big-endian int64, and
//   latency = the wall clock (Instant.now(), ns, same machine) minus that. Prints ONE JSON
//   line: {"client", "count", "p50_us", "p99_us", "p999_us", "max_us", "latencies_us"} (every
//   latency, in arrival order, integers; -1 percentiles when nothing was read).
//
// Exit code 0 on success, 1 on an error (message on stderr).

import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class BenchConsumer {

    public static void main(String[] argv) throws Exception {
        Map<String, String> opt = new HashMap<>();
        for (int i = 0; i < argv.length; i++) {
            String key = argv[i];
            if (!key.startsWith("--")) {
                throw new IllegalArgumentException("unexpected argument " + key);
            }
            if (key.equals("--tuned")) {
                opt.put("tuned", "true");
            } else {
                opt.put(key.substring(2), argv[++i]);
            }
        }
        String mode = opt.getOrDefault("mode", "throughput");
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, opt.get("bootstrap"));
        props.put(ConsumerConfig.GROUP_ID_CONFIG, opt.get("group"));
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, opt.getOrDefault("offset-reset", "earliest"));
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, "bench-java");
        if (opt.containsKey("tuned")) {
            props.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "10");
        }
        String client = opt.getOrDefault("client", "java");
        try (KafkaConsumer<byte[], byte[]> consumer =
                 new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            String line = mode.equals("latency")
                ? latency(consumer, opt, client)
                : throughput(consumer, opt, client);
            System.out.println(line);
            System.out.flush();
        }
    }

    // ------------------------------------------------------------------ throughput

    private static String throughput(KafkaConsumer<byte[], byte[]> consumer, Map<String, String> opt,
                                     String client) throws Exception {
        TreeMap<Integer, Long> expected = new TreeMap<>();
        Matcher m = Pattern.compile("\"(\\d+)\"\\s*:\\s*(\\d+)").matcher(opt.get("expected"));
        while (m.find()) {
            expected.put(Integer.parseInt(m.group(1)), Long.parseLong(m.group(2)));
        }
        int size = expected.isEmpty() ? 1 : expected.lastKey() + 1;
        long[] want = new long[size];
        long total = 0;
        for (Map.Entry<Integer, Long> e : expected.entrySet()) {
            want[e.getKey()] = e.getValue();
            total += e.getValue();
        }
        long[] next = new long[size];
        long warmup = Long.parseLong(opt.getOrDefault("warmup", "1000"));
        double idle = Double.parseDouble(opt.getOrDefault("idle", "10"));
        consumer.subscribe(List.of(opt.get("topic")));
        long[] state = new long[2]; // count, bad
        long timedEnd = warmup + Long.parseLong(opt.get("timed"));
        while (state[0] < warmup) {
            tally(consumer.poll(Duration.ofSeconds(1)), next, state);
        }
        long counted = state[0];
        long cpu0 = processCpuNanos();
        long t0 = System.nanoTime();
        while (state[0] < timedEnd && state[0] < total) {
            tally(consumer.poll(Duration.ofSeconds(1)), next, state);
        }
        double seconds = (System.nanoTime() - t0) / 1e9;
        double cpu = (processCpuNanos() - cpu0) / 1e9;
        long timed = state[0] - counted;
        Thread.sleep((long) (idle * 1000)); // the application stops calling poll()
        double idleRss = statusMb("VmRSS");
        while (state[0] < total) {
            tally(consumer.poll(Duration.ofSeconds(1)), next, state);
        }
        String verdict = state[1] == 0 && Arrays.equals(next, want)
            ? "all records, each once"
            : "MISSED or REPEATED records (bad records " + state[1] + ")";
        return String.format(java.util.Locale.ROOT,
            "{\"client\": \"%s\", \"seconds\": %.6f, \"records\": %d, \"timed_records\": %d, "
                + "\"rate\": %.3f, \"cpu_seconds\": %.6f, \"verdict\": \"%s\", "
                + "\"peak_rss_mb\": %.3f, \"idle_rss_mb\": %.3f}",
            client, seconds, state[0], timed, seconds > 0 ? timed / seconds : 0.0, cpu, verdict,
            statusMb("VmHWM"), idleRss);
    }

    private static void tally(ConsumerRecords<byte[], byte[]> records, long[] next, long[] state) {
        for (ConsumerRecord<byte[], byte[]> r : records) {
            int p = r.partition();
            if (p >= next.length || r.offset() != next[p]) {
                state[1]++;
            } else {
                next[p] = r.offset() + 1;
            }
            state[0]++;
        }
    }

    // ------------------------------------------------------------------ latency

    private static String latency(KafkaConsumer<byte[], byte[]> consumer, Map<String, String> opt,
                                  String client) {
        int n = Integer.parseInt(opt.get("records"));
        long[] lat = new long[n];
        boolean[] ready = {false};
        consumer.subscribe(List.of(opt.get("topic")), new ConsumerRebalanceListener() {
            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> partitions) {}

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                if (!ready[0] && !partitions.isEmpty()) {
                    consumer.position(partitions.iterator().next()); // positions known
                    ready[0] = true;
                    System.out.println("{\"event\": \"ready\", \"client\": \"" + client + "\"}");
                    System.out.flush();
                }
            }
        });
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        Thread stdin = new Thread(() -> { // a line on stdin: stop and report what was read
            try {
                new java.io.BufferedReader(new java.io.InputStreamReader(System.in)).readLine();
            } catch (java.io.IOException e) {
                // no stdin: never stopped early
            }
            stop.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();
        int count = 0;
        while (count < n && !stop.get()) {
            ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofSeconds(1));
            long now = nowNanos();
            for (ConsumerRecord<byte[], byte[]> r : records) {
                if (count < n && r.value() != null && r.value().length >= 8) {
                    lat[count++] = (now - ByteBuffer.wrap(r.value(), 0, 8).getLong()) / 1000;
                }
            }
        }
        long[] sorted = Arrays.copyOf(lat, count);
        Arrays.sort(sorted);
        StringBuilder out = new StringBuilder();
        out.append(String.format(java.util.Locale.ROOT,
            "{\"client\": \"%s\", \"count\": %d, \"p50_us\": %d, \"p99_us\": %d, \"p999_us\": %d, "
                + "\"max_us\": %d",
            client, count, pct(sorted, 0.50), pct(sorted, 0.99), pct(sorted, 0.999),
            pct(sorted, 1.0)));
        {
            out.append(", \"latencies_us\": [");
            for (int i = 0; i < count; i++) {
                out.append(i == 0 ? "" : ",").append(lat[i]);
            }
            out.append(']');
        }
        return out.append('}').toString();
    }

    private static long pct(long[] sorted, double q) {
        if (sorted.length == 0) {
            return -1; // nothing read
        }
        return sorted[Math.min(sorted.length - 1, (int) Math.ceil(q * sorted.length) - 1)];
    }

    /** Wall clock in ns since the epoch (the producer's time.time_ns()). */
    private static long nowNanos() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000_000L + now.getNano();
    }

    // ------------------------------------------------------------------ process figures

    private static long processCpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
            .getProcessCpuTime();
    }

    private static double statusMb(String key) throws Exception {
        for (String line : Files.readAllLines(Path.of("/proc/self/status"), StandardCharsets.US_ASCII)) {
            if (line.startsWith(key + ":")) {
                return Long.parseLong(line.split("\\s+")[1]) / 1024.0;
            }
        }
        return 0.0;
    }

    private BenchConsumer() {}
}
