// Prints the key iteration order of java.util.HashMap and of the Scala mutable.HashMap and
// List.groupBy on the class path (Scala 2.12 or 2.13), for test_hashorder.py.
//
// Input lines (stdin): "map +k1 +k2 -k1 ..." (puts and removes, then iterate the keys) or
// "vote n1 n2 n1 ..." (List(n1, n2, ...).groupBy(identity), then iterate the keys).
// Output: one line per input line, the keys in iteration order separated by spaces, prefixed
// "java:" / "scala:" for map lines (both implementations) and "scala:" / "java:" for votes.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.List;

public class HashOrder {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.trim().split(" ");
            List<String> items = new ArrayList<>();
            for (int i = 1; i < parts.length; i++) items.add(parts[i]);
            StringBuilder out = new StringBuilder();
            if (parts[0].equals("map")) {
                java.util.HashMap<String, Integer> jm = new java.util.HashMap<>();
                scala.collection.mutable.HashMap<String, Object> sm = new scala.collection.mutable.HashMap<>();
                for (String op : items) {
                    String key = op.substring(1);
                    if (op.charAt(0) == '+') { jm.put(key, 1); sm.put(key, 1); }
                    else { jm.remove(key); sm.remove(key); }
                }
                out.append("java:");
                for (String k : jm.keySet()) out.append(" ").append(k);
                out.append("\tscala:");
                scala.collection.Iterator<String> it = sm.keysIterator();
                while (it.hasNext()) out.append(" ").append(it.next());
            } else {
                java.util.HashMap<String, Integer> votes = new java.util.HashMap<>();
                // As ClassicGroup.selectProtocol counts: getOrDefault then put (merge would insert
                // at the head of a bucket, put appends).
                for (String v : items) votes.put(v, votes.getOrDefault(v, 0) + 1);
                scala.collection.immutable.List<String> list =
                    (scala.collection.immutable.List<String>) (Object) scala.collection.immutable.Nil$.MODULE$;
                for (int i = items.size() - 1; i >= 0; i--) list = list.$colon$colon(items.get(i));
                scala.Function1<String, String> identity = x -> x;
                scala.collection.immutable.Map<String, ?> grouped = list.groupBy(identity);
                out.append("java:");
                for (String k : votes.keySet()) out.append(" ").append(k);
                out.append("\tscala:");
                scala.collection.Iterator<String> it = grouped.keysIterator();
                while (it.hasNext()) out.append(" ").append(it.next());
            }
            System.out.println(out);
        }
    }
}
