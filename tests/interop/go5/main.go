// Command harness drives the official Apache RocketMQ 5.x Go client
// (github.com/apache/rocketmq-clients/golang/v5, gRPC) for rmqpy's interop suite. Every event goes
// to stdout as one JSON object per line; the client's own log goes to a file under -log-dir.
//
//	harness produce -endpoint HOST:PORT -sends 'TOPIC,N[,MSGGROUP[,PREFIX[,DELAYMS[,TAGS[,PROPS]]]]];...'
//	harness simple-consume -endpoint HOST:PORT -topic T -group G [-count N] [-inflight K] [-batch M]
//	        [-invisible D] [-await D] [-tags EXPR | -sql EXPR] [-no-ack B1,B2 [-hold-group]]
//	        [-change B=D,...] [-linger D] [-timeout D] [-stop-file PATH]
//
// produce sends with one Producer, in order, every run of -sends: N messages to TOPIC with bodies
// PREFIX-i (default msg-i), message group MSGGROUP (a FIFO message) if given, a delivery timestamp
// DELAYMS milliseconds after the send (a delay message) if given, the tags TAGS ('|' separated) in
// turn, and the user properties PROPS ('|' separated name=value, "{i}" in a value becomes i).
// Every message also gets the user property i=INDEX.
//
// simple-consume runs one SimpleConsumer with K goroutines each receiving (Receive: up to M messages
// hidden for D) in a loop, so K receives are in flight. Every delivery is acked, except: the first
// delivery of a body named by -no-ack is neither acked nor changed (it comes back after D); with
// -hold-group the messages after it in its batch and message group are not acked either (a FIFO
// consumer that failed); the first delivery of a body named by -change B=D gets
// ChangeInvisibleDuration(D) instead of an ack (D short: a nack). It stops -linger after N acks
// (N > 0), when -stop-file exists, or at -timeout (exit 3 when N > 0 and fewer were acked). Its done
// event counts the receives that returned and lists how long each empty one (MESSAGE_NOT_FOUND) took.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
	v2 "github.com/apache/rocketmq-clients/golang/v5/protocol/v2"
)

var outMu sync.Mutex

func emit(v map[string]interface{}) {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(fmt.Sprintf(`{"event":"error","error":%q}`, err.Error()))
	}
	outMu.Lock()
	os.Stdout.Write(append(b, '\n'))
	outMu.Unlock()
}

func now() int64 { return time.Now().UnixMilli() }

func fail(stage string, err error) {
	emit(map[string]interface{}{"event": "error", "stage": stage, "error": err.Error(), "at": now()})
	os.Exit(1)
}

type opts struct {
	endpoint, topic, group, sends, tags, sql, noAck, change, stopFile, logDir string
	count, inflight, batch                                                    int
	invisible, await, linger, timeout                                         time.Duration
	holdGroup                                                                 bool
}

func parse(name string, args []string) opts {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	var o opts
	fs.StringVar(&o.endpoint, "endpoint", "127.0.0.1:8081", "gRPC endpoint (rmqpy's grpcServerPort or Apache's proxy)")
	fs.StringVar(&o.logDir, "log-dir", "", "the client's log directory (default: $TMPDIR/rmqpy-go5-logs)")
	fs.StringVar(&o.sends, "sends", "", "produce: TOPIC,N[,MSGGROUP[,PREFIX[,DELAYMS[,TAGS[,PROPS]]]]];...")
	fs.StringVar(&o.topic, "topic", "", "simple-consume: topic")
	fs.StringVar(&o.group, "group", "", "simple-consume: consumer group")
	fs.IntVar(&o.count, "count", 0, "simple-consume: acks after which to linger and stop (0: until -stop-file or -timeout)")
	fs.IntVar(&o.inflight, "inflight", 1, "simple-consume: receives in flight (goroutines)")
	fs.IntVar(&o.batch, "batch", 16, "simple-consume: max messages per receive")
	fs.DurationVar(&o.invisible, "invisible", 20*time.Second, "simple-consume: invisible duration of a receive")
	fs.DurationVar(&o.await, "await", 5*time.Second, "simple-consume: the consumer's await (long polling) duration")
	fs.StringVar(&o.tags, "tags", "*", "simple-consume: tag filter expression")
	fs.StringVar(&o.sql, "sql", "", "simple-consume: SQL92 filter expression (instead of -tags)")
	fs.StringVar(&o.noAck, "no-ack", "", "simple-consume: bodies whose first delivery is not acked")
	fs.BoolVar(&o.holdGroup, "hold-group", false, "simple-consume: after a -no-ack message, ack nothing more of its group in that batch")
	fs.StringVar(&o.change, "change", "", "simple-consume: BODY=DURATION,...: first delivery gets ChangeInvisibleDuration instead of an ack")
	fs.DurationVar(&o.linger, "linger", 0, "simple-consume: keep receiving this long after -count acks")
	fs.DurationVar(&o.timeout, "timeout", 60*time.Second, "overall time limit")
	fs.StringVar(&o.stopFile, "stop-file", "", "simple-consume: stop once this file exists (checked every 50 ms)")
	if err := fs.Parse(args); err != nil {
		os.Exit(2)
	}
	return o
}

