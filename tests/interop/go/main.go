// Command harness drives the official Apache RocketMQ Go client (rocketmq-client-go/v2)
// for rmqpy's interop suite. Every event goes to stdout as one JSON object per line; the
// client's own logging stays on stderr.
//
//	harness produce -n HOST:PORT -topic T -group G -count N -tags A,B -keys k -prop name=value
//	harness consume -n HOST:PORT -topic T -group G -count N -tags 'A || B' -timeout 60s
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
	count                                         int
	timeout                                       time.Duration
	fromLast                                      bool
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
	fs.BoolVar(&o.fromLast, "from-last", false, "consume: start from the last offset instead of the first")
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
	p, err := rocketmq.NewProducer(
		producer.WithNsResolver(resolver(o)),
		producer.WithGroupName(o.group),
		producer.WithRetry(2),
		producer.WithSendMsgTimeout(10*time.Second),
	)
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
	deadline := time.Now().Add(o.timeout)
	failed := 0
	for i := 0; i < o.count; i++ {
		msg := primitive.NewMessage(o.topic, []byte(fmt.Sprintf("%s-%d", o.body, i)))
		tag := ""
		if len(tags) > 0 {
			tag = tags[i%len(tags)]
			msg.WithTag(tag)
		}
		key := ""
		if o.keys != "" {
			key = fmt.Sprintf("%s-%d", o.keys, i)
			msg.WithKeys([]string{key})
		}
		if propName != "" {
			msg.WithProperty(propName, propValue)
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		res, err := p.SendSync(ctx, msg)
		cancel()
		if err != nil {
			failed++
			emit(map[string]interface{}{"event": "error", "stage": "send", "index": i, "error": err.Error()})
			continue
		}
		ev := map[string]interface{}{
			"event": "sent", "index": i, "msgId": res.MsgID, "offsetMsgId": res.OffsetMsgID,
			"queueOffset": res.QueueOffset, "status": sendStatus(res.Status), "tags": tag, "keys": key,
		}
		if res.MessageQueue != nil {
			ev["queueId"] = res.MessageQueue.QueueId
			ev["brokerName"] = res.MessageQueue.BrokerName
			ev["topic"] = res.MessageQueue.Topic
		}
		emit(ev)
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
	c, err := rocketmq.NewPushConsumer(
		consumer.WithNsResolver(resolver(o)),
		consumer.WithGroupName(o.group),
		consumer.WithConsumerModel(consumer.Clustering),
		consumer.WithConsumeFromWhere(from),
	)
	if err != nil {
		fail("new-consumer", err)
	}
	expr := o.tags
	if expr == "" {
		expr = "*"
	}
	var mu sync.Mutex
	received := 0
	done := make(chan struct{})
	err = c.Subscribe(o.topic, consumer.MessageSelector{Type: consumer.TAG, Expression: expr},
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				ev := map[string]interface{}{
					"event": "received", "topic": m.Topic, "tags": m.GetTags(), "keys": m.GetKeys(),
					"body": string(m.Body), "queueOffset": m.QueueOffset, "msgId": m.MsgId,
					"offsetMsgId": m.OffsetMsgId, "reconsumeTimes": m.ReconsumeTimes,
					"properties": m.GetProperties(), "bornHost": m.BornHost, "storeHost": m.StoreHost,
				}
				if m.Queue != nil {
					ev["queueId"] = m.Queue.QueueId
					ev["brokerName"] = m.Queue.BrokerName
				}
				emit(ev)
				mu.Lock()
				received++
				if received == o.count {
					close(done)
				}
				mu.Unlock()
			}
			return consumer.ConsumeSuccess, nil
		})
	if err != nil {
		fail("subscribe", err)
	}
	if err := c.Start(); err != nil {
		fail("start-consumer", err)
	}
	timedOut := false
	select {
	case <-done:
	case <-time.After(o.timeout):
		timedOut = true
	}
	// give the offset of the last batch a chance to be committed before shutting down
	_ = c.Shutdown()
	mu.Lock()
	n := received
	mu.Unlock()
	emit(map[string]interface{}{"event": "done", "received": n, "expected": o.count, "timedOut": timedOut})
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
