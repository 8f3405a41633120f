// Java's own assignors, run on cases read from stdin, for the KIP-881 cross-checks
// (tests/assignors/java_assignors.py writes the cases and reads the answers).
//
// A case:                                  An answer:
//   CASE range|sticky                        RESULT
//   TOPIC name racks-of-p0 racks-of-p1 ...   member topic:p,p;topic:p   (or "-")
//   MEMBER id rack|- generation instance|-   ...
//          topic,topic owned|-               END
//   END
// Racks of a partition are comma-separated ("-": none); owned is topic:p,p;topic:p.
// "sticky" is AbstractStickyAssignor's balancer with owned partitions and generation taken from
// the Subscription, as CooperativeStickyAssignor reads them, before its cooperative adjustment.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.TreeSet;

import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.internals.AbstractStickyAssignor;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;

public class JavaAssignors {
    static final class Balancer extends AbstractStickyAssignor {
        @Override
        public String name() {
            return "balancer";
        }

        @Override
        protected MemberData memberData(Subscription subscription) {
            return new MemberData(subscription.ownedPartitions(), subscription.generationId(),
                subscription.rackId());
        }
    }

    static final Map<String, Node> NODES = new HashMap<>();
    static final Node NO_RACK = new Node(1_000_000, "localhost", 9092);

    static Node node(String rack) {
        return NODES.computeIfAbsent(rack, r -> new Node(NODES.size(), "localhost", 9092, r));
    }

    static List<TopicPartition> owned(String spec) {
        List<TopicPartition> out = new ArrayList<>();
        if (spec.equals("-"))
            return out;
        for (String topic : spec.split(";")) {
            String[] parts = topic.split(":");
            for (String p : parts[1].split(","))
                out.add(new TopicPartition(parts[0], Integer.parseInt(p)));
        }
        return out;
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, "UTF-8");
        String kind = null;
        Map<String, List<PartitionInfo>> partitions = new HashMap<>();
        Map<String, Subscription> subscriptions = new HashMap<>();
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split(" ");
            switch (f[0]) {
                case "CASE":
                    kind = f[1];
                    partitions = new HashMap<>();
                    subscriptions = new HashMap<>();
                    break;
                case "TOPIC": {
                    List<PartitionInfo> infos = new ArrayList<>();
                    for (int p = 0; p < f.length - 2; p++) {
                        String racks = f[p + 2];
                        Node[] replicas;
                        if (racks.equals("-")) {
                            replicas = new Node[] {NO_RACK};
                        } else {
                            String[] names = racks.split(",");
                            replicas = new Node[names.length];
                            for (int i = 0; i < names.length; i++)
                                replicas[i] = node(names[i]);
                        }
                        infos.add(new PartitionInfo(f[1], p, replicas[0], replicas, replicas));
                    }
                    partitions.put(f[1], infos);
                    break;
                }
                case "MEMBER": {
                    Optional<String> rack = f[2].equals("-") ? Optional.empty() : Optional.of(f[2]);
                    int generation = Integer.parseInt(f[3]);
                    List<String> topics = f[5].equals("-") ? Collections.emptyList() : Arrays.asList(f[5].split(","));
                    Subscription s = new Subscription(topics, null, owned(f[6]), generation, rack);
                    if (!f[4].equals("-"))
                        s.setGroupInstanceId(Optional.of(f[4]));
                    subscriptions.put(f[1], s);
                    break;
                }
                case "END": {
                    Map<String, List<TopicPartition>> result = kind.equals("range")
                        ? new RangeAssignor().assignPartitions(partitions, subscriptions)
                        : new Balancer().assignPartitions(partitions, subscriptions);
                    out.println("RESULT");
                    for (String member : new TreeSet<>(subscriptions.keySet())) {
                        TreeMap<String, TreeSet<Integer>> byTopic = new TreeMap<>();
                        for (TopicPartition tp : result.getOrDefault(member, Collections.emptyList()))
                            byTopic.computeIfAbsent(tp.topic(), t -> new TreeSet<>()).add(tp.partition());
                        StringBuilder b = new StringBuilder();
                        byTopic.forEach((t, ps) -> {
                            if (b.length() > 0)
                                b.append(';');
                            b.append(t).append(':');
                            StringBuilder nums = new StringBuilder();
                            for (int p : ps)
                                nums.append(nums.length() > 0 ? "," : "").append(p);
                            b.append(nums);
                        });
                        out.println(member + " " + (b.length() == 0 ? "-" : b.toString()));
                    }
                    out.println("END");
                    out.flush();
                    break;
                }
                default:
                    throw new IllegalArgumentException("bad line: " + line);
            }
        }
        out.flush();
    }
}