// setUpLog sends the client's log (zap, to $rocketmq.client.logRoot/rocketmq_client_go.log, by
// default under the process's "user.home" variable, unset: /logs) to the directory given.
func setUpLog(dir string) {
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "rmqpy-go5-logs")
	}
	os.Setenv("rocketmq.client.logRoot", dir)
	os.Setenv("mq.consoleAppender.enabled", "false")
	rmq.ResetLogger()
}

// noCredentials: the client signs every request and needs credentials to do so (a nil
// Config.Credentials panics in Sign); without ACL a user passes empty ones, as the examples do
func noCredentials() *credentials.SessionCredentials {
	return &credentials.SessionCredentials{}
}

type send struct {
	topic, group, prefix string
	count                int
	delay                time.Duration
	tags                 []string
	props                [][2]string
}

func parseSends(spec string) ([]send, error) {
	var out []send
	for _, run := range strings.Split(spec, ";") {
		if strings.TrimSpace(run) == "" {
			continue
		}
		f := strings.Split(run, ",")
		for len(f) < 7 {
			f = append(f, "")
		}
		n, err := strconv.Atoi(f[1])
		if err != nil {
			return nil, fmt.Errorf("bad count in %q", run)
		}
		s := send{topic: f[0], count: n, group: f[2], prefix: f[3]}
		if s.prefix == "" {
			s.prefix = "msg"
		}
		if f[4] != "" {
			ms, err := strconv.Atoi(f[4])
			if err != nil {
				return nil, fmt.Errorf("bad delay in %q", run)
			}
			s.delay = time.Duration(ms) * time.Millisecond
		}
		if f[5] != "" {
			s.tags = strings.Split(f[5], "|")
		}
		if f[6] != "" {
			for _, kv := range strings.Split(f[6], "|") {
				k, v, _ := strings.Cut(kv, "=")
				s.props = append(s.props, [2]string{k, v})
			}
		}
		out = append(out, s)
	}
	return out, nil
}

