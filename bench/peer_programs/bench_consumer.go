// The franz-go consumer of aiogroup's consumer benchmarks (bench/bench_consumer.py, and
// bench/bench_latency.py). Built by aiogroup.testing.peers.go_command with the franz-go peer's
// go.mod and go.sum (the same pinned franz-go; bench/consumer_clients.py:
// peer_program("franz-go")). The client has franz-go's defaults (kgo.NewClient with
// ConsumerGroup and ConsumeTopics: cooperative-sticky, FetchMaxBytes 50 MiB,
// FetchMaxPartitionBytes 1 MiB, FetchMaxWait 5 s, FetchMinBytes 1), the start or end offsets as
// below and auto-commit off; --tuned adds FetchMaxWait(10ms) (for the latency mode; with a
// one-byte minimum it changes nothing while records flow).
//
// Throughput mode (bench_consumer.py):
//
//	aiogroup-bench-franz-go --mode throughput --bootstrap B --topic T --group G --expected JSON
//	    --warmup N --timed M --idle S [--client NAME] [--tuned]
//
//	--expected is {"partition": records, ...}. Reads N records from the start (PollRecords),
//	then M more with PollFetches (everything buffered), timed (wall clock; process CPU of
//	every thread from getrusage(RUSAGE_SELF)); then stops polling for S seconds (franz-go
//	keeps what it has buffered; VmRSS then is idle_rss_mb), then reads the rest until every
//	expected record is in; checks each partition's offsets are 0..n-1, each once, in order.
//	Prints ONE JSON line: {"client", "seconds", "records", "timed_records", "rate",
//	"cpu_seconds", "verdict", "peak_rss_mb", "idle_rss_mb"} ("rate" = timed_records/seconds,
//	peak RSS = VmHWM), then closes the client.
//
// Latency mode (bench_latency.py):
//
//	aiogroup-bench-franz-go --mode latency --bootstrap B --topic T --group G --records N
//	    [--tuned] [--offset-reset earliest|latest] [--client NAME]
//
//	Prints {"event": "ready", "client": ...} once partitions are assigned (produce after it),
//	then reads N records (or fewer: a line on stdin stops it, for a client fallen behind): the
//	first 8 bytes of each value are the producer's time.time_ns() as a big-endian int64, and
//	latency = time.Now().UnixNano() (same machine) minus that. Prints ONE JSON line:
//	{"client", "count", "p50_us", "p99_us", "p999_us", "max_us", "latencies_us"} (every
//	latency, in arrival order, integers; -1 percentiles when nothing was read).
//
// Exit code 0 on success, 1 on an error (message on stderr).
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)


func main() {
	mode := flag.String("mode", "throughput", "throughput or latency")
	bootstrap := flag.String("bootstrap", "", "host:port")
	topic := flag.String("topic", "", "topic")
	group := flag.String("group", "", "group id")
	expected := flag.String("expected", "{}", `{"partition": records, ...}`)
	warmup := flag.Int64("warmup", 1000, "records before the timed part")
	timed := flag.Int64("timed", 0, "records of the timed part")
	idle := flag.Float64("idle", 10, "seconds of the pause")
	records := flag.Int("records", 0, "latency mode: records to read")
	reset := flag.String("offset-reset", "earliest", "earliest or latest")
	client := flag.String("client", "franz-go", "the name printed")
	tuned := flag.Bool("tuned", false, "FetchMaxWait(10ms)")
	flag.Parse()

	var once sync.Once
	opts := []kgo.Opt{
		kgo.SeedBrokers(*bootstrap),
		kgo.ConsumerGroup(*group),
		kgo.ConsumeTopics(*topic),
		kgo.DisableAutoCommit(),
		kgo.ClientID("bench-franz-go"),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			if len(a) > 0 && *mode == "latency" {
				once.Do(func() {
					os.Stdout.WriteString(`{"event": "ready", "client": "` + *client + `"}` + "\n")
				})
			}
		}),
	}
	if *reset == "latest" {
		opts = append(opts, kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
	} else {
		opts = append(opts, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	}
	if *tuned {
		opts = append(opts, kgo.FetchMaxWait(10*time.Millisecond))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fail(err)
	}
	var line string
	if *mode == "latency" {
		line = latency(cl, *records, *client)
	} else {
		line = throughput(cl, *expected, *warmup, *timed, *idle, *client)
	}
	os.Stdout.WriteString(line + "\n")
	cl.Close()
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "error:", err)
	os.Exit(1)
}

