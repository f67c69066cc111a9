// Command harness drives the official Apache RocketMQ Go client (rocketmq-client-go/v2)
// for rmqpy's interop suite. Every event goes to stdout as one JSON object per line; the
// client's own logging stays on stderr.
//
//	harness produce -n HOST:PORT -topic T -group G -count N -tags A,B -keys k -prop name=value
//	harness consume -n HOST:PORT -topic T -group G -count N -tags 'A || B' -timeout 60s
//
// produce also takes -mode sync|async|oneway|batch and -delay LEVEL; consume takes -sql EXPR,
// -orderly, -broadcast, -from-last, -linger D (keep consuming after COUNT, to catch extra
// deliveries), -reconsume-later K (answer ConsumeRetryLater to the first K deliveries of every
// message) and -retry-delay-level L (the delay level asked for those redeliveries), -stop-file PATH
// (shut down cleanly once PATH exists; -count 0 then consumes until it does), -instance NAME and
// -goroutines N (consuming goroutines).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
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

func fail(stage string, err error) {
	emit(map[string]interface{}{"event": "error", "stage": stage, "error": err.Error()})
	os.Exit(1)
}

type opts struct {
	namesrv, topic, group, tags, keys, body, prop string
	mode, sql, stopFile, instance                 string
	accessKey, secretKey                          string
	count, delay, reconsumeLater, retryDelayLevel int
	goroutines                                    int
	timeout, linger                               time.Duration
	fromLast, orderly, broadcast                  bool
}

func parse(name string, args []string) opts {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	var o opts
	fs.StringVar(&o.namesrv, "n", "127.0.0.1:9876", "name server address(es), ';' separated")
	fs.StringVar(&o.topic, "topic", "GoTopic", "topic")
	fs.StringVar(&o.group, "group", "", "producer or consumer group (default: derived from the topic)")
	fs.IntVar(&o.count, "count", 1, "messages to send / to receive before stopping")
	fs.StringVar(&o.tags, "tags", "", "produce: comma-separated tags used in turn; consume: tag expression (default *)")
	fs.StringVar(&o.keys, "keys", "", "produce: key prefix (message i gets key PREFIX-i)")
	fs.StringVar(&o.body, "body", "go-body", "produce: body prefix (message i gets body PREFIX-i)")
	fs.StringVar(&o.prop, "prop", "harness=go", "produce: a user property name=value added to every message")
	fs.DurationVar(&o.timeout, "timeout", 60*time.Second, "overall time limit")
	fs.StringVar(&o.accessKey, "access-key", "", "ACL: sign every request with this access key (and -secret-key)")
	fs.StringVar(&o.secretKey, "secret-key", "", "ACL: the secret key of -access-key")
	fs.BoolVar(&o.fromLast, "from-last", false, "consume: start from the last offset instead of the first")
	fs.StringVar(&o.mode, "mode", "sync", "produce: sync|async|oneway|batch (batch: all COUNT in one send)")
	fs.IntVar(&o.delay, "delay", 0, "produce: delay time level")
	fs.StringVar(&o.sql, "sql", "", "consume: SQL92 filter expression (instead of -tags)")
	fs.BoolVar(&o.orderly, "orderly", false, "consume: orderly push consumer")
	fs.BoolVar(&o.broadcast, "broadcast", false, "consume: broadcasting instead of clustering")
	fs.DurationVar(&o.linger, "linger", 0, "consume: keep consuming this long after COUNT was reached")
	fs.IntVar(&o.reconsumeLater, "reconsume-later", 0, "consume: fail the first K deliveries of every message")
	fs.IntVar(&o.retryDelayLevel, "retry-delay-level", 1, "consume: delay level of the redeliveries asked for")
	fs.StringVar(&o.stopFile, "stop-file", "", "consume: shut down cleanly once this file exists (checked every 50 ms)")
	fs.StringVar(&o.instance, "instance", "", "consume: instance name (part of the client id)")
	fs.IntVar(&o.goroutines, "goroutines", 0, "consume: consuming goroutines (default: the client's, 20)")
	if err := fs.Parse(args); err != nil {
		os.Exit(2)
	}
	if o.group == "" {
		o.group = "GID_" + name + "_" + strings.ReplaceAll(o.topic, "%", "_")
	}
	return o
}

func resolver(o opts) primitive.NsResolver {
	return primitive.NewPassthroughResolver(strings.Split(o.namesrv, ";"))
}