func produce(o opts) int {
	sends, err := parseSends(o.sends)
	if err != nil {
		fail("args", err)
	}
	var topics []string
	for _, s := range sends {
		topics = append(topics, s.topic)
	}
	p, err := rmq.NewProducer(&rmq.Config{Endpoint: o.endpoint, Credentials: noCredentials()}, rmq.WithTopics(topics...))
	if err != nil {
		fail("new-producer", err)
	}
	if err := p.Start(); err != nil {
		fail("start-producer", err)
	}
	defer p.GracefulStop()
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	sent, failed := 0, 0
	for _, s := range sends {
		for i := 0; i < s.count; i++ {
			body := fmt.Sprintf("%s-%d", s.prefix, i)
			msg := &rmq.Message{Topic: s.topic, Body: []byte(body)}
			ev := map[string]interface{}{"event": "sent", "topic": s.topic, "body": body, "index": i}
			msg.AddProperty("i", strconv.Itoa(i))
			props := map[string]string{"i": strconv.Itoa(i)}
			for _, kv := range s.props {
				v := strings.ReplaceAll(kv[1], "{i}", strconv.Itoa(i))
				msg.AddProperty(kv[0], v)
				props[kv[0]] = v
			}
			ev["properties"] = props
			if len(s.tags) > 0 {
				tag := s.tags[i%len(s.tags)]
				msg.SetTag(tag)
				ev["tag"] = tag
			}
			if s.group != "" {
				msg.SetMessageGroup(s.group)
				ev["group"] = s.group
			}
			if s.delay > 0 {
				at := time.Now().Add(s.delay)
				msg.SetDelayTimestamp(at)
				ev["deliverAt"] = at.UnixMilli()
			}
			res, err := p.Send(ctx, msg)
			if err != nil {
				failed++
				emit(map[string]interface{}{"event": "error", "stage": "send", "topic": s.topic, "body": body,
					"error": err.Error(), "at": now()})
				continue
			}
			if len(res) > 0 {
				ev["msgId"], ev["offset"] = res[0].MessageID, res[0].Offset
			}
			ev["at"] = now()
			emit(ev)
			sent++
		}
	}
	host, _ := os.Hostname() // what the client sends as each message's born host
	emit(map[string]interface{}{"event": "done", "sent": sent, "failed": failed, "hostname": host, "at": now()})
	if failed > 0 {
		return 1
	}
	return 0
}

func received(mv *rmq.MessageView, worker, receive int) map[string]interface{} {
	ev := map[string]interface{}{
		"event": "received", "msgId": mv.GetMessageId(), "topic": mv.GetTopic(), "body": string(mv.GetBody()),
		"attempt": mv.GetDeliveryAttempt(), "keys": mv.GetKeys(), "properties": mv.GetProperties(),
		"offset": mv.GetOffset(), "worker": worker, "receive": receive, "at": now(),
	}
	if t := mv.GetTag(); t != nil {
		ev["tag"] = *t
	}
	if g := mv.GetMessageGroup(); g != nil {
		ev["group"] = *g
	}
	if d := mv.GetDeliveryTimestamp(); d != nil {
		ev["deliverAt"] = d.UnixMilli()
	}
	if h := mv.GetBornHost(); h != nil {
		ev["bornHost"] = *h
	}
	return ev
}

