"""The remoting differential harness's CI set (tests/interop/remoting_diff.py): every case sent over
plain TCP to rmqpy's broker and name server and to the Java 5.3.3 ones, both started once for the
module and set up alike; each difference in response code, remark, extFields or body must be one of
:data:`KNOWN`, each written down in docs/compatibility.md ("Remoting validation, call by call").
The long run: ``python bench/remoting_diff_long.py --count N``.
"""
from __future__ import annotations

import re
import time
from collections import Counter

import pytest

from tests.interop import diff_common, remoting_diff

pytestmark = pytest.mark.interop

#: Java's answer when a request made it fail: SYSTEM_ERROR and its exception's text
_JAVA_EXCEPTION = re.compile(r"^(java\.|com\.alibaba\.fastjson\.|org\.apache\.rocketmq\.remoting\.exception\.)")


def java_failed(r: remoting_diff.Result) -> bool:
    """Java failed with an exception where rmqpy refused the request (not a SUCCESS)."""
    return r.theirs.code == "SYSTEM_ERROR" and bool(_JAVA_EXCEPTION.match(r.theirs.remark)) \
        and r.ours.code not in ("SUCCESS", "TIMEOUT", "CLOSED", "HARNESS")


def header_refused(r: remoting_diff.Result) -> bool:
    """rmqpy refused a header field (missing, or a number Java could not read either)."""
    return r.ours.code == "SYSTEM_ERROR" and r.ours.remark.startswith(("HeaderError: ", "the custom field <"))


_BODY_REFUSED = re.compile(r"^(bad request body: |BodyError: |JSONDecodeError: |the specified group is blank)")


def body_refused(r: remoting_diff.Result) -> bool:
    """rmqpy refused a body that does not decode (or names no group)."""
    return r.ours.code == "SYSTEM_ERROR" and bool(_BODY_REFUSED.match(r.ours.remark))


_BOUND = re.compile(r"must be in \[|is out of range \[|^attributes are too long$|^delete attribute format is wrong: ")


def rmqpy_bound(r: remoting_diff.Result) -> bool:
    """rmqpy refused a value past one of its own bounds."""
    return r.ours.code in ("INVALID_PARAMETER", "SYSTEM_ERROR") and bool(_BOUND.search(r.ours.remark))


def filter_type_refused(r: remoting_diff.Result) -> bool:
    """Java refused a topicFilterType rmqpy took."""
    return r.ours.code == "SUCCESS" and "topicFilterType = [" in r.theirs.remark


_TX_ID = r"^ext: \((.*)\) != \(\1, \('transactionId', '<v>'\)\)$"

