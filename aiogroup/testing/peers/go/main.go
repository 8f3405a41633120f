// aiogroup's franz-go peer: one kgo group consumer speaking aiogroup's peer protocol
// (docs/peers.md). Built by aiogroup.testing.peers with `go build` on first use.
//
//	aiogroup-franz-go-peer --bootstrap H:P --group G --topic T --name N
//	    [--assignors cooperative-sticky] [--instance-id I] [--session-ms 6000]
//	    [--heartbeat-ms 1000] [--rebalance-ms 10000] [--protocol classic|consumer]
//	    [--commit-every-ms 1000] [--max-records 50] [--commands] [--telemetry DIR]
//	    [--kind franz-go] [--client franz-go]
//
// stdout: one JSON object a line (owned, assigned, revoked, consumed, committed, error, closed).
// --commands: stdin lines "commit" and "close". --telemetry: aiogroup's telemetry schema v1.
// SIGTERM: a clean close. Rebalances are blocked while a poll's records are processed
// (BlockRebalanceOnPoll), so no record is processed after its partition was revoked.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type options struct {
	bootstrap, group, topic, name, assignors, instanceID, protocol string
	telemetry, kind, client                                        string
	sessionMs, heartbeatMs, rebalanceMs, commitEveryMs, maxRecords int
	commands                                                       bool
}

// out writes stdout events and the telemetry file (O_APPEND, one write per line).
type out struct {
	mu       sync.Mutex
	file     *os.File
	seq      int
	member   string
	client   string
	group    string
	host     string
	pid      int
	memberID string
}

func now() float64 { return float64(time.Now().UnixNano()) / 1e9 }

func (o *out) event(name string, fields map[string]any) {
	m := map[string]any{"event": name}
	for k, v := range fields {
		m[k] = v
	}
	line, _ := json.Marshal(m)
	o.mu.Lock()
	defer o.mu.Unlock()
	os.Stdout.Write(append(line, '\n'))
}

func (o *out) telemetry(kind string, fields map[string]any) {
	if o.file == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	m := map[string]any{
		"v": 1, "type": kind, "ts": now(), "seq": o.seq, "group": o.group, "member": o.member,
		"client": o.client, "pid": o.pid, "host": o.host, "member_id": nil,
	}
	if o.memberID != "" {
		m["member_id"] = o.memberID
	}
	o.seq++
	for k, v := range fields {
		m[k] = v
	}
	line, err := json.Marshal(m)
	if err == nil {
		_, err = o.file.Write(append(line, '\n'))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "telemetry write failed:", err)
	}
}

type peer struct {
	opt        options
	out        *out
	cl         *kgo.Client
	protocol   string
	rebalance  string
	mu         sync.Mutex // guards what the callbacks and the poll loop share
	processed  map[int32]int64
	sent       map[int32]int64
	owned      map[int32]bool
	lastGen    int32
	rebalStart float64
}

func numbers(m map[string][]int32, topic string) []int32 {
	ps := append([]int32{}, m[topic]...)
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	return ps
}

func (p *peer) generation() any {
	memberID, gen := p.cl.GroupMetadata()
	p.out.mu.Lock()
	if memberID != "" {
		p.out.memberID = memberID
	}
	p.out.mu.Unlock()
	if gen < 0 {
		return nil
	}
	return gen
}

// observe records a joined event when the member is in a generation not seen yet.
func (p *peer) observe() {
	memberID, gen := p.cl.GroupMetadata()
	if memberID == "" || gen <= 0 { // classic generations start at 1; KIP-848 epochs too
		return
	}
	p.mu.Lock()
	seen := gen == p.lastGen
	p.lastGen = gen
	p.mu.Unlock()
	if seen {
		return
	}
	var instance any
	if p.opt.instanceID != "" {
		instance = p.opt.instanceID
	}
	p.generation()
	p.out.telemetry("joined", map[string]any{
		"generation_id": gen, "protocol": p.protocol, "rebalance_protocol": p.rebalance,
		"leader": nil, "group_instance_id": instance,
	})
}

func (p *peer) callback(kind string, m map[string][]int32, gen any, started float64) {
	p.out.telemetry("partitions_"+kind, map[string]any{
		"generation_id": gen, "protocol": p.protocol, "rebalance_protocol": p.rebalance,
		"partitions": map[string][]int32{p.opt.topic: numbers(m, p.opt.topic)},
		"started":    started, "ended": now(), "error": nil,
	})
}