func simpleConsume(o opts) int {
	if o.topic == "" || o.group == "" {
		fail("args", fmt.Errorf("-topic and -group are required"))
	}
	filter := rmq.NewFilterExpression(o.tags)
	if o.sql != "" {
		filter = rmq.NewFilterExpressionWithType(o.sql, rmq.SQL92)
	}
	c, err := rmq.NewSimpleConsumer(&rmq.Config{Endpoint: o.endpoint, ConsumerGroup: o.group, Credentials: noCredentials()},
		rmq.WithAwaitDuration(o.await),
		rmq.WithSubscriptionExpressions(map[string]*rmq.FilterExpression{o.topic: filter}))
	if err != nil {
		fail("new-consumer", err)
	}
	if err := c.Start(); err != nil {
		fail("start-consumer", err)
	}
	var mu sync.Mutex
	noAck := map[string]bool{}
	for _, b := range strings.Split(o.noAck, ",") {
		if b != "" {
			noAck[b] = true
		}
	}
	change := map[string]time.Duration{}
	for _, spec := range strings.Split(o.change, ",") {
		if spec == "" {
			continue
		}
		b, d, _ := strings.Cut(spec, "=")
		dur, err := time.ParseDuration(d)
		if err != nil {
			fail("args", fmt.Errorf("bad -change %q", spec))
		}
		change[b] = dur
	}
	acked, receives := 0, 0
	var emptyMs []int64 // how long each empty receive (MESSAGE_NOT_FOUND: the long poll ran out) took
	stop := make(chan struct{})
	var stopOnce sync.Once
	stopNow := func() { stopOnce.Do(func() { close(stop) }) }
	lingering := false
	deadline := time.Now().Add(o.timeout)
	emit(map[string]interface{}{"event": "started", "group": o.group, "topic": o.topic, "at": now()})
	var wg sync.WaitGroup
	for w := 0; w < o.inflight; w++ {
		w := w
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithDeadline(context.Background(), deadline)
				began := time.Now()
				mvs, err := c.Receive(ctx, int32(o.batch), o.invisible)
				took := time.Since(began).Milliseconds()
				cancel()
				mu.Lock()
				receives++
				mu.Unlock()
				if err != nil {
					select {
					case <-stop:
						return
					default:
					}
					// an empty long poll: the client answers the server's MESSAGE_NOT_FOUND as an error
					if st, ok := rmq.AsErrRpcStatus(err); ok && st.GetCode() == int32(v2.Code_MESSAGE_NOT_FOUND) {
						mu.Lock()
						emptyMs = append(emptyMs, took)
						mu.Unlock()
						continue
					}
					emit(map[string]interface{}{"event": "receive-error", "worker": w, "receive": n,
						"error": err.Error(), "at": now()})
					time.Sleep(200 * time.Millisecond)
					continue
				}
				held := map[string]bool{}
				for _, mv := range mvs {
					body := string(mv.GetBody())
					group := ""
					if g := mv.GetMessageGroup(); g != nil {
						group = *g
					}
					emit(received(mv, w, n))
					mu.Lock()
					skip := noAck[body]
					delete(noAck, body)
					d, changing := change[body]
					delete(change, body)
					mu.Unlock()
					if skip {
						if o.holdGroup {
							held[group] = true
						}
						continue
					}
					if held[group] {
						emit(map[string]interface{}{"event": "held", "msgId": mv.GetMessageId(), "body": body,
							"worker": w, "receive": n, "at": now()})
						continue
					}
					if changing {
						err := c.ChangeInvisibleDuration(mv, d)
						ev := map[string]interface{}{"event": "changed", "msgId": mv.GetMessageId(), "body": body,
							"ms": d.Milliseconds(), "worker": w, "receive": n, "at": now()}
						if err != nil {
							ev["error"] = err.Error()
						}
						emit(ev)
						continue
					}
					// before the ack is sent: a server may deliver what follows in a FIFO group only after
					emit(map[string]interface{}{"event": "acking", "msgId": mv.GetMessageId(), "body": body,
						"worker": w, "receive": n, "at": now()})
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					err := c.Ack(ctx, mv)
					cancel()
					if err != nil {
						emit(map[string]interface{}{"event": "ack-error", "msgId": mv.GetMessageId(), "body": body,
							"worker": w, "receive": n, "error": err.Error(), "at": now()})
						continue
					}
					emit(map[string]interface{}{"event": "acked", "msgId": mv.GetMessageId(), "body": body,
						"attempt": mv.GetDeliveryAttempt(), "worker": w, "receive": n, "at": now()})
					mu.Lock()
					acked++
					if o.count > 0 && acked >= o.count && !lingering {
						lingering = true
						time.AfterFunc(o.linger, stopNow)
					}
					mu.Unlock()
				}
			}
		}()
	}
	if o.stopFile != "" {
		go func() {
			for {
				if _, err := os.Stat(o.stopFile); err == nil {
					stopNow()
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	timedOut := false
	select {
	case <-stop:
	case <-time.After(time.Until(deadline)):
		timedOut = true
		stopNow()
	}
	mu.Lock()
	n := acked
	done := map[string]interface{}{"event": "done", "acked": n, "expected": o.count, "timedOut": timedOut,
		"receives": receives, "emptyMs": emptyMs, "at": now()}
	mu.Unlock()
	// receives still in flight end with their long poll; what they bring is not needed any more
	emit(done)
	finished := make(chan struct{})
	go func() {
		_ = c.GracefulStop()
		close(finished)
	}()
	select {
	case <-finished:
	case <-time.After(2 * time.Second):
	}
	if o.count > 0 && n < o.count {
		return 3
	}
	return 0
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: harness produce|simple-consume [flags]")
		os.Exit(2)
	}
	cmd, args := os.Args[1], os.Args[2:]
	o := parse(cmd, args)
	setUpLog(o.logDir)
	switch cmd {
	case "produce":
		os.Exit(produce(o))
	case "simple-consume":
		os.Exit(simpleConsume(o))
	default:
		fmt.Fprintln(os.Stderr, "unknown subcommand", cmd)
		os.Exit(2)
	}
}
