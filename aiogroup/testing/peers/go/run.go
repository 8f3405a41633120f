package main

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ownedNow is the partitions the callbacks gave and did not take back, sorted.
func (p *peer) ownedNow() []int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps := make([]int32, 0, len(p.owned))
	for part := range p.owned {
		ps = append(ps, part)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	return ps
}

func readCommands(commands chan<- string) {
	scanner := bufio.NewScanner(os.Stdin)
	for scanner.Scan() {
		commands <- strings.TrimSpace(scanner.Text())
	}
	commands <- "close" // stdin closed: the test is gone
}

func equal(a, b []int32) bool {
	if a == nil || len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// run polls until SIGTERM, a close command or a fatal error, then closes; the exit code.
func (p *peer) run() int {
	w := p.out
	p.mu.Lock()
	p.rebalStart = now() // the first rebalance starts with the subscription
	p.mu.Unlock()
	w.telemetry("started", map[string]any{"kind": p.opt.kind})
	var stopping atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		stopping.Store(true)
		cancel() // ends a poll under way
	}()
	commands := make(chan string, 16)
	if p.opt.commands {
		go readCommands(commands)
	}
	var consumed int64
	var lastOwned []int32
	lastCommit := time.Now()
	code := 0
	for !stopping.Load() {
		pollCtx, pollCancel := context.WithTimeout(ctx, 100*time.Millisecond)
		fetches := p.cl.PollRecords(pollCtx, p.opt.maxRecords)
		pollCancel()
		if fetches.IsClientClosed() {
			break
		}
		fatal := false
		fetches.EachError(func(_ string, _ int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return
			}
			c := errorCode(err)
			w.event("error", map[string]any{"code": c, "text": err.Error()})
			if c == int16(82) { // FENCED_INSTANCE_ID: another process took our instance id
				w.telemetry("client_error", map[string]any{"error": err.Error()})
				fatal = true
			}
		})
		// Rebalances wait until AllowRebalance: what was polled is processed while owned.
		n := 0
		gen := p.generation()
		fetches.EachPartition(func(ftp kgo.FetchTopicPartition) {
			if len(ftp.Records) == 0 {
				return
			}
			first, last := ftp.Records[0].Offset, ftp.Records[len(ftp.Records)-1].Offset
			p.mu.Lock()
			p.processed[ftp.Partition] = last + 1
			p.mu.Unlock()
			w.telemetry("processed", map[string]any{
				"generation_id": gen, "topic": ftp.Topic, "partition": ftp.Partition,
				"first": first, "last": last,
			})
			n += len(ftp.Records)
		})
		if n > 0 {
			consumed += int64(n)
			w.event("consumed", map[string]any{"count": consumed})
		}
		p.observe()
		owned := p.ownedNow()
		if !equal(owned, lastOwned) {
			lastOwned = owned
			w.event("owned", map[string]any{"partitions": owned})
		}
		if p.opt.commitEveryMs > 0 && time.Since(lastCommit) >= time.Duration(p.opt.commitEveryMs)*time.Millisecond {
			lastCommit = time.Now()
			p.commit(owned, false)
		}
		select {
		case command := <-commands:
			if command == "commit" {
				w.event("committed", map[string]any{"offsets": p.commit(owned, true)})
			} else if command == "close" {
				stopping.Store(true)
			}
		default:
		}
		p.cl.AllowRebalance()
		if fatal {
			code = 1
			break
		}
	}
	// Leaves the group (unless static): the revoke callback commits what was processed.
	p.cl.CloseAllowingRebalance()
	w.event("closed", map[string]any{})
	var gen any
	p.mu.Lock()
	if p.lastGen > 0 {
		gen = p.lastGen
	}
	p.mu.Unlock()
	w.telemetry("closed", map[string]any{"generation_id": gen, "errors": 0})
	if w.file != nil {
		_ = w.file.Close()
	}
	return code
}
