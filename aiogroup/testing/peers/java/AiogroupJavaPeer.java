// aiogroup's Java peer: one Apache Kafka KafkaConsumer in a group, speaking aiogroup's peer
// protocol (docs/peers.md). Built by aiogroup.testing.peers with javac on first use.
//
//   java -cp CLASSES:JARS AiogroupJavaPeer --bootstrap H:P --group G --topic T --name N
//        [--assignors cooperative-sticky] [--instance-id I] [--session-ms 6000]
//        [--heartbeat-ms 1000] [--rebalance-ms 10000] [--protocol classic|consumer]
//        [--commit-every-ms 1000] [--max-records 50] [--commands] [--telemetry DIR]
//        [--kind java] [--client java]
//
// stdout: one JSON object a line (owned, assigned, revoked, consumed, committed, error, closed).
// --commands: stdin lines "commit" and "close". --telemetry: aiogroup's telemetry schema v1.
// SIGTERM: a clean close (a shutdown hook wakes the poll loop, which commits and closes).

import java.io.BufferedReader;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.FencedInstanceIdException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class AiogroupJavaPeer {
    private static final Map<String, String> ASSIGNORS = Map.of(
        "range", "org.apache.kafka.clients.consumer.RangeAssignor",
        "roundrobin", "org.apache.kafka.clients.consumer.RoundRobinAssignor",
        "sticky", "org.apache.kafka.clients.consumer.StickyAssignor",
        "cooperative-sticky", "org.apache.kafka.clients.consumer.CooperativeStickyAssignor");

    private final Map<String, String> opt;
    private final Out out;
    private final KafkaConsumer<byte[], byte[]> consumer;
    private final String topic;
    private final String protocol;         // what telemetry calls the assignor in use
    private final String rebalanceProtocol; // eager or cooperative (KIP-429)
    private final LinkedBlockingQueue<String> commands = new LinkedBlockingQueue<>();
    private final Map<TopicPartition, Long> processed = new HashMap<>(); // next offset
    private final Map<TopicPartition, Long> sent = new HashMap<>(); // last periodic commit
    private volatile boolean stopping;
    private volatile int exitCode;
    private final CountDownLatch finished = new CountDownLatch(1);
    private long consumed;
    private int lastGeneration = -1;
    private List<Integer> owned;
    private Double rebalanceStarted;

    private AiogroupJavaPeer(Map<String, String> opt) throws IOException {
        this.opt = opt;
        this.topic = need(opt, "topic");
        this.out = new Out(opt.get("telemetry"), need(opt, "name"), opt.getOrDefault("client", "java"),
                           need(opt, "group"));
        List<String> assignors = List.of(opt.getOrDefault("assignors", "cooperative-sticky").split(","));
        boolean consumerProtocol = "consumer".equals(opt.get("protocol"));
        boolean cooperative = consumerProtocol || assignors.stream().allMatch("cooperative-sticky"::equals);
        this.rebalanceProtocol = cooperative ? "cooperative" : "eager";
        this.protocol = consumerProtocol ? "consumer" : cooperative ? "cooperative-sticky"
            : assignors.stream().filter(a -> !a.equals("cooperative-sticky")).findFirst().orElse(assignors.get(0));
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, need(opt, "bootstrap"));
        p.put(ConsumerConfig.GROUP_ID_CONFIG, need(opt, "group"));
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, need(opt, "name"));
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, opt.getOrDefault("max-records", "50"));
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        p.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, opt.getOrDefault("rebalance-ms", "10000"));
        if (consumerProtocol) {
            p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer"); // KIP-848: the broker assigns
        } else {
            List<String> classes = new ArrayList<>();
            for (String a : assignors) {
                String cls = ASSIGNORS.get(a.trim());
                if (cls == null) {
                    throw new IllegalArgumentException("unknown assignor " + a + "; known: " + ASSIGNORS.keySet());
                }
                classes.add(cls);
            }
            p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, String.join(",", classes));
            p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, opt.getOrDefault("session-ms", "6000"));
            p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, opt.getOrDefault("heartbeat-ms", "1000"));
        }
        if (opt.containsKey("instance-id") && !opt.get("instance-id").isEmpty()) {
            p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, opt.get("instance-id"));
        }
        this.consumer = new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    private static String need(Map<String, String> opt, String key) {
        String v = opt.get(key);
        if (v == null) {
            throw new IllegalArgumentException("--" + key + " is required");
        }
        return v;
    }

    // -- the rebalance listener -----------------------------------------------------------

    private final class Listener implements ConsumerRebalanceListener {
        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            double started = Out.now();
            if (rebalanceStarted == null) {
                rebalanceStarted = started;
            }
            int generation = observe();
            out.event("assigned", Map.of("partitions", numbers(partitions)));
            double ended = Out.now();
            out.telemetry("partitions_" + "assigned", callback(partitions, generation, started, ended));
            out.telemetry("rebalance_completed", fields("generation_id", generation,
                "latency_s", Math.max(0.0, ended - rebalanceStarted)));
            rebalanceStarted = null;
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            release("revoked", partitions);
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            release("lost", partitions);
        }

        private void release(String kind, Collection<TopicPartition> partitions) {
            double started = Out.now();
            if (rebalanceStarted == null) {
                rebalanceStarted = started;
            }
            int generation = generation();
            if (kind.equals("revoked") && !partitions.isEmpty()) {
                commit(partitions, true); // what was processed, before it moves (KIP-429)
            }
            for (TopicPartition tp : partitions) {
                processed.remove(tp);
                sent.remove(tp);
            }
            Map<String, Object> event = new LinkedHashMap<>();
            event.put("partitions", numbers(partitions));
            if (kind.equals("lost")) {
                event.put("lost", true);
            }
            out.event("revoked", event);
            out.telemetry("partitions_" + kind, callback(partitions, generation, started, Out.now()));
        }
    }

    private Map<String, Object> callback(Collection<TopicPartition> partitions, int generation,
                                         double started, double ended) {
        Map<String, Object> byTopic = new TreeMap<>();
        for (TopicPartition tp : partitions) {
            @SuppressWarnings("unchecked")
            TreeSet<Integer> ps = (TreeSet<Integer>) byTopic.computeIfAbsent(tp.topic(), t -> new TreeSet<Integer>());
            ps.add(tp.partition());
        }
        return fields("generation_id", generation < 0 ? null : generation, "protocol", protocol,
            "rebalance_protocol", rebalanceProtocol, "partitions", byTopic, "started", started,
            "ended", ended, "error", null);
    }

    // -- generations and commits ----------------------------------------------------------

    private int generation() {
        try {
            ConsumerGroupMetadata meta = consumer.groupMetadata();
            out.memberId = meta.memberId().isEmpty() ? out.memberId : meta.memberId();
            return meta.generationId();
        } catch (RuntimeException e) {
            return -1;
        }
    }

    /** Records a joined event when the member is in a generation not seen yet. */
    private int observe() {
        int generation = generation();
        if (generation >= 0 && generation != lastGeneration) {
            lastGeneration = generation;
            String instance = opt.get("instance-id");
            out.telemetry("joined", fields("generation_id", generation, "protocol", protocol,
                "rebalance_protocol", rebalanceProtocol, "leader", null,
                "group_instance_id", instance == null || instance.isEmpty() ? null : instance));
        }
        return generation;
    }

    private Map<TopicPartition, OffsetAndMetadata> toCommit(Collection<TopicPartition> partitions) {
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        for (TopicPartition tp : partitions) {
            Long next = processed.get(tp);
            if (next != null) {
                offsets.put(tp, new OffsetAndMetadata(next));
            }
        }
        return offsets;
    }

    private Map<String, Object> offsetsByTopic(Map<TopicPartition, OffsetAndMetadata> offsets) {
        Map<String, Object> byTopic = new TreeMap<>();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
            @SuppressWarnings("unchecked")
            Map<String, Object> ps = (Map<String, Object>) byTopic.computeIfAbsent(e.getKey().topic(), t -> new TreeMap<String, Object>());
            ps.put(String.valueOf(e.getKey().partition()), e.getValue().offset());
        }
        return byTopic;
    }

    /** Commits what was processed of ``partitions``; sync, or async (answer on a later poll). */
    private Map<TopicPartition, OffsetAndMetadata> commit(Collection<TopicPartition> partitions, boolean sync) {
        Map<TopicPartition, OffsetAndMetadata> offsets = toCommit(partitions);
        if (!sync) {
            offsets.entrySet().removeIf(e -> Long.valueOf(e.getValue().offset()).equals(sent.get(e.getKey())));
            offsets.forEach((tp, om) -> sent.put(tp, om.offset()));
        }
        if (offsets.isEmpty()) {
            return offsets;
        }
        double started = Out.now();
        int generation = generation();
        if (!sync) {
            consumer.commitAsync(offsets, (done, error) -> committed(done == null ? offsets : done, error, started, generation));
            return offsets;
        }
        RuntimeException failure = null;
        for (int attempt = 0; attempt < 2; attempt++) {
            try {
                consumer.commitSync(offsets, Duration.ofSeconds(10));
                failure = null;
                break;
            } catch (WakeupException e) {
                failure = e; // SIGTERM's wakeup landed here: the commit still matters, once more
            } catch (RuntimeException e) {
                failure = e;
                break;
            }
        }
        committed(offsets, failure, started, generation);
        return failure == null ? offsets : Map.of();
    }

    private void committed(Map<TopicPartition, OffsetAndMetadata> offsets, Exception error, double started, int generation) {
        Integer gen = generation < 0 ? null : generation;
        if (error == null) {
            out.telemetry("offsets_committed", fields("generation_id", gen, "offsets", offsetsByTopic(offsets), "started", started));
        } else {
            offsets.forEach((tp, om) -> sent.remove(tp, om.offset())); // try it again later
            out.telemetry("commit_failed", fields("generation_id", gen, "partitions", offsetsByTopic(offsets),
                "error", String.valueOf(error), "state", null, "local", false,
                "error_code", code(error), "during_join", null, "started", started));
            out.event("error", fields("code", code(error), "text", String.valueOf(error)));
        }
    }

    private static Integer code(Throwable e) {
        Errors err = Errors.forException(e);
        return err == Errors.UNKNOWN_SERVER_ERROR ? null : (int) err.code();
    }

    // -- the poll loop --------------------------------------------------------------------

    private int run() {
        consumer.subscribe(List.of(topic), new Listener());
        rebalanceStarted = Out.now();
        out.telemetry("started", fields("kind", opt.getOrDefault("kind", "java")));
        long commitEvery = Long.parseLong(opt.getOrDefault("commit-every-ms", "1000"));
        long lastCommit = System.nanoTime();
        int code = 0;
        while (!stopping) {
            ConsumerRecords<byte[], byte[]> records;
            try {
                records = consumer.poll(Duration.ofMillis(100));
            } catch (WakeupException e) {
                continue; // SIGTERM: the loop's condition ends it
            } catch (FencedInstanceIdException e) {
                out.event("error", fields("code", 82, "text", String.valueOf(e)));
                out.telemetry("client_error", fields("error", String.valueOf(e)));
                code = 1;
                break;
            } catch (RuntimeException e) {
                Integer c = code(e);
                out.event("error", fields("code", c, "text", String.valueOf(e)));
                if (c == null) {
                    out.telemetry("error", fields("where", "poll", "error", String.valueOf(e)));
                    code = 1;
                    break;
                }
                continue;
            }
            process(records);
            observe();
            List<Integer> now = numbers(consumer.assignment());
            if (!now.equals(owned)) {
                owned = now;
                out.event("owned", Map.of("partitions", now));
            }
            if (commitEvery > 0 && System.nanoTime() - lastCommit >= commitEvery * 1_000_000L) {
                lastCommit = System.nanoTime();
                commit(consumer.assignment(), false);
            }
            String command = commands.poll();
            if ("commit".equals(command)) {
                Map<TopicPartition, OffsetAndMetadata> done = commit(consumer.assignment(), true);
                Map<String, Object> flat = new TreeMap<>();
                done.forEach((tp, om) -> flat.put(String.valueOf(tp.partition()), om.offset()));
                out.event("committed", Map.of("offsets", flat));
            } else if ("close".equals(command)) {
                break;
            }
        }
        try {
            // Revokes (the listener commits what was processed), then leaves unless static.
            consumer.close(CloseOptions.timeout(Duration.ofSeconds(10)));
        } catch (RuntimeException e) {
            out.telemetry("error", fields("where", "close", "error", String.valueOf(e)));
            code = 1;
        }
        out.event("closed", Map.of());
        out.telemetry("closed", fields("generation_id", lastGeneration < 0 ? null : lastGeneration, "errors", 0));
        out.close();
        return code;
    }

    private void process(ConsumerRecords<byte[], byte[]> records) {
        if (records.isEmpty()) {
            return;
        }
        for (TopicPartition tp : records.partitions()) {
            List<ConsumerRecord<byte[], byte[]>> batch = records.records(tp);
            long first = batch.get(0).offset();
            long last = batch.get(batch.size() - 1).offset();
            processed.put(tp, last + 1);
            out.telemetry("processed", fields("generation_id", lastGeneration < 0 ? null : lastGeneration,
                "topic", tp.topic(), "partition", tp.partition(), "first", first, "last", last));
        }
        consumed += records.count();
        out.event("consumed", Map.of("count", consumed));
    }

    private static List<Integer> numbers(Collection<TopicPartition> partitions) {
        List<Integer> ps = new ArrayList<>();
        for (TopicPartition tp : partitions) {
            ps.add(tp.partition());
        }
        ps.sort(null);
        return ps;
    }

    static Map<String, Object> fields(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put((String) kv[i], kv[i + 1]);
        }
        return m;
    }

    // -- output: stdout events and the telemetry file -------------------------------------

    static final class Out {
        private final PrintStream stdout = new PrintStream(new FileOutputStream(java.io.FileDescriptor.out), false, StandardCharsets.UTF_8);
        private final FileOutputStream file; // O_APPEND: one write per line
        private final String member;
        private final String client;
        private final String group;
        private final String host;
        private final long pid = ProcessHandle.current().pid();
        private long seq;
        volatile String memberId;

        Out(String dir, String member, String client, String group) throws IOException {
            this.member = member;
            this.client = client;
            this.group = group;
            this.host = hostname();
            if (dir == null) {
                this.file = null;
            } else {
                StringBuilder safe = new StringBuilder();
                for (char c : member.toCharArray()) {
                    safe.append(Character.isLetterOrDigit(c) || "-_.".indexOf(c) >= 0 ? c : '_');
                }
                Files.createDirectories(Path.of(dir));
                this.file = new FileOutputStream(Path.of(dir, safe + ".0000.jsonl").toFile(), true);
            }
        }

        private static String hostname() {
            try {
                return Files.readString(Path.of("/proc/sys/kernel/hostname")).trim();
            } catch (IOException | RuntimeException e) {
                String env = System.getenv("HOSTNAME");
                return env == null ? "localhost" : env;
            }
        }

        static double now() {
            Instant t = Instant.now();
            return t.getEpochSecond() + t.getNano() / 1e9;
        }

        synchronized void event(String name, Map<String, ?> fields) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("event", name);
            m.putAll(fields);
            stdout.print(Json.write(m) + "\n");
            stdout.flush();
        }

        synchronized void telemetry(String type, Map<String, Object> fields) {
            if (file == null) {
                return;
            }
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("v", 1);
            m.put("type", type);
            m.put("ts", now());
            m.put("seq", seq++);
            m.put("group", group);
            m.put("member", member);
            m.put("member_id", memberId);
            m.put("client", client);
            m.put("pid", pid);
            m.put("host", host);
            m.putAll(fields);
            try {
                file.write((Json.write(m) + "\n").getBytes(StandardCharsets.UTF_8));
            } catch (IOException e) {
                System.err.println("telemetry write failed: " + e);
            }
        }

        synchronized void close() {
            stdout.flush();
            if (file != null) {
                try {
                    file.close();
                } catch (IOException e) {
                    System.err.println("telemetry close failed: " + e);
                }
            }
        }
    }

    static final class Json {
        static String write(Object value) {
            StringBuilder sb = new StringBuilder();
            append(sb, value);
            return sb.toString();
        }

        private static void append(StringBuilder sb, Object v) {
            if (v == null) {
                sb.append("null");
            } else if (v instanceof String) {
                sb.append('"');
                for (char c : ((String) v).toCharArray()) {
                    if (c == '"' || c == '\\') {
                        sb.append('\\').append(c);
                    } else if (c < 0x20) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
                }
                sb.append('"');
            } else if (v instanceof Number || v instanceof Boolean) {
                sb.append(v);
            } else if (v instanceof Map<?, ?>) {
                Map<?, ?> m = (Map<?, ?>) v;
                sb.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> e : m.entrySet()) {
                    if (!first) {
                        sb.append(',');
                    }
                    first = false;
                    append(sb, String.valueOf(e.getKey()));
                    sb.append(':');
                    append(sb, e.getValue());
                }
                sb.append('}');
            } else if (v instanceof Collection<?>) {
                Collection<?> c = (Collection<?>) v;
                sb.append('[');
                boolean first = true;
                for (Object o : c) {
                    if (!first) {
                        sb.append(',');
                    }
                    first = false;
                    append(sb, o);
                }
                sb.append(']');
            } else {
                append(sb, String.valueOf(v));
            }
        }
    }

    // -- entry point ----------------------------------------------------------------------

    static Map<String, String> parse(String[] args) {
        Map<String, String> opt = new HashMap<>();
        for (int i = 0; i < args.length; i++) {
            if (!args[i].startsWith("--")) {
                throw new IllegalArgumentException("unexpected argument " + args[i]);
            }
            String key = args[i].substring(2);
            if (key.equals("commands")) {
                opt.put(key, "true");
            } else if (i + 1 < args.length) {
                opt.put(key, args[++i]);
            } else {
                throw new IllegalArgumentException(args[i] + " needs a value");
            }
        }
        return opt;
    }

    public static void main(String[] args) throws Exception {
        AiogroupJavaPeer peer = new AiogroupJavaPeer(parse(args));
        if (peer.opt.containsKey("commands")) {
            Thread reader = new Thread(() -> {
                try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                    String line;
                    while ((line = in.readLine()) != null) {
                        peer.commands.add(line.trim());
                    }
                } catch (IOException e) {
                    // stdin gone: as closed
                }
                peer.commands.add("close"); // stdin closed: the test is gone
            }, "commands");
            reader.setDaemon(true);
            reader.start();
        }
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            peer.stopping = true;
            try {
                peer.consumer.wakeup();
            } catch (RuntimeException e) {
                // already closed: the main thread is done
            }
            try {
                peer.finished.await(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            Runtime.getRuntime().halt(peer.exitCode); // 0 after a clean close, not 143
        }, "sigterm"));
        int code;
        try {
            code = peer.run();
        } catch (RuntimeException e) {
            peer.out.telemetry("error", fields("where", "main", "error", String.valueOf(e)));
            peer.out.event("error", fields("code", null, "text", String.valueOf(e)));
            e.printStackTrace();
            code = 1;
        }
        peer.exitCode = code;
        peer.finished.countDown();
        System.exit(code);
    }
}