func (p *peer) onAssigned(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	started := now()
	p.mu.Lock()
	if p.rebalStart == 0 {
		p.rebalStart = started
	}
	p.mu.Unlock()
	p.observe()
	gen := p.generation()
	p.mu.Lock()
	for _, part := range m[p.opt.topic] {
		p.owned[part] = true
	}
	p.mu.Unlock()
	p.out.event("assigned", map[string]any{"partitions": numbers(m, p.opt.topic)})
	p.callback("assigned", m, gen, started)
	p.mu.Lock()
	latency := now() - p.rebalStart
	p.rebalStart = 0
	p.mu.Unlock()
	p.out.telemetry("rebalance_completed", map[string]any{"generation_id": gen, "latency_s": latency})
}

func (p *peer) release(kind string, m map[string][]int32) {
	started := now()
	p.mu.Lock()
	if p.rebalStart == 0 {
		p.rebalStart = started
	}
	p.mu.Unlock()
	gen := p.generation()
	parts := numbers(m, p.opt.topic)
	if kind == "revoked" && len(parts) > 0 {
		p.commit(parts, true) // what was processed, before it moves (KIP-429)
	}
	p.mu.Lock()
	for _, part := range parts {
		delete(p.processed, part)
		delete(p.sent, part)
		delete(p.owned, part)
	}
	p.mu.Unlock()
	if len(parts) > 0 { // franz-go ends every session with a revoke, often of nothing
		ev := map[string]any{"partitions": parts}
		if kind == "lost" {
			ev["lost"] = true
		}
		p.out.event("revoked", ev)
	}
	p.callback(kind, m, gen, started)
}

func errorCode(err error) any {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	return nil
}

// commit sends what was processed of parts; sync waits for the answer.
func (p *peer) commit(parts []int32, sync bool) map[string]int64 {
	offsets := map[int32]kgo.EpochOffset{}
	flat := map[string]int64{}
	p.mu.Lock()
	for _, part := range parts {
		next, ok := p.processed[part]
		if !ok || (!sync && p.sent[part] == next) {
			continue
		}
		if !sync {
			p.sent[part] = next
		}
		offsets[part] = kgo.EpochOffset{Epoch: -1, Offset: next}
		flat[fmt.Sprint(part)] = next
	}
	p.mu.Unlock()
	if len(offsets) == 0 {
		return flat
	}
	started := now()
	gen := p.generation()
	done := make(chan struct{})
	onDone := func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		defer close(done)
		if err == nil {
			for _, t := range resp.Topics {
				for _, part := range t.Partitions {
					if e := kerr.ErrorForCode(part.ErrorCode); e != nil && err == nil {
						err = e
					}
				}
			}
		}
		if err != nil {
			p.mu.Lock()
			for part, eo := range offsets {
				if p.sent[part] == eo.Offset {
					delete(p.sent, part) // try it again later
				}
			}
			p.mu.Unlock()
			p.out.telemetry("commit_failed", map[string]any{
				"generation_id": gen, "partitions": map[string]any{p.opt.topic: flat},
				"error": err.Error(), "state": nil, "local": false, "error_code": errorCode(err),
				"during_join": nil, "started": started,
			})
			p.out.event("error", map[string]any{"code": errorCode(err), "text": err.Error()})
			flat = map[string]int64{}
			return
		}
		p.out.telemetry("offsets_committed", map[string]any{
			"generation_id": gen, "offsets": map[string]any{p.opt.topic: flat}, "started": started,
		})
	}
	uncommitted := map[string]map[int32]kgo.EpochOffset{p.opt.topic: offsets}
	if sync {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p.cl.CommitOffsetsSync(ctx, uncommitted, onDone)
		<-done
		return flat
	}
	p.cl.CommitOffsets(context.Background(), uncommitted, onDone)
	return flat
}