func produce(o opts) int {
	popts := []producer.Option{
		producer.WithNsResolver(resolver(o)),
		producer.WithGroupName(o.group),
		producer.WithRetry(2),
		producer.WithSendMsgTimeout(10 * time.Second),
	}
	if o.accessKey != "" {
		popts = append(popts, producer.WithCredentials(primitive.Credentials{AccessKey: o.accessKey, SecretKey: o.secretKey}))
	}
	p, err := rocketmq.NewProducer(popts...)
	if err != nil {
		fail("new-producer", err)
	}
	if err := p.Start(); err != nil {
		fail("start-producer", err)
	}
	defer p.Shutdown()
	var tags []string
	if o.tags != "" {
		tags = strings.Split(o.tags, ",")
	}
	propName, propValue, _ := strings.Cut(o.prop, "=")
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	msgs := make([]*primitive.Message, o.count)
	tagOf := make([]string, o.count)
	keyOf := make([]string, o.count)
	for i := range msgs {
		msg := primitive.NewMessage(o.topic, []byte(fmt.Sprintf("%s-%d", o.body, i)))
		if len(tags) > 0 {
			tagOf[i] = tags[i%len(tags)]
			msg.WithTag(tagOf[i])
		}
		if o.keys != "" {
			keyOf[i] = fmt.Sprintf("%s-%d", o.keys, i)
			msg.WithKeys([]string{keyOf[i]})
		}
		if propName != "" {
			msg.WithProperty(propName, propValue)
		}
		if o.delay > 0 {
			msg.WithDelayTimeLevel(o.delay)
		}
		msgs[i] = msg
	}
	sentEvent := func(i int, res *primitive.SendResult) map[string]interface{} {
		ev := map[string]interface{}{
			"event": "sent", "index": i, "msgId": res.MsgID, "offsetMsgId": res.OffsetMsgID,
			"queueOffset": res.QueueOffset, "status": sendStatus(res.Status), "tags": tagOf[i], "keys": keyOf[i],
			"body": string(msgs[i].Body),
		}
		if res.MessageQueue != nil {
			ev["queueId"] = res.MessageQueue.QueueId
			ev["brokerName"] = res.MessageQueue.BrokerName
			ev["topic"] = res.MessageQueue.Topic
		}
		return ev
	}
	failed := 0
	sendErr := func(i int, err error) {
		failed++
		emit(map[string]interface{}{"event": "error", "stage": "send", "index": i, "error": err.Error()})
	}
	switch o.mode {
	case "sync":
		for i, msg := range msgs {
			res, err := p.SendSync(ctx, msg)
			if err != nil {
				sendErr(i, err)
				continue
			}
			emit(sentEvent(i, res))
		}
	case "batch":
		res, err := p.SendSync(ctx, msgs...)
		if err != nil {
			sendErr(-1, err)
			failed = o.count
		} else {
			ev := sentEvent(0, res)
			ev["event"], ev["batch"] = "sent-batch", o.count
			delete(ev, "index")
			emit(ev)
		}
	case "oneway":
		for i, msg := range msgs {
			if err := p.SendOneWay(ctx, msg); err != nil {
				sendErr(i, err)
				continue
			}
			emit(map[string]interface{}{"event": "sent-oneway", "index": i, "tags": tagOf[i], "keys": keyOf[i],
				"msgId": msg.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex)})
		}
	case "async":
		var wg sync.WaitGroup
		var fmu sync.Mutex
		for i, msg := range msgs {
			i := i
			wg.Add(1)
			err := p.SendAsync(ctx, func(_ context.Context, res *primitive.SendResult, err error) {
				defer wg.Done()
				if err != nil {
					fmu.Lock()
					sendErr(i, err)
					fmu.Unlock()
					return
				}
				emit(sentEvent(i, res))
			}, msg)
			if err != nil {
				wg.Done()
				fmu.Lock()
				sendErr(i, err)
				fmu.Unlock()
			}
		}
		wg.Wait()
	default:
		fail("args", fmt.Errorf("unknown -mode %q", o.mode))
	}
	emit(map[string]interface{}{"event": "done", "sent": o.count - failed, "failed": failed})
	if failed > 0 {
		return 1
	}
	return 0
}

func sendStatus(s primitive.SendStatus) string {
	switch s {
	case primitive.SendOK:
		return "SEND_OK"
	case primitive.SendFlushDiskTimeout:
		return "FLUSH_DISK_TIMEOUT"
	case primitive.SendFlushSlaveTimeout:
		return "FLUSH_SLAVE_TIMEOUT"
	case primitive.SendSlaveNotAvailable:
		return "SLAVE_NOT_AVAILABLE"
	default:
		return fmt.Sprintf("UNKNOWN(%d)", int(s))
	}
}