#: the differences written down in docs/compatibility.md ("Remoting validation, call by call"): a
#: case name pattern; a pattern that each difference must match, or a test of the whole result that
#: explains all of its differences; the reason
KNOWN: list[diff_common.Rule] = [
    (r".", java_failed, "a malformed request: Java fails with its exception (NullPointerException, "
     "NumberFormatException, fastjson's JSONException ...), rmqpy refuses it naming the field or the body"),
    (r".", r"""^remark: (['"])(.*)http://rocketmq\.apache\.org/docs/faq/(.*)\1 != \1\2https://rocketmq\.apache\.org/docs/bestPractice/06FAQ\3\1$""",
     "rmqpy's remarks keep 4.9's FAQ link for every client generation"),
    (r".", r"^remark: '' != 'not set any response code'$",
     "Java's default remark of an answer its processor left without one (createResponseCommand); rmqpy sends none"),
    (r"^(POP_MESSAGE|PEEK_MESSAGE)\[", r"^ext: \(\) != \(\('invisibleTime', '\d+'\), \('popTime', '<v>'\), "
     r"\('restNum', '<v>'\), \('reviveQid', '<v>'\)\)$",
     "Java's pop/peek answer without messages still carries popTime, invisibleTime, reviveQid and restNum; rmqpy sends none"),
    (r"^PEEK_MESSAGE\[", r"^ext: \(\('invisibleTime', '0'\), \('msgOffsetInfo', '<v>'\), \('popTime', '<v>'\), "
     r"\('restNum', '<v>'\), \('reviveQid', '<v>'\), \('startOffsetInfo', '<v>'\)\) != \(\('invisibleTime', '0'\), "
     r"\('popTime', '<v>'\), \('restNum', '<v>'\), \('reviveQid', '<v>'\)\)$",
     "rmqpy's peek answer carries the offset infos of a pop; Java's PeekMessageProcessor leaves them out"),
    (r"^QUERY_CONSUMER_OFFSET\[", r"^code: 'SUCCESS' != 'QUERY_NOT_FOUND'$|"
     r"^remark: '' != 'Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first'$|^ext: \(\('offset', '0'\),\) != \(\)$",
     "a queue without an offset that never had a message: rmqpy answers 0 to every client (\"Where rmqpy deliberately differs\")"),
    (r"^UPDATE_CONSUMER_OFFSET\[",
     r"^code: 'SUCCESS' != '(SUBSCRIPTION_GROUP_NOT_EXIST|TOPIC_NOT_EXIST)'$|^remark: '' != '(Group|Topic) .* not exist!'$",
     "5.3.3 refuses an offset of an unknown group or topic; 4.9.x and rmqpy store it"),
    (r"^SEND_MESSAGE_V2\[send-v2(:e=-1)?\]|^SEND_MESSAGE\[send(:queueId=-1)?\]",  # a generated case: its base's name
     r"^ext: \((.*)\('queueId', '\d+'\)(.*)\) != \(\1\('queueId', '\d+'\)\2\)$",
     "a send to a negative queue id: each broker picks a random queue"),
    (r"^PEEK_MESSAGE\[peek:queueId=-1\]", r".", "a peek of queue -1: each broker starts at a random queue"),
    (r".", header_refused, "a required field missing or a number Java cannot read: rmqpy refuses the request "
     "naming the field, as Java's generic header decode does; Java's hand-written decode of that header skips "
     "the check and fails later, answers otherwise, or serves"),
    (r".", body_refused, "a body that does not decode or names no group: rmqpy refuses it; Java fails with "
     "its exception or serves an empty one"),
    (r".", rmqpy_bound, "a value past a bound rmqpy sets (pop pollTime, peek num, invisibleTime, queue numbers "
     "of a topic, attributes' length): refused; Java serves it, fails, or answers otherwise"),
    (r"^(SEND_MESSAGE|SEND_MESSAGE_V2)\[", _TX_ID,
     "5.3.3 gives a message sent without a UNIQ_KEY one of its own (answered as transactionId); "
     "4.9.x and rmqpy store it without"),
    (r"^(SEND_MESSAGE|SEND_MESSAGE_V2)\[send(-v2)?:(f|sysFlag)=(-1|max-int)\]", r".",
     "open: rmqpy stores a message whose sysFlag has every bit set; Java refuses it (MESSAGE_ILLEGAL)"),
    (r"^SEND_MESSAGE\[send:body=empty\]", r".",
     "open: rmqpy stores a message without a body; Java fails (NullPointerException); stock clients refuse "
     "an empty body before sending"),
    (r"^(SEND_MESSAGE|SEND_MESSAGE_V2)\[send(-v2)?:(m|batch)=TRUE\]", r".",
     "a single message flagged as a batch: rmqpy MESSAGE_ILLEGAL, Java fails decoding it (BufferUnderflowException)"),
    (r"^POLLING_INFO\[", r"^ext: \(\) != \(\('pollingNum', '0'\),\)$",
     "Java's POLLING_INFO answer carries pollingNum 0 also with an error; rmqpy none"),
    (r"^CHANGE_MESSAGE_INVISIBLETIME\[", r"^ext: \(\) != \(\('invisibleTime', '-?\d+'\), \('popTime', '<v>'\), "
     r"\('reviveQid', '<v>'\)\)$",
     "Java's answer to a forged handle of an unknown queue or offset is SUCCESS with its header; rmqpy answers "
     "without the header"),
    (r"^UPDATE_AND_CREATE_TOPIC\[", filter_type_refused,
     "open: rmqpy takes any topicFilterType; Java refuses all but SINGLE_TAG/MULTI_TAG (CreateTopicRequestHeader."
     "checkFields)"),
    (r"^QUERY_CONSUME_QUEUE\[", r"^code: 'SYSTEM_ERROR' != 'SUCCESS'$|^remark: '(-?\d+@.*) is not exist!' != "
     r"'Index -?\d+ of \1 is not exist!'$",
     "a queue that does not exist: 5.3.3 makes it on lookup and answers SUCCESS, 'Index 0 of ...'; rmqpy "
     "answers 4.9.x's SYSTEM_ERROR"),
    (r"^QUERY_CONSUME_QUEUE\[", r"^body: line 1: '\"filterData\": \"(\S+ is not online!|null)\",' != ",
     "open: queryCq's filterData: after the HEART_BEAT case that subscribes the group to another topic only, "
     "rmqpy no longer finds the group's subscription of the topic, Java 5.3.3 still does"),
    (r"^GET_ALL_(TOPIC_CONFIG|SUBSCRIPTIONGROUP_CONFIG|CONSUMER_OFFSET|DELAY_OFFSET)\[|^GET_BROKER_CONFIG\[",
     r"stateVersion|dataVersion|groupTopicMap",
     "5.x's DataVersion adds stateVersion, its offset wrappers a dataVersion (and groupTopicMap); rmqpy "
     "writes 4.9's"),
    (r"^(GET_CONSUME_STATS|GET_BROKER_CONSUME_STATS|GET_ALL_CONSUMER_OFFSET|QUERY_TOPIC_CONSUME_BY_WHO|"
     r"GET_TOPIC_STATS_INFO|QUERY_CONSUME_TIME_SPAN)\[", r"^body: ",
     "open: consumer offsets and stats differ (rmqpy's consume stats of an online group list no queue, and "
     "offsets Java refused above are stored by rmqpy): needs its own look"),
    (r"^(GET_SYSTEM_TOPIC_LIST_FROM_BROKER|GET_ALL_TOPIC_LIST_FROM_NAMESERVER|GET_TOPICS_BY_CLUSTER)\[",
     r"^body: ",
     "5.3.3's system topics rmqpy does not make (CHECKPOINT_TOPIC, rmq_sys_wheel_timer, "
     "rmq_sys_SYNC_BROKER_MEMBER_<broker>) and the transaction topics it registers with the name server"),
    (r"^(GET_BROKER_CONFIG|GET_NAMESRV_CONFIG|GET_BROKER_RUNTIME_INFO)\[", r"^body: ",
     "the keys of a server's own settings and figures (\"getBrokerConfig\" above; runtime info: each "
     "server's own table)"),
    (r"^(QUERY_TOPICS_BY_CONSUMER|QUERY_SUBSCRIPTION_BY_CONSUMER)\[", r".",
     "open: 343 and 345 (mqadmin queryTopicsByConsumer/querySubscriptionByConsumer, 5.x) are not served by rmqpy"),
    (r"^VIEW_MESSAGE_BY_ID\[", r"^code: 'SYSTEM_ERROR' != 'SUCCESS'$|^remark: 'can not find message by the offset, "
     r"\d+' != ''$|^body: 0 lines != 1 lines: '<\d+ bytes, not records: RecordError>'$",
     "an offset that is no message's start: Java answers the bytes it reads there (no record), rmqpy refuses"),
    (r"^LOCK_BATCH_MQ\[lock:body=other-broker\]", r"^body: ",
     "open: a lock of another broker's queues: the queues answered locked differ"),
    (r"^GET_ROUTEINFO_BY_TOPIC\[|^GET_KV_CONFIG\[|^GET_KVLIST_BY_NAMESPACE\[|^GET_TOPICS_BY_CLUSTER\[",
     r"HeaderError|TOPIC_NOT_EXIST|QUERY_NOT_FOUND|No config item|No topic route",
     "a missing required field of a name server request: rmqpy refuses naming it; Java reads it as null"),
]


