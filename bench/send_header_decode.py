"""CPU per send-header decode, as ``SendMessageProcessor.process_request`` decodes it (issue 27).

    PYTHONPATH=. python3 bench/send_header_decode.py [LABEL]

Not a test. Times the header decode alone for SEND_MESSAGE_V2 (short keys, the header of
bench/send_path_profile.py) and SEND_MESSAGE (long keys): ``time.process_time``, the minimum
of 7 runs of 50,000. It also runs on a checkout from before the precompiled schemas (it then
times the exec'd V2 decoder and the general decode), so that before and after can be
measured back to back from two checkouts.
"""
from __future__ import annotations

import sys
import time
import timeit
from typing import Any, Callable

from rmqpy.broker.processor import send as S
from rmqpy.protocol.codes import RequestCode
from rmqpy.protocol.command import RemotingCommand
from rmqpy.protocol.headers.broker import SendMessageRequestHeader, SendMessageRequestHeaderV2

SHORT = {"a": "bench_producer", "b": "BenchTopic", "c": "TBW102", "d": "4", "e": "1", "f": "0",
         "g": "1700000000000", "h": "0", "i": "UNIQ_KEY\x017F00000100002A9F0000000000000001\x02WAIT\x01true\x02",
         "j": "0", "k": "false", "m": "false"}
LONG_NAMES = dict(zip("abcdefghijklmn", [
    "producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId", "sysFlag", "bornTimestamp",
    "flag", "properties", "reconsumeTimes", "unitMode", "maxReconsumeTimes", "batch", "brokerName"]))


def decoders() -> list[tuple[str, Callable[[], Any]]]:
    v2 = RemotingCommand(code=RequestCode.SEND_MESSAGE_V2, ext_fields=SHORT)
    v1 = RemotingCommand(code=RequestCode.SEND_MESSAGE, ext_fields={LONG_NAMES[k]: v for k, v in SHORT.items()})
    decode = getattr(S, "decode_send_header", None)
    if decode is not None:
        return [("SEND_MESSAGE_V2", lambda: decode(v2)), ("SEND_MESSAGE", lambda: decode(v1))]
    fast = getattr(S, "_decode_v2_header", None)  # before: the exec'd decoder, then the general one

    def old_v2() -> Any:
        header = fast(v2.ext_fields or {}) if fast is not None else None
        return header if header is not None else v2.decode_header(SendMessageRequestHeaderV2).to_v1()

    return [("SEND_MESSAGE_V2", old_v2), ("SEND_MESSAGE", lambda: v1.decode_header(SendMessageRequestHeader))]


def main() -> None:
    label = sys.argv[1] if len(sys.argv) > 1 else ""
    for name, fn in decoders():
        best = min(timeit.Timer(fn, timer=time.process_time).repeat(number=50000, repeat=7)) / 50000
        print(f"{label} {name} {best * 1e6:.2f} us")


if __name__ == "__main__":
    main()