func consume(o opts) int {
	from := consumer.ConsumeFromFirstOffset
	if o.fromLast {
		from = consumer.ConsumeFromLastOffset
	}
	model := consumer.Clustering
	if o.broadcast {
		model = consumer.BroadCasting
	}
	options := []consumer.Option{
		consumer.WithNsResolver(resolver(o)),
		consumer.WithGroupName(o.group),
		consumer.WithConsumerModel(model),
		consumer.WithConsumeFromWhere(from),
		consumer.WithConsumerOrder(o.orderly),
	}
	if o.instance != "" {
		options = append(options, consumer.WithInstance(o.instance))
	}
	if o.accessKey != "" {
		options = append(options, consumer.WithCredentials(primitive.Credentials{AccessKey: o.accessKey, SecretKey: o.secretKey}))
	}
	if o.goroutines > 0 {
		options = append(options, consumer.WithConsumeGoroutineNums(o.goroutines))
	}
	c, err := rocketmq.NewPushConsumer(options...)
	if err != nil {
		fail("new-consumer", err)
	}
	sel := consumer.MessageSelector{Type: consumer.TAG, Expression: o.tags}
	if o.sql != "" {
		sel = consumer.MessageSelector{Type: consumer.SQL92, Expression: o.sql}
	} else if sel.Expression == "" {
		sel.Expression = "*"
	}
	var mu sync.Mutex
	received := 0                  // successful consumes
	deliveries := map[string]int{} // msgId -> deliveries seen
	done := make(chan struct{})
	err = c.Subscribe(o.topic, sel,
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			result := consumer.ConsumeSuccess
			for _, m := range msgs {
				mu.Lock()
				deliveries[m.MsgId]++
				n := deliveries[m.MsgId]
				mu.Unlock()
				res := "SUCCESS"
				if n <= o.reconsumeLater {
					res = "RECONSUME_LATER"
					result = consumer.ConsumeRetryLater
					if o.orderly {
						res, result = "SUSPEND", consumer.SuspendCurrentQueueAMoment
					}
				}
				ev := map[string]interface{}{
					"event": "received", "topic": m.Topic, "tags": m.GetTags(), "keys": m.GetKeys(),
					"body": string(m.Body), "queueOffset": m.QueueOffset, "msgId": m.MsgId,
					"offsetMsgId": m.OffsetMsgId, "reconsumeTimes": m.ReconsumeTimes,
					"properties": m.GetProperties(), "bornHost": m.BornHost, "storeHost": m.StoreHost,
					"delivery": n, "result": res,
				}
				if m.Queue != nil {
					ev["queueId"] = m.Queue.QueueId
					ev["brokerName"] = m.Queue.BrokerName
				}
				emit(ev)
			}
			if result == consumer.ConsumeSuccess {
				mu.Lock()
				received += len(msgs)
				if received >= o.count && o.count > 0 {
					select {
					case <-done:
					default:
						close(done)
					}
				}
				mu.Unlock()
			} else if cc, ok := primitive.GetConcurrentlyCtx(ctx); ok {
				cc.DelayLevelWhenNextConsume = o.retryDelayLevel
			}
			return result, nil
		})
	if err != nil {
		fail("subscribe", err)
	}
	if err := c.Start(); err != nil {
		fail("start-consumer", err)
	}
	emit(map[string]interface{}{"event": "started", "group": o.group, "instance": o.instance})
	stopped := make(chan struct{})
	if o.stopFile != "" {
		go func() {
			for {
				if _, err := os.Stat(o.stopFile); err == nil {
					close(stopped)
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	timedOut := false
	select {
	case <-done:
		time.Sleep(o.linger)
	case <-stopped:
	case <-time.After(o.timeout):
		timedOut = o.count > 0
	}
	_ = c.Shutdown() // persists the consumed offsets
	mu.Lock()
	n := received
	mu.Unlock()
	emit(map[string]interface{}{"event": "done", "received": n, "expected": o.count, "timedOut": timedOut,
		"stopped": o.stopFile != "" && !timedOut})
	if timedOut {
		return 3
	}
	return 0
}

func main() {
	rlog.SetLogLevel("warn")
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: harness produce|consume [flags]")
		os.Exit(2)
	}
	cmd, args := os.Args[1], os.Args[2:]
	o := parse(cmd, args)
	switch cmd {
	case "produce":
		os.Exit(produce(o))
	case "consume":
		os.Exit(consume(o))
	default:
		fmt.Fprintln(os.Stderr, "unknown subcommand", cmd)
		os.Exit(2)
	}
}