func parse() options {
	var o options
	flag.StringVar(&o.bootstrap, "bootstrap", "", "HOST:PORT")
	flag.StringVar(&o.group, "group", "", "group id")
	flag.StringVar(&o.topic, "topic", "", "topic")
	flag.StringVar(&o.name, "name", "", "client id and telemetry member name")
	flag.StringVar(&o.assignors, "assignors", "cooperative-sticky", "range, roundrobin, sticky, cooperative-sticky (comma-separated)")
	flag.StringVar(&o.instanceID, "instance-id", "", "static membership (KIP-345)")
	flag.StringVar(&o.protocol, "protocol", "classic", "classic or consumer (KIP-848)")
	flag.StringVar(&o.telemetry, "telemetry", "", "telemetry directory")
	flag.StringVar(&o.kind, "kind", "franz-go", "the kind in the started event")
	flag.StringVar(&o.client, "client", "franz-go", "the telemetry client name")
	flag.IntVar(&o.sessionMs, "session-ms", 6000, "session timeout")
	flag.IntVar(&o.heartbeatMs, "heartbeat-ms", 1000, "heartbeat interval")
	flag.IntVar(&o.rebalanceMs, "rebalance-ms", 10000, "rebalance timeout")
	flag.IntVar(&o.commitEveryMs, "commit-every-ms", 1000, "periodic async commit (0: none)")
	flag.IntVar(&o.maxRecords, "max-records", 50, "records per poll")
	flag.BoolVar(&o.commands, "commands", false, "read commit/close commands on stdin")
	flag.Parse()
	if o.bootstrap == "" || o.group == "" || o.topic == "" || o.name == "" {
		fmt.Fprintln(os.Stderr, "--bootstrap, --group, --topic and --name are required")
		os.Exit(2)
	}
	return o
}

func balancers(o options) ([]kgo.GroupBalancer, string, string) {
	var bs []kgo.GroupBalancer
	cooperative := true
	protocol := ""
	for _, name := range strings.Split(o.assignors, ",") {
		switch strings.TrimSpace(name) {
		case "range":
			bs = append(bs, kgo.RangeBalancer())
		case "roundrobin":
			bs = append(bs, kgo.RoundRobinBalancer())
		case "sticky":
			bs = append(bs, kgo.StickyBalancer())
		case "cooperative-sticky":
			bs = append(bs, kgo.CooperativeStickyBalancer())
		default:
			fmt.Fprintf(os.Stderr, "unknown assignor %q\n", name)
			os.Exit(2)
		}
		if name != "cooperative-sticky" {
			cooperative = false
			if protocol == "" {
				protocol = name
			}
		}
	}
	if cooperative {
		return bs, "cooperative-sticky", "cooperative"
	}
	return bs, protocol, "eager"
}

func dumpOnSIGUSR1(o options) {
	dir := os.Getenv("PEER_TRACEBACKS")
	if dir == "" {
		return
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR1)
	go func() {
		for range ch {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			path := filepath.Join(dir, fmt.Sprintf("%s-%d.txt", o.name, os.Getpid()))
			_ = os.WriteFile(path, buf[:n], 0o644)
		}
	}()
}

func main() {
	o := parse()
	host, _ := os.Hostname()
	w := &out{member: o.name, client: o.client, group: o.group, host: host, pid: os.Getpid()}
	if o.telemetry != "" {
		safe := strings.Map(func(r rune) rune {
			if r < 128 && (r == '-' || r == '_' || r == '.' || ('0' <= r && r <= '9') || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z')) {
				return r
			}
			return '_'
		}, o.name)
		if err := os.MkdirAll(o.telemetry, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		f, err := os.OpenFile(filepath.Join(o.telemetry, safe+".0000.jsonl"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		w.file = f
	}
	dumpOnSIGUSR1(o)
	p := &peer{opt: o, out: w, processed: map[int32]int64{}, sent: map[int32]int64{}, owned: map[int32]bool{}, lastGen: -1}
	bs, protocol, rebalance := balancers(o)
	p.protocol, p.rebalance = protocol, rebalance
	opts := []kgo.Opt{
		kgo.SeedBrokers(o.bootstrap),
		kgo.ClientID(o.name),
		kgo.ConsumerGroup(o.group),
		kgo.ConsumeTopics(o.topic),
		kgo.Balancers(bs...),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.SessionTimeout(time.Duration(o.sessionMs) * time.Millisecond),
		kgo.HeartbeatInterval(time.Duration(o.heartbeatMs) * time.Millisecond),
		kgo.RebalanceTimeout(time.Duration(o.rebalanceMs) * time.Millisecond),
		kgo.OnPartitionsAssigned(p.onAssigned),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { p.release("revoked", m) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { p.release("lost", m) }),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelWarn, nil)),
	}
	if o.instanceID != "" {
		opts = append(opts, kgo.InstanceID(o.instanceID))
	}
	if o.protocol == "consumer" {
		opts = append(opts, kgo.ServerSideBalancer()) // KIP-848: the broker assigns
		p.protocol, p.rebalance = "consumer", "cooperative"
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		w.telemetry("error", map[string]any{"where": "main", "error": err.Error()})
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	p.cl = cl
	os.Exit(p.run())
}