def explained(result: remoting_diff.Result) -> str | None:
    """The reason of a case's differences when every one of them is known, else None."""
    return diff_common.explained(result, KNOWN)


@pytest.fixture(scope="module")
def both(java_built, tmp_path_factory):
    b = remoting_diff.Both(tmp_path_factory.mktemp("remoting-diff"))
    try:
        yield b
    finally:
        b.close()


def test_rmqpy_answers_every_remoting_case_as_java(both: remoting_diff.Both) -> None:
    started = time.monotonic()
    results = remoting_diff.run(both.ours, both.theirs, remoting_diff.cases())
    bad = [f"{r.case.name}:\n    " + "\n    ".join(r.differences) for r in results
           if r.differences and not explained(r)]
    known = Counter(explained(r) for r in results if r.differences and explained(r))
    print(f"{len(results)} cases (Java {both.version}) in {time.monotonic() - started:.1f} s: "
          f"{sum(known.values())} with known differences ({len(known)} reasons), {len(bad)} unknown")
    assert not bad, f"{len(bad)} unexplained differences (rmqpy != java):\n" + "\n".join(bad)


def test_the_harness_sees_a_difference(both: remoting_diff.Both) -> None:
    """A case whose two answers must differ (a topic on one side only) is reported: the comparison is
    no tautology."""
    case = remoting_diff.Case(17, "one-side", lambda s: remoting_diff.topic_request(f"RDiffOnly{s.name}"))
    probe = remoting_diff.Case(351, "one-side", lambda s: remoting_diff.Request({"topic": "RDiffOnlyrmqpy"}))
    assert both.ours.ask(case).code == "SUCCESS" and both.theirs.ask(case).code == "SUCCESS"
    result = remoting_diff.Result(probe, both.ours.ask(probe), both.theirs.ask(probe))
    assert result.differences and not explained(result), result