// poll returns at most max records (PollRecords), or everything buffered (PollFetches) if
// max < 0.
func poll(cl *kgo.Client, max int) kgo.Fetches {
	var fetches kgo.Fetches
	if max < 0 {
		fetches = cl.PollFetches(context.Background())
	} else {
		fetches = cl.PollRecords(context.Background(), max)
	}
	for _, e := range fetches.Errors() {
		fmt.Fprintf(os.Stderr, "fetch error %s/%d: %v\n", e.Topic, e.Partition, e.Err)
		if e.Err == kgo.ErrClientClosed {
			os.Exit(1)
		}
	}
	return fetches
}

// ---------------------------------------------------------------------------- throughput

func throughput(cl *kgo.Client, expectedJSON string, warmup, timedRecords int64, idle float64, client string) string {
	var raw map[string]int64
	if err := json.Unmarshal([]byte(expectedJSON), &raw); err != nil {
		fail(err)
	}
	want := map[int32]int64{}
	next := map[int32]int64{}
	var total int64
	for k, v := range raw {
		p, err := strconv.Atoi(k)
		if err != nil {
			fail(err)
		}
		want[int32(p)] = v
		next[int32(p)] = 0
		total += v
	}
	var count, bad int64
	tally := func(fetches kgo.Fetches) {
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			n := next[p.Partition]
			for _, r := range p.Records {
				if r.Offset != n {
					bad++
				} else {
					n = r.Offset + 1
				}
				count++
			}
			next[p.Partition] = n
		})
	}
	for count < warmup {
		tally(poll(cl, int(warmup-count)))
	}
	counted := count
	cpu0 := cpuSeconds()
	t0 := time.Now()
	for count < warmup+timedRecords && count < total {
		tally(poll(cl, -1))
	}
	seconds := time.Since(t0).Seconds()
	cpu := cpuSeconds() - cpu0
	timed := count - counted
	time.Sleep(time.Duration(idle * float64(time.Second))) // the application stops polling
	idleRss := statusMB("VmRSS")
	for count < total {
		tally(poll(cl, -1))
	}
	verdict := "all records, each once"
	same := len(next) == len(want)
	for p, n := range want {
		same = same && next[p] == n
	}
	if bad != 0 || !same {
		verdict = fmt.Sprintf("MISSED or REPEATED records (bad records %d)", bad)
	}
	rate := 0.0
	if seconds > 0 {
		rate = float64(timed) / seconds
	}
	out, _ := json.Marshal(map[string]any{
		"client": client, "seconds": seconds, "records": count, "timed_records": timed,
		"rate": rate, "cpu_seconds": cpu, "verdict": verdict, "peak_rss_mb": statusMB("VmHWM"),
		"idle_rss_mb": idleRss,
	})
	return string(out)
}

// ---------------------------------------------------------------------------- latency

func latency(cl *kgo.Client, n int, client string) string {
	lat := make([]int64, 0, n)
	var stop atomic.Bool // a line on stdin: stop and report what was read (fallen behind)
	go func() {
		bufio.NewReader(os.Stdin).ReadString('\n')
		stop.Store(true)
	}()
	for len(lat) < n && !stop.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fetches := cl.PollFetches(ctx)
		cancel()
		now := time.Now().UnixNano()
		fetches.EachRecord(func(r *kgo.Record) {
			if len(lat) < n && len(r.Value) >= 8 {
				sent := int64(binary.BigEndian.Uint64(r.Value[:8]))
				lat = append(lat, (now-sent)/1000)
			}
		})
	}
	sorted := append([]int64(nil), lat...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	pct := func(q float64) int64 { // -1: nothing read
		if len(sorted) == 0 {
			return -1
		}
		i := int(math.Ceil(q*float64(len(sorted)))) - 1
		if i < 0 {
			i = 0
		}
		return sorted[i]
	}
	var b strings.Builder
	fmt.Fprintf(&b, `{"client": %q, "count": %d, "p50_us": %d, "p99_us": %d, "p999_us": %d, "max_us": %d`,
		client, len(lat), pct(0.50), pct(0.99), pct(0.999), pct(1))
	{
		b.WriteString(`, "latencies_us": [`)
		for i, v := range lat {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatInt(v, 10))
		}
		b.WriteByte(']')
	}
	b.WriteByte('}')
	return b.String()
}

// ---------------------------------------------------------------------------- process figures

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		fail(err)
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

func statusMB(key string) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), key+":") {
			fields := strings.Fields(sc.Text())
			kb, _ := strconv.ParseFloat(fields[1], 64)
			return kb / 1024
		}
	}
	return 0
}
